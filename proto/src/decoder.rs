//! [`FrameDecoder`]: splits frames off a growing receive buffer.
//!
//! The header's `payload_len` is checked against `max_frame_bytes` before
//! anything is reserved. Even a valid length is never reserved up front: the
//! buffer grows as bytes arrive (at most doubling what was received, see
//! [`GROW_FLOOR`]), so a peer that announces a maximal frame and then sends
//! nothing costs the receiver a few KiB, not `max_frame_bytes`. Blob fields of
//! decoded frames are zero-copy slices of the received frame.
//!
//! A payload's length bounds what it holds, not what decoding it allocates: each
//! item of a `PublishBatch` costs a handle ([`DECODED_ITEM_BYTES`](crate::messages::DECODED_ITEM_BYTES))
//! besides its bytes, so a frame of empty items would cost eight times its length.
//! A decoder with an item cap ([`FrameDecoder::with_max_batch_items`]) refuses a
//! batch announcing more items than the cap before it allocates for them.

use bytes::{Buf, BytesMut};

use crate::error::DecodeError;
use crate::frame::{Frame, decode_payload};
use crate::header::Header;
use crate::kind::FrameKind;
use crate::limits::HEADER_LEN;

/// The least a partial frame's buffer is grown by. Above it, growth follows
/// the bytes already received (the buffer at most doubles), never the length
/// the header announces.
pub const GROW_FLOOR: usize = 4096;

/// Streaming frame decoder with a payload size limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameDecoder {
    max_frame_bytes: u32,
    max_batch_items: u32,
}

impl FrameDecoder {
    /// A decoder accepting payloads of at most `max_frame_bytes` bytes
    /// (the 8-byte header is not counted), with no item cap beyond what the
    /// payload's length allows (see [`FrameDecoder::with_max_batch_items`]).
    pub const fn new(max_frame_bytes: u32) -> Self {
        FrameDecoder {
            max_frame_bytes,
            max_batch_items: u32::MAX,
        }
    }

    /// The same decoder refusing a `PublishBatch` of more than `max_items`
    /// payloads ([`DecodeError::TooManyItems`]), before anything is allocated
    /// for them.
    pub const fn with_max_batch_items(self, max_items: u32) -> Self {
        FrameDecoder {
            max_batch_items: max_items,
            ..self
        }
    }

    /// The payload size limit.
    pub const fn max_frame_bytes(&self) -> u32 {
        self.max_frame_bytes
    }

    /// The most payloads a `PublishBatch` may carry.
    pub const fn max_batch_items(&self) -> u32 {
        self.max_batch_items
    }

    /// Tries to split one frame off the front of `src`.
    ///
    /// * `Ok(Some(frame))`: exactly one frame was removed from `src`.
    /// * `Ok(None)`: `src` holds an incomplete frame; read more and call
    ///   again. Capacity may have been reserved for part of the rest: at most
    ///   `max(src.len(), GROW_FLOOR)` bytes, never beyond the validated frame
    ///   length.
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
            let rest = total - src.len();
            src.reserve(rest.min(src.len().max(GROW_FLOOR)));
            return Ok(None);
        }
        let mut payload = src.split_to(total).freeze();
        payload.advance(HEADER_LEN);
        decode_payload(header.kind, payload, self.max_batch_items).map(Some)
    }
}

/// The kind and whole length (header included) of the frame at the start of `src`, from its
/// header alone: `Ok(None)` when `src` is shorter than a header. The length is what the header
/// declares, not checked against `src` or any maximum (a caller splitting stored frames
/// compares it with what it holds).
pub fn peek_frame(src: &[u8]) -> Result<Option<(FrameKind, usize)>, DecodeError> {
    let Some(header) = Header::peek(src)? else {
        return Ok(None);
    };
    let len = usize::try_from(header.payload_len)
        .ok()
        .and_then(|n| n.checked_add(HEADER_LEN))
        .unwrap_or(usize::MAX);
    Ok(Some((header.kind, len)))
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

    #[test]
    fn a_large_partial_frame_grows_with_the_bytes_received() {
        // A 1 MiB frame announced by its header, its payload then arriving in 1 KiB pieces.
        let payload = vec![7u8; 1 << 20];
        let mut whole = BytesMut::new();
        Frame::Publish(crate::messages::Publish {
            request_id: 1,
            ack: crate::messages::AckMode::None,
            topic: "t".into(),
            payload: payload.into(),
            headers: Vec::new(),
        })
        .encode(&mut whole);
        let dec = FrameDecoder::new(2 << 20);
        let mut buf = BytesMut::new();
        buf.extend_from_slice(&whole.split_to(HEADER_LEN));
        assert_eq!(dec.decode(&mut buf), Ok(None));
        assert!(
            buf.capacity() <= HEADER_LEN + GROW_FLOOR,
            "{}",
            buf.capacity()
        );
        let mut decoded = None;
        while !whole.is_empty() {
            let piece = whole.split_to(whole.len().min(1024));
            buf.extend_from_slice(&piece);
            // In proportion to what arrived (the decoder's step plus the buffer's own
            // doubling), never to the 1 MiB the header announced.
            assert!(
                buf.capacity() <= 4 * (buf.len() + GROW_FLOOR),
                "{}",
                buf.capacity()
            );
            if let Some(frame) = dec.decode(&mut buf).unwrap() {
                decoded = Some(frame);
            }
        }
        assert!(matches!(decoded, Some(Frame::Publish(p)) if p.payload.len() == 1 << 20));
    }

    #[test]
    fn peek_frame_reads_the_kind_and_whole_length_from_the_header() {
        let bytes = Frame::Ping(crate::Ping { nonce: 9 }).to_bytes();
        assert_eq!(
            peek_frame(&bytes),
            Ok(Some((FrameKind::Ping, HEADER_LEN + 8)))
        );
        assert_eq!(peek_frame(&bytes[..HEADER_LEN - 1]), Ok(None));
        let mut bad = bytes.to_vec();
        bad[1] = 0xff;
        assert_eq!(peek_frame(&bad), Err(DecodeError::UnknownFrameType(0xff)));
    }
}
