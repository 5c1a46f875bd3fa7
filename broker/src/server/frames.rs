//! Reading request frames within the connection's frame allowance.
//!
//! QUIC flow control bounds only the bytes the broker has not read yet: once a stream's bytes
//! are read into a partial frame's buffer the client is given new credit, so the receive window
//! alone would let one connection hold `max_concurrent_streams` partial frames of
//! `max_frame_bytes` each. Every stream of a connection therefore reads through
//! [`read_frame_within`], which takes a frame's announced length from the connection's
//! [`Allowance`] before reading its payload and gives it back once the frame is complete (or the
//! read ends). A read never goes past the end of the current frame, so a stream's buffer holds
//! at most the frame it has taken. When the allowance is exhausted the stream stops reading and
//! QUIC flow control stops the client; only that connection waits. The allowance holds at least
//! one largest frame, so a frame that was announced can always complete.

use std::sync::Arc;

use bytes::BytesMut;
use starling_proto::{Frame, FrameDecoder, HEADER_LEN, ReadError};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The bytes of partial frames one connection's streams may hold together.
#[derive(Clone)]
pub struct Allowance {
    permits: Arc<Semaphore>,
}

impl Allowance {
    /// The allowance of a connection granted `bytes` (at least one frame of `max_frame_bytes`
    /// with its header; see [`Allowance::bytes`]).
    pub fn new(bytes: u64) -> Allowance {
        let n = usize::try_from(bytes).unwrap_or(usize::MAX);
        Allowance {
            permits: Arc::new(Semaphore::new(n.min(Semaphore::MAX_PERMITS))),
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

/// The whole frame's length (header included) once `buf` holds its header.
fn announced(buf: &[u8]) -> Option<usize> {
    let len = buf.get(4..HEADER_LEN)?;
    let len = u32::from_be_bytes(len.try_into().ok()?);
    usize::try_from(len).ok()?.checked_add(HEADER_LEN)
}

/// Reads the next frame from `r` into `buf` like `starling_proto::read_frame`, holding the
/// frame's announced length of `allowance` while its payload arrives. `Ok(None)` at a clean end
/// of stream. Cancel-safe: what was read stays in `buf`.
pub async fn read_frame_within<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    dec: &FrameDecoder,
    read_chunk: usize,
    allowance: &Allowance,
) -> Result<Option<Frame>, ReadError> {
    let mut held = None;
    loop {
        // The decoder checks the announced length against `max_frame_bytes` before anything is
        // taken for it.
        if let Some(frame) = dec.decode(buf)? {
            return Ok(Some(frame));
        }
        let want = match announced(buf) {
            Some(total) => {
                if held.is_none() {
                    held = Some(allowance.take(total).await?);
                }
                total.saturating_sub(buf.len())
            }
            None => HEADER_LEN.saturating_sub(buf.len()),
        };
        let step = want.clamp(1, read_chunk.max(1));
        buf.reserve(step);
        let n = (&mut *r).take(step as u64).read_buf(buf).await?;
        if n == 0 {
            return if buf.is_empty() {
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
    async fn frames_back_to_back_are_read_one_at_a_time_and_the_allowance_returns() {
        let mut wire = ping_bytes(1);
        wire.extend(ping_bytes(2));
        let mut r = wire.as_slice();
        let (mut buf, dec) = (BytesMut::new(), FrameDecoder::new(1 << 16));
        let allowance = Allowance::new(Allowance::bytes(0, 1 << 16));
        for nonce in [1, 2] {
            let f = read_frame_within(&mut r, &mut buf, &dec, 4096, &allowance).await;
            assert!(matches!(f, Ok(Some(Frame::Ping(p))) if p.nonce == nonce));
            // Nothing of the next frame was read ahead.
            assert!(buf.is_empty());
        }
        let end = read_frame_within(&mut r, &mut buf, &dec, 4096, &allowance).await;
        assert!(matches!(end, Ok(None)));
        assert_eq!(
            allowance.permits.available_permits() as u64,
            Allowance::bytes(0, 1 << 16)
        );
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
                let (mut buf, dec) = (BytesMut::new(), FrameDecoder::new(1 << 16));
                read_frame_within(&mut rx, &mut buf, &dec, 4096, &allowance).await
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
