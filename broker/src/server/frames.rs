//! Reading request frames within the connection's frame allowance.
//!
//! QUIC flow control bounds only the bytes the broker has not read yet: once a stream's bytes
//! are read into a partial frame's buffer the client is given new credit, so the receive window
//! alone would let one connection hold `max_concurrent_streams` partial frames of
//! `max_frame_bytes` each. Every stream of a connection therefore reads through
//! [`read_frame_within`] into a [`FrameBuf`], which holds of the connection's [`Allowance`]
//! what the buffer may hold after each read, and gives it back whenever the buffer is empty.
//! Small frames are read a chunk at a time (one read and at most one wait on the allowance for
//! many frames: reading frame by frame cost 30 % of 256-byte publish throughput); a frame larger
//! than a chunk holds its announced length and is read to its end, never past it. When the
//! allowance is exhausted the stream stops reading and QUIC flow control stops the client; only
//! that connection waits. The allowance holds at least one largest frame, so a frame that was
//! announced can always complete.

use std::sync::Arc;

use bytes::BytesMut;
use starling_proto::{DecodeError, Frame, FrameDecoder, HEADER_LEN, ReadError};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of partial frames one connection's streams may hold together.
#[derive(Clone)]
pub struct Allowance {
    permits: Arc<Semaphore>,
    /// What the allowance holds when nothing is taken: no stream ever waits for more.
    capacity: usize,
}

impl Allowance {
    /// The allowance of a connection granted `bytes` (at least one frame of `max_frame_bytes`
    /// with its header; see [`Allowance::bytes`]).
    pub fn new(bytes: u64) -> Allowance {
        let n = usize::try_from(bytes)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS)
            .min(u32::MAX as usize);
        Allowance {
            permits: Arc::new(Semaphore::new(n)),
            capacity: n,
        }
    }

    /// The allowance of a connection whose receive window is `recv_window`: as much, but at
    /// least one largest frame.
    pub fn bytes(recv_window: u64, max_frame_bytes: u32) -> u64 {
        recv_window.max(u64::from(max_frame_bytes) + HEADER_LEN as u64)
    }

    /// Waits for `bytes` of the allowance.
    async fn take(&self, bytes: usize) -> Result<OwnedSemaphorePermit, ReadError> {
        let n = u32::try_from(bytes).unwrap_or(u32::MAX);
        Arc::clone(&self.permits)
            .acquire_many_owned(n)
            .await
            .map_err(|_| ReadError::UnexpectedEof)
    }
}

/// A stream's read buffer together with the part of its connection's [`Allowance`] that the
/// buffered bytes hold. The hold moves with the buffer (from the stream's router to its
/// handler) and is given back whenever the buffer is empty, so an idle stream holds nothing.
#[derive(Default)]
pub struct FrameBuf {
    bytes: BytesMut,
    held: Option<OwnedSemaphorePermit>,
    held_bytes: usize,
}

impl FrameBuf {
    /// An empty buffer holding nothing.
    pub fn new() -> FrameBuf {
        FrameBuf::default()
    }

    /// Decodes the next complete frame already buffered, without reading. Gives the hold back
    /// once the buffer is empty.
    pub fn decode(&mut self, dec: &FrameDecoder) -> Result<Option<Frame>, DecodeError> {
        let frame = dec.decode(&mut self.bytes)?;
        if self.bytes.is_empty() {
            self.held = None;
            self.held_bytes = 0;
        }
        Ok(frame)
    }

    /// Whether nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Holds at least `bytes` of `allowance`. All or nothing: what is held is given back while
    /// the whole amount is awaited, so no stream holds part of the allowance while it waits for
    /// more of it (two streams can never wait on each other).
    async fn hold(&mut self, allowance: &Allowance, bytes: usize) -> Result<(), ReadError> {
        if bytes <= self.held_bytes {
            return Ok(());
        }
        self.held = None;
        self.held_bytes = 0;
        self.held = Some(allowance.take(bytes).await?);
        self.held_bytes = bytes;
        Ok(())
    }
}

/// The whole frame's length (header included) once `buf` holds its header.
fn announced(buf: &[u8]) -> Option<usize> {
    let len = buf.get(4..HEADER_LEN)?;
    let len = u32::from_be_bytes(len.try_into().ok()?);
    usize::try_from(len).ok()?.checked_add(HEADER_LEN)
}

/// Reads the next frame from `r` into `buf` like `starling_proto::read_frame`, holding of
/// `allowance` what the buffer may hold after each read. `Ok(None)` at a clean end of stream.
/// Cancel-safe: what was read stays in `buf`, and so does what it holds.
///
/// Small frames are read a chunk at a time (`read_chunk`), so one read (and at most one wait
/// on the allowance) serves many frames; the buffer then holds less than two chunks. A frame
/// larger than a chunk takes its announced length once, and its payload is read up to its end
/// and never past it, so the buffer holds at most that frame. Either way a stream never holds
/// more than the allowance's capacity, which is at least one largest frame.
pub async fn read_frame_within<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut FrameBuf,
    dec: &FrameDecoder,
    read_chunk: usize,
    allowance: &Allowance,
) -> Result<Option<Frame>, ReadError> {
    let chunk = read_chunk.max(1);
    loop {
        // The decoder checks the announced length against `max_frame_bytes` before anything is
        // held for it.
        if let Some(frame) = buf.decode(dec)? {
            return Ok(Some(frame));
        }
        let len = buf.bytes.len();
        let (step, need) = match announced(&buf.bytes) {
            Some(total) if total > chunk => (total.saturating_sub(len).clamp(1, chunk), total),
            _ => {
                let step = chunk.min(allowance.capacity.saturating_sub(len)).max(1);
                (step, len + step)
            }
        };
        buf.hold(allowance, need.min(allowance.capacity)).await?;
        buf.bytes.reserve(step);
        let n = (&mut *r).take(step as u64).read_buf(&mut buf.bytes).await?;
        if n == 0 {
            return if buf.bytes.is_empty() {
                buf.held = None;
                buf.held_bytes = 0;
                Ok(None)
            } else {
                Err(ReadError::UnexpectedEof)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::Ping;

    fn ping_bytes(n: u64) -> Vec<u8> {
        Frame::Ping(Ping { nonce: n }).to_bytes().to_vec()
    }

    #[tokio::test]
    async fn frames_larger_than_a_chunk_are_read_to_their_end_and_never_past_it() {
        let mut wire = ping_bytes(1);
        wire.extend(ping_bytes(2));
        let mut r = wire.as_slice();
        let (mut buf, dec) = (FrameBuf::new(), FrameDecoder::new(1 << 16));
        let allowance = Allowance::new(Allowance::bytes(0, 1 << 16));
        for nonce in [1, 2] {
            // A 4-byte chunk makes the 16-byte ping a large frame.
            let f = read_frame_within(&mut r, &mut buf, &dec, 4, &allowance).await;
            assert!(matches!(f, Ok(Some(Frame::Ping(p))) if p.nonce == nonce));
            // Nothing of the next frame was read ahead, and nothing is held.
            assert!(buf.is_empty());
            assert_eq!(buf.held_bytes, 0);
        }
        let end = read_frame_within(&mut r, &mut buf, &dec, 4, &allowance).await;
        assert!(matches!(end, Ok(None)));
        assert_eq!(
            allowance.permits.available_permits() as u64,
            Allowance::bytes(0, 1 << 16)
        );
    }

    #[tokio::test]
    async fn small_frames_share_one_chunk_read_and_its_hold() {
        let wire: Vec<u8> = (0..10).flat_map(ping_bytes).collect();
        let mut r = wire.as_slice();
        let (mut buf, dec) = (FrameBuf::new(), FrameDecoder::new(1 << 16));
        let allowance = Allowance::new(Allowance::bytes(0, 1 << 16));
        let capacity = Allowance::bytes(0, 1 << 16) as usize;
        let f = read_frame_within(&mut r, &mut buf, &dec, 4096, &allowance).await;
        assert!(matches!(f, Ok(Some(Frame::Ping(p))) if p.nonce == 0));
        // One read took all ten frames; the other nine are buffered and held.
        assert!(r.is_empty());
        assert_eq!(buf.bytes.len(), wire.len() / 10 * 9);
        assert!(buf.held_bytes >= buf.bytes.len());
        assert_eq!(
            allowance.permits.available_permits(),
            capacity - buf.held_bytes
        );
        for nonce in 1..10 {
            let f = read_frame_within(&mut r, &mut buf, &dec, 4096, &allowance).await;
            assert!(matches!(f, Ok(Some(Frame::Ping(p))) if p.nonce == nonce));
        }
        // The buffer is empty, so the hold is back.
        assert!(buf.is_empty());
        assert_eq!(allowance.permits.available_permits(), capacity);
    }

    #[tokio::test]
    async fn a_partial_frame_holds_its_announced_length_until_it_ends() {
        let wire = ping_bytes(3);
        let (head, _) = wire.split_at(HEADER_LEN + 2);
        let (tx, mut rx) = tokio::io::duplex(1024);
        let allowance = Allowance::new(1000);
        let reader = {
            let allowance = allowance.clone();
            tokio::spawn(async move {
                let (mut buf, dec) = (FrameBuf::new(), FrameDecoder::new(1 << 16));
                // A chunk smaller than the frame: the frame's announced length is held.
                read_frame_within(&mut rx, &mut buf, &dec, 4, &allowance).await
            })
        };
        let mut tx = tx;
        tokio::io::AsyncWriteExt::write_all(&mut tx, head)
            .await
            .expect("write");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert_eq!(
            allowance.permits.available_permits(),
            1000 - wire.len(),
            "the announced frame is held"
        );
        drop(tx);
        let r = reader.await.expect("join");
        assert!(matches!(r, Err(ReadError::UnexpectedEof)));
        assert_eq!(allowance.permits.available_permits(), 1000);
    }
}
