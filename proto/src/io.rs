//! Async helpers reading and writing frames over tokio's `AsyncRead` /
//! `AsyncWrite` (which quinn's `RecvStream` / `SendStream` implement).

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::decoder::FrameDecoder;
use crate::error::DecodeError;
use crate::frame::Frame;

/// Why [`read_frame`] failed.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The underlying stream failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The peer sent bytes that are not a valid frame.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The stream ended in the middle of a frame.
    #[error("stream ended in the middle of a frame")]
    UnexpectedEof,
}

/// Reads the next frame from `r`, using `buf` to keep bytes between calls
/// (reuse the same `buf` for one stream: it may hold the start of the next
/// frame).
///
/// Returns `Ok(None)` on end of stream at a frame boundary. Each read asks
/// for up to `read_chunk` bytes (at least 1); the decoder itself never
/// reserves more than the validated length of the current frame.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut BytesMut,
    dec: &FrameDecoder,
    read_chunk: usize,
) -> Result<Option<Frame>, ReadError> {
    let chunk = read_chunk.max(1);
    loop {
        if let Some(frame) = dec.decode(buf)? {
            return Ok(Some(frame));
        }
        buf.reserve(chunk);
        let n = r.read_buf(buf).await?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(ReadError::UnexpectedEof)
            };
        }
    }
}

/// Encodes `frame` and writes it to `w`, then flushes.
///
/// To send an already-encoded frame (e.g. the shared output of
/// [`encode_event_batch`](crate::encode_event_batch)), write its bytes with
/// `AsyncWriteExt::write_all` directly.
pub async fn write_frame<W: AsyncWrite + Unpin>(w: &mut W, frame: &Frame) -> std::io::Result<()> {
    let bytes = frame.to_bytes();
    w.write_all(&bytes).await?;
    w.flush().await
}
