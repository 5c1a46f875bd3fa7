//! [`ErrorCode`]: the stable `u16` codes carried by
//! [`ErrorFrame`](crate::ErrorFrame).
//!
//! Codes 1..=14 are assigned below and never change meaning. Any other
//! value decodes to [`ErrorCode::Other`] so that newer peers can add codes
//! without breaking older ones.

/// Machine-readable reason carried in an `Error` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 1: the peer sent a frame that could not be decoded.
    BadFrame,
    /// 2: no protocol version in common, or a header with a version other than 1.
    UnsupportedVersion,
    /// 3: a frame exceeded the receiver's `max_frame_bytes`.
    FrameTooLarge,
    /// 4: a frame type number the receiver does not know.
    UnknownFrameType,
    /// 5: well-formed but not acceptable here (wrong stream, bad topic, missing feature…).
    InvalidRequest,
    /// 6: authentication failed or is required.
    Unauthorized,
    /// 7: the referenced subscription (or other object) does not exist.
    NotFound,
    /// 8: the server is shedding load; the client may retry later.
    Overloaded,
    /// 9: the service is temporarily unavailable (e.g. shutting down).
    Unavailable,
    /// 10: the request belongs to another cluster member (see `Moved`).
    Moved,
    /// 11: an unexpected server-side failure.
    Internal,
    /// 12: the request would take the server past one of its configured budgets (topics,
    /// subscriptions); retrying helps only once usage has dropped.
    LimitExceeded,
    /// 13: the authenticated user may not perform this operation on this topic or cache key.
    /// The message names the operation, the topic or key and the user; the connection and
    /// its other streams are unaffected.
    Forbidden,
    /// 14: a request (a `Publish` naming a reply inbox in its `reply-to` header, on a
    /// connection granted `REQUEST`) found no subscriber on its topic when it was published:
    /// nobody can answer it, so the requester is told at once instead of waiting for its
    /// timeout.
    NoResponders,
    /// Any code not assigned above, kept verbatim.
    ///
    /// `Other(n)` with an assigned `n` (1..=14) encodes as `n` and
    /// therefore decodes back as the named variant.
    Other(u16),
}

impl ErrorCode {
    /// The highest assigned code: `1..=LAST_ASSIGNED` are the named variants, every other
    /// value is [`ErrorCode::Other`].
    pub const LAST_ASSIGNED: u16 = 14;

    /// The wire value of this code.
    pub const fn as_u16(self) -> u16 {
        match self {
            ErrorCode::BadFrame => 1,
            ErrorCode::UnsupportedVersion => 2,
            ErrorCode::FrameTooLarge => 3,
            ErrorCode::UnknownFrameType => 4,
            ErrorCode::InvalidRequest => 5,
            ErrorCode::Unauthorized => 6,
            ErrorCode::NotFound => 7,
            ErrorCode::Overloaded => 8,
            ErrorCode::Unavailable => 9,
            ErrorCode::Moved => 10,
            ErrorCode::Internal => 11,
            ErrorCode::LimitExceeded => 12,
            ErrorCode::Forbidden => 13,
            ErrorCode::NoResponders => 14,
            ErrorCode::Other(code) => code,
        }
    }

    /// Maps a wire value to a code; unassigned values become [`ErrorCode::Other`].
    pub const fn from_u16(value: u16) -> ErrorCode {
        match value {
            1 => ErrorCode::BadFrame,
            2 => ErrorCode::UnsupportedVersion,
            3 => ErrorCode::FrameTooLarge,
            4 => ErrorCode::UnknownFrameType,
            5 => ErrorCode::InvalidRequest,
            6 => ErrorCode::Unauthorized,
            7 => ErrorCode::NotFound,
            8 => ErrorCode::Overloaded,
            9 => ErrorCode::Unavailable,
            10 => ErrorCode::Moved,
            11 => ErrorCode::Internal,
            12 => ErrorCode::LimitExceeded,
            13 => ErrorCode::Forbidden,
            14 => ErrorCode::NoResponders,
            other => ErrorCode::Other(other),
        }
    }

    /// A stable snake_case name, suitable for logs and metric labels.
    pub const fn name(self) -> &'static str {
        match self {
            ErrorCode::BadFrame => "bad_frame",
            ErrorCode::UnsupportedVersion => "unsupported_version",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::UnknownFrameType => "unknown_frame_type",
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Moved => "moved",
            ErrorCode::Internal => "internal",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::NoResponders => "no_responders",
            ErrorCode::Other(_) => "other",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ErrorCode::Other(code) => write!(f, "other({code})"),
            named => f.write_str(named.name()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assigned_codes_are_one_to_fourteen() {
        for value in 1..=ErrorCode::LAST_ASSIGNED {
            let code = ErrorCode::from_u16(value);
            assert!(!matches!(code, ErrorCode::Other(_)), "{value}");
            assert_eq!(code.as_u16(), value);
        }
    }

    #[test]
    fn unassigned_codes_are_kept() {
        for value in [0u16, ErrorCode::LAST_ASSIGNED + 1, 999, u16::MAX] {
            assert_eq!(ErrorCode::from_u16(value), ErrorCode::Other(value));
            assert_eq!(ErrorCode::Other(value).as_u16(), value);
        }
    }

    #[test]
    fn other_with_assigned_value_normalises() {
        let code = ErrorCode::Other(7);
        assert_eq!(ErrorCode::from_u16(code.as_u16()), ErrorCode::NotFound);
    }
}
