//! The `Error` frame: either side reports a failure, tied to a request or
//! (with `request_id` 0) to the stream or connection as a whole.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::error_code::ErrorCode;
use crate::wire::{DecodeBody, EncodeBody, Reader, put_str, str_len};

/// A failure report.
///
/// Layout: `request_id u64 | code u16 | message str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorFrame {
    /// The failed request, or 0 when not tied to a request.
    pub request_id: u64,
    /// Machine-readable reason.
    pub code: ErrorCode,
    /// Human-readable detail (may be empty).
    pub message: String,
}

impl EncodeBody for ErrorFrame {
    fn body_len(&self) -> usize {
        8 + 2 + str_len(&self.message)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u16(self.code.as_u16());
        put_str(dst, &self.message);
    }
}

impl DecodeBody for ErrorFrame {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ErrorFrame {
            request_id: r.u64()?,
            code: ErrorCode::from_u16(r.u16()?),
            message: r.string()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, round_trip};

    #[test]
    fn layout() {
        let frame = Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::NotFound,
            message: "no".into(),
        });
        let payload = round_trip(&frame);
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 0, 2, b'n', b'o']);
    }

    #[test]
    fn unknown_code_is_other() {
        let payload = [0, 0, 0, 0, 0, 0, 0, 1, 0x12, 0x34, 0, 0];
        let frame = decode(FrameKind::Error, &payload).unwrap();
        assert_eq!(
            frame,
            Frame::Error(ErrorFrame {
                request_id: 1,
                code: ErrorCode::Other(0x1234),
                message: String::new()
            })
        );
    }
}
