//! Helpers shared by the per-frame unit tests.

use bytes::{Bytes, BytesMut};

use crate::decoder::FrameDecoder;
use crate::error::DecodeError;
use crate::frame::Frame;
use crate::kind::FrameKind;

/// Encodes `frame`, checks `encoded_len`, decodes it back and checks
/// equality. Returns the payload (header stripped) for layout assertions.
pub(crate) fn round_trip(frame: &Frame) -> Vec<u8> {
    let bytes = frame.to_bytes();
    assert_eq!(bytes.len(), frame.encoded_len());
    let mut buf = BytesMut::from(&bytes[..]);
    let decoded = FrameDecoder::new(u32::MAX)
        .decode(&mut buf)
        .unwrap()
        .unwrap();
    assert!(buf.is_empty());
    assert_eq!(&decoded, frame);
    bytes[crate::HEADER_LEN..].to_vec()
}

/// Decodes a hand-written payload as a frame of `kind`.
pub(crate) fn decode(kind: FrameKind, payload: &[u8]) -> Result<Frame, DecodeError> {
    crate::frame::decode_payload(kind, Bytes::copy_from_slice(payload), u32::MAX)
}

/// The `Malformed` error expected for `kind` with `reason`.
pub(crate) fn malformed(kind: FrameKind, reason: &'static str) -> Result<Frame, DecodeError> {
    Err(DecodeError::Malformed {
        frame: kind.name(),
        reason,
    })
}
