//! [`DecodeError`]: everything that can be wrong with bytes received from a
//! peer, and its mapping onto a wire [`ErrorCode`].

use crate::error_code::ErrorCode;

/// Why a frame could not be decoded.
///
/// After any decode error the byte stream can no longer be trusted: the
/// receiver should report the error (see [`DecodeError::code`]) and close
/// the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The header's version byte is not [`FRAMING_VERSION`](crate::FRAMING_VERSION).
    #[error("unsupported framing version {0} in a frame header")]
    UnsupportedVersion(u8),
    /// The header's frame type byte names no known frame.
    #[error("unknown frame type 0x{0:02x}")]
    UnknownFrameType(u8),
    /// The header declares a payload longer than the decoder's limit.
    #[error("frame payload of {len} bytes exceeds the limit of {max} bytes")]
    FrameTooLarge {
        /// Declared payload length.
        len: u32,
        /// The decoder's `max_frame_bytes`.
        max: u32,
    },
    /// A batch announces more items than the decoder's cap (see
    /// [`FrameDecoder::with_max_batch_items`](crate::FrameDecoder::with_max_batch_items)).
    #[error("{frame} frame of {count} items exceeds the limit of {max} items")]
    TooManyItems {
        /// Name of the frame kind being decoded.
        frame: &'static str,
        /// The announced item count.
        count: u32,
        /// The decoder's cap.
        max: u32,
    },
    /// The payload does not match the frame's layout.
    #[error("malformed {frame} frame: {reason}")]
    Malformed {
        /// Name of the frame kind being decoded (see [`FrameKind::name`](crate::FrameKind::name)).
        frame: &'static str,
        /// What was wrong.
        reason: &'static str,
    },
}

impl DecodeError {
    /// The error code to send back to the peer in an `Error` frame.
    pub const fn code(&self) -> ErrorCode {
        match self {
            DecodeError::UnsupportedVersion(_) => ErrorCode::UnsupportedVersion,
            DecodeError::UnknownFrameType(_) => ErrorCode::UnknownFrameType,
            DecodeError::FrameTooLarge { .. } => ErrorCode::FrameTooLarge,
            DecodeError::TooManyItems { .. } => ErrorCode::LimitExceeded,
            DecodeError::Malformed { .. } => ErrorCode::BadFrame,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_messages() {
        let e = DecodeError::FrameTooLarge { len: 10, max: 5 };
        assert_eq!(e.code(), ErrorCode::FrameTooLarge);
        assert_eq!(
            e.to_string(),
            "frame payload of 10 bytes exceeds the limit of 5 bytes"
        );
        assert_eq!(
            DecodeError::UnknownFrameType(0xab).to_string(),
            "unknown frame type 0xab"
        );
        assert_eq!(
            DecodeError::UnsupportedVersion(2).code(),
            ErrorCode::UnsupportedVersion
        );
        assert_eq!(
            DecodeError::UnknownFrameType(0).code(),
            ErrorCode::UnknownFrameType
        );
        let items = DecodeError::TooManyItems {
            frame: "publish_batch",
            count: 9,
            max: 8,
        };
        assert_eq!(items.code(), ErrorCode::LimitExceeded);
        assert_eq!(
            items.to_string(),
            "publish_batch frame of 9 items exceeds the limit of 8 items"
        );
        let m = DecodeError::Malformed {
            frame: "publish",
            reason: "trailing bytes after last field",
        };
        assert_eq!(m.code(), ErrorCode::BadFrame);
        assert_eq!(
            m.to_string(),
            "malformed publish frame: trailing bytes after last field"
        );
    }
}
