//! [`FrameDecoder`]: splits frames off a growing receive buffer.
//!
//! The header's `payload_len` is checked against `max_frame_bytes` before
//! anything is reserved, so a peer cannot make the receiver allocate more
//! than one maximal frame. Blob fields of decoded frames are zero-copy
//! slices of the received frame.

use bytes::{Buf, BytesMut};

use crate::error::DecodeError;
use crate::frame::{Frame, decode_payload};
use crate::header::Header;
use crate::limits::HEADER_LEN;

/// Streaming frame decoder with a payload size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    max_frame_bytes: u32,
}

impl FrameDecoder {
    /// A decoder accepting payloads of at most `max_frame_bytes` bytes
    /// (the 8-byte header is not counted).
    pub const fn new(max_frame_bytes: u32) -> Self {
        FrameDecoder { max_frame_bytes }
    }

    /// The payload size limit.
    pub const fn max_frame_bytes(&self) -> u32 {
        self.max_frame_bytes
    }

    /// Tries to split one frame off the front of `src`.
    ///
    /// * `Ok(Some(frame))`: exactly one frame was removed from `src`.
    /// * `Ok(None)`: `src` holds an incomplete frame; read more and call
    ///   again. Capacity for the rest of the frame may have been reserved
    ///   (never beyond the validated frame length).
    /// * `Err(_)`: the stream is corrupt and should be abandoned. Header
    ///   errors leave `src` untouched; payload errors consume the frame.
    pub fn decode(&self, src: &mut BytesMut) -> Result<Option<Frame>, DecodeError> {
        let Some(header) = Header::peek(src)? else {
            return Ok(None);
        };
        let too_large = DecodeError::FrameTooLarge {
            len: header.payload_len,
            max: self.max_frame_bytes,
        };
        if header.payload_len > self.max_frame_bytes {
            return Err(too_large);
        }
        let payload_len = usize::try_from(header.payload_len).map_err(|_| too_large.clone())?;
        let total = HEADER_LEN.checked_add(payload_len).ok_or(too_large)?;
        if src.len() < total {
            src.reserve(total - src.len());
            return Ok(None);
        }
        let mut payload = src.split_to(total).freeze();
        payload.advance(HEADER_LEN);
        decode_payload(header.kind, payload).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Ping;

    #[test]
    fn decodes_back_to_back_frames() {
        let mut buf = BytesMut::new();
        Frame::Ping(Ping { nonce: 1 }).encode(&mut buf);
        Frame::Pong(Ping { nonce: 2 }).encode(&mut buf);
        let dec = FrameDecoder::new(64);
        assert_eq!(
            dec.decode(&mut buf).unwrap(),
            Some(Frame::Ping(Ping { nonce: 1 }))
        );
        assert_eq!(
            dec.decode(&mut buf).unwrap(),
            Some(Frame::Pong(Ping { nonce: 2 }))
        );
        assert_eq!(dec.decode(&mut buf).unwrap(), None);
    }

    #[test]
    fn limit_is_on_payload() {
        let mut buf = BytesMut::new();
        Frame::Ping(Ping { nonce: 1 }).encode(&mut buf);
        assert!(
            FrameDecoder::new(8)
                .decode(&mut buf.clone())
                .unwrap()
                .is_some()
        );
        assert_eq!(
            FrameDecoder::new(7).decode(&mut buf),
            Err(DecodeError::FrameTooLarge { len: 8, max: 7 })
        );
    }

    #[test]
    fn partial_frame_reserves_only_the_rest() {
        let mut buf = BytesMut::with_capacity(0);
        buf.extend_from_slice(&[1, 0x60, 0, 0, 0, 0, 0, 8]);
        assert_eq!(FrameDecoder::new(8).decode(&mut buf), Ok(None));
        assert!(buf.capacity() >= 16);
        assert_eq!(buf.len(), 8);
    }
}
