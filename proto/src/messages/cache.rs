//! Cache frames: requests `CachePut`, `CacheGet`, `CacheDelete` (client →
//! server) and responses `CacheValue`, `CacheOk` (server → client).
//! Keys are opaque bytes with a `u16` length (1..=`MAX_KEY_LEN`); values are
//! `u32`-length blobs.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::wire::{DecodeBody, EncodeBody, Reader, blob_len, key_len, put_blob, put_bool, put_key};

/// Stores `value` under `key`.
///
/// Layout: `request_id u64 | key | value blob | ttl_ms u64`. Answered by
/// `CacheOk` (`existed` = a live value was replaced).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachePut {
    /// Echoed in the response.
    pub request_id: u64,
    /// Cache key (see [`validate_key`](crate::validate_key)).
    pub key: Bytes,
    /// Value to store.
    pub value: Bytes,
    /// Time to live in milliseconds; 0 means no expiry.
    pub ttl_ms: u64,
}

impl EncodeBody for CachePut {
    fn body_len(&self) -> usize {
        8 + key_len(&self.key) + blob_len(&self.value) + 8
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_key(dst, &self.key);
        put_blob(dst, &self.value);
        dst.put_u64(self.ttl_ms);
    }
}

impl DecodeBody for CachePut {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CachePut {
            request_id: r.u64()?,
            key: r.key()?,
            value: r.blob()?,
            ttl_ms: r.u64()?,
        })
    }
}

/// Reads the value under `key`; answered by `CacheValue`.
///
/// Layout: `request_id u64 | key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheGet {
    /// Echoed in the response.
    pub request_id: u64,
    /// Cache key.
    pub key: Bytes,
}

impl EncodeBody for CacheGet {
    fn body_len(&self) -> usize {
        8 + key_len(&self.key)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_key(dst, &self.key);
    }
}

impl DecodeBody for CacheGet {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CacheGet {
            request_id: r.u64()?,
            key: r.key()?,
        })
    }
}

/// Removes `key`; answered by `CacheOk` (`existed` = a live value was removed).
///
/// Layout: `request_id u64 | key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheDelete {
    /// Echoed in the response.
    pub request_id: u64,
    /// Cache key.
    pub key: Bytes,
}

impl EncodeBody for CacheDelete {
    fn body_len(&self) -> usize {
        8 + key_len(&self.key)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_key(dst, &self.key);
    }
}

impl DecodeBody for CacheDelete {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CacheDelete {
            request_id: r.u64()?,
            key: r.key()?,
        })
    }
}

/// Result of a `CacheGet`.
///
/// Layout: `request_id u64 | present u8 (0/1) | [value blob]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheValue {
    /// The `CacheGet` being answered.
    pub request_id: u64,
    /// The value, or `None` if the key is absent or expired.
    pub value: Option<Bytes>,
}

impl EncodeBody for CacheValue {
    fn body_len(&self) -> usize {
        8 + 1 + self.value.as_ref().map_or(0, |v| blob_len(v))
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        match &self.value {
            None => dst.put_u8(0),
            Some(value) => {
                dst.put_u8(1);
                put_blob(dst, value);
            }
        }
    }
}

impl DecodeBody for CacheValue {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let value = if r.present()? { Some(r.blob()?) } else { None };
        Ok(CacheValue { request_id, value })
    }
}

/// Result of a `CachePut` or `CacheDelete`.
///
/// Layout: `request_id u64 | existed u8 (0/1)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheOk {
    /// The request being answered.
    pub request_id: u64,
    /// Whether a live value existed under the key before the request.
    pub existed: bool,
}

impl EncodeBody for CacheOk {
    fn body_len(&self) -> usize {
        8 + 1
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_bool(dst, self.existed);
    }
}

impl DecodeBody for CacheOk {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(CacheOk {
            request_id: r.u64()?,
            existed: r.bool()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    #[test]
    fn put_layout() {
        let frame = Frame::CachePut(CachePut {
            request_id: 1,
            key: Bytes::from_static(b"k"),
            value: Bytes::from_static(b"vv"),
            ttl_ms: 1000,
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b'k', 0, 0, 0, 2, b'v', b'v', 0, 0, 0, 0, 0, 0, 0x03,
                0xe8
            ]
        );
    }

    #[test]
    fn keys_must_be_valid() {
        let empty = [0, 0, 0, 0, 0, 0, 0, 1, 0, 0];
        assert_eq!(
            decode(FrameKind::CacheGet, &empty),
            malformed(FrameKind::CacheGet, "key is empty")
        );
        let mut long = vec![0u8; 8];
        long.extend_from_slice(&1025u16.to_be_bytes());
        long.extend(std::iter::repeat_n(1u8, 1025));
        assert_eq!(
            decode(FrameKind::CacheDelete, &long),
            malformed(FrameKind::CacheDelete, "key longer than 1024 bytes")
        );
        let overrun = [0, 0, 0, 0, 0, 0, 0, 1, 0, 5, b'a'];
        assert_eq!(
            decode(FrameKind::CacheGet, &overrun),
            malformed(FrameKind::CacheGet, "key overruns payload")
        );
    }

    #[test]
    fn get_and_delete_layout() {
        let get = round_trip(&Frame::CacheGet(CacheGet {
            request_id: 2,
            key: Bytes::from_static(b"ab"),
        }));
        assert_eq!(get, [0, 0, 0, 0, 0, 0, 0, 2, 0, 2, b'a', b'b']);
        let del = round_trip(&Frame::CacheDelete(CacheDelete {
            request_id: 2,
            key: Bytes::from_static(b"ab"),
        }));
        assert_eq!(del, get);
    }

    #[test]
    fn value_layouts() {
        let hit = round_trip(&Frame::CacheValue(CacheValue {
            request_id: 3,
            value: Some(Bytes::from_static(b"z")),
        }));
        assert_eq!(hit, [0, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 1, b'z']);
        let miss = round_trip(&Frame::CacheValue(CacheValue {
            request_id: 3,
            value: None,
        }));
        assert_eq!(miss, [0, 0, 0, 0, 0, 0, 0, 3, 0]);
        // An empty value is distinct from a missing one.
        let empty = round_trip(&Frame::CacheValue(CacheValue {
            request_id: 3,
            value: Some(Bytes::new()),
        }));
        assert_eq!(empty, [0, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0]);
    }

    #[test]
    fn ok_layout_and_strict_bool() {
        let payload = round_trip(&Frame::CacheOk(CacheOk {
            request_id: 4,
            existed: true,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 4, 1]);
        let bad = [0, 0, 0, 0, 0, 0, 0, 4, 7];
        assert_eq!(
            decode(FrameKind::CacheOk, &bad),
            malformed(FrameKind::CacheOk, "boolean is neither 0 nor 1")
        );
    }
}
