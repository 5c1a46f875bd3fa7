//! The fixed 8-byte frame header:
//! `version: u8 | frame_type: u8 | flags: u16 BE | payload_len: u32 BE`.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::kind::FrameKind;
use crate::limits::{FRAMING_VERSION, HEADER_LEN};

/// A validated frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) kind: FrameKind,
    /// Reserved; always written as 0 and ignored on read. Kept for
    /// diagnostics and future use.
    #[allow(dead_code)]
    pub(crate) flags: u16,
    pub(crate) payload_len: u32,
}

impl Header {
    /// Parses the header at the start of `src` without consuming it.
    ///
    /// Returns `Ok(None)` when fewer than [`HEADER_LEN`] bytes are
    /// available. Validates the version and the frame type, not the length.
    pub(crate) fn peek(src: &[u8]) -> Result<Option<Header>, DecodeError> {
        let Some(&[version, frame_type, f0, f1, l0, l1, l2, l3]) = src.first_chunk::<HEADER_LEN>()
        else {
            return Ok(None);
        };
        if version != FRAMING_VERSION {
            return Err(DecodeError::UnsupportedVersion(version));
        }
        let kind =
            FrameKind::from_u8(frame_type).ok_or(DecodeError::UnknownFrameType(frame_type))?;
        Ok(Some(Header {
            kind,
            flags: u16::from_be_bytes([f0, f1]),
            payload_len: u32::from_be_bytes([l0, l1, l2, l3]),
        }))
    }
}

/// Writes a header for a frame of `kind` whose payload is `payload_len`
/// bytes. Lengths beyond `u32::MAX` cannot be represented and saturate.
pub(crate) fn put_header(dst: &mut BytesMut, kind: FrameKind, payload_len: usize) {
    dst.put_u8(FRAMING_VERSION);
    dst.put_u8(kind.as_u8());
    dst.put_u16(0);
    dst.put_u32(u32::try_from(payload_len).unwrap_or(u32::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_peek() {
        let mut buf = BytesMut::new();
        put_header(&mut buf, FrameKind::CacheOk, 0x0102_0304);
        assert_eq!(&buf[..], &[1, 0x34, 0, 0, 1, 2, 3, 4]);
        let h = Header::peek(&buf).unwrap().unwrap();
        assert_eq!(h.kind, FrameKind::CacheOk);
        assert_eq!(h.payload_len, 0x0102_0304);
    }

    #[test]
    fn short_input_needs_more() {
        assert_eq!(Header::peek(&[1, 0x01, 0, 0, 0, 0, 0]), Ok(None));
        assert_eq!(Header::peek(&[]), Ok(None));
    }

    #[test]
    fn rejects_version_and_type() {
        assert_eq!(
            Header::peek(&[2, 1, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::UnsupportedVersion(2))
        );
        assert_eq!(
            Header::peek(&[1, 0xee, 0, 0, 0, 0, 0, 0]),
            Err(DecodeError::UnknownFrameType(0xee))
        );
    }

    #[test]
    fn ignores_flags() {
        let h = Header::peek(&[1, 0x60, 0xff, 0xff, 0, 0, 0, 8])
            .unwrap()
            .unwrap();
        assert_eq!(h.flags, 0xffff);
        assert_eq!(h.kind, FrameKind::Ping);
    }
}
