//! The byte formats of the crate, in one place: length-prefixed frames for RPCs on a
//! transport ([`encode_frame`], [`decode_frame`]), and record bodies for the log store and
//! the committed log ([`encode_body`], [`decode_body`]). Bodies are serde JSON; a frame is a
//! 4-byte big-endian length and then the body. Every decoder bounds the length it accepts
//! before it allocates or parses, and returns a typed error for anything malformed: these
//! bytes come from the network or a disk.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// Bytes of a frame's length prefix.
pub const FRAME_HEADER: usize = 4;

/// A frame or body that cannot be encoded or decoded.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CodecError {
    /// Fewer bytes than the length prefix, or than it declares.
    #[error("frame truncated: {have} bytes of {need}")]
    Truncated {
        /// Bytes present.
        have: usize,
        /// Bytes needed.
        need: usize,
    },
    /// The declared or actual length is over the limit.
    #[error("frame of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// The length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Bytes after the frame's declared end.
    #[error("{0} trailing bytes after the frame")]
    Trailing(usize),
    /// The body is not a valid value of the expected type.
    #[error("malformed body: {0}")]
    Body(String),
}

/// Serializes `value` as a body.
pub fn encode_body<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    serde_json::to_vec(value).map_err(|e| CodecError::Body(e.to_string()))
}

/// Parses a body of at most `max` bytes.
pub fn decode_body<T: DeserializeOwned>(bytes: &[u8], max: usize) -> Result<T, CodecError> {
    if bytes.len() > max {
        return Err(CodecError::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    serde_json::from_slice(bytes).map_err(|e| CodecError::Body(e.to_string()))
}

/// Serializes `value` as one frame of at most `max` bytes (prefix included).
pub fn encode_frame<T: Serialize>(value: &T, max: usize) -> Result<Vec<u8>, CodecError> {
    let body = encode_body(value)?;
    let len = body.len();
    let total = len + FRAME_HEADER;
    let declared = u32::try_from(len).map_err(|_| CodecError::TooLarge { len: total, max })?;
    if total > max {
        return Err(CodecError::TooLarge { len: total, max });
    }
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&declared.to_be_bytes());
    out.extend_from_slice(&body);
    Ok(out)
}

/// The total length (prefix included) of the frame that `buf` starts with, once its prefix
/// is there: `Ok(None)` while fewer than [`FRAME_HEADER`] bytes have arrived. For a reader
/// of a byte stream that must know how much to read before it has the whole frame.
pub fn frame_len(buf: &[u8], max: usize) -> Result<Option<usize>, CodecError> {
    let Some(head) = buf.get(..FRAME_HEADER) else {
        return Ok(None);
    };
    let mut b = [0u8; FRAME_HEADER];
    b.copy_from_slice(head);
    let declared = usize::try_from(u32::from_be_bytes(b)).unwrap_or(usize::MAX);
    let total = declared.saturating_add(FRAME_HEADER);
    if total > max {
        return Err(CodecError::TooLarge { len: total, max });
    }
    Ok(Some(total))
}

/// Parses exactly one frame of at most `max` bytes (prefix included).
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8], max: usize) -> Result<T, CodecError> {
    decode_body(frame_body(buf, max)?, max)
}

/// The body of exactly one frame of at most `max` bytes (prefix included): refuses a
/// truncated frame, bytes after its end, and a length over the bound.
pub fn frame_body(buf: &[u8], max: usize) -> Result<&[u8], CodecError> {
    let Some(total) = frame_len(buf, max)? else {
        return Err(CodecError::Truncated {
            have: buf.len(),
            need: FRAME_HEADER,
        });
    };
    if buf.len() < total {
        return Err(CodecError::Truncated {
            have: buf.len(),
            need: total,
        });
    }
    if buf.len() > total {
        return Err(CodecError::Trailing(buf.len() - total));
    }
    Ok(&buf[FRAME_HEADER..])
}
