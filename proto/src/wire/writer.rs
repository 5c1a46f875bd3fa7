//! Length-prefixed field writers and their size functions.
//!
//! Encoding is infallible. A field too long for its length prefix is
//! truncated (strings on a UTF-8 character boundary) so that the frame
//! stays self-consistent; such a frame fails validation at the peer
//! (topics, keys) or carries a shortened text (names, messages). Senders
//! are expected to validate topics and keys before encoding.

use bytes::{BufMut, Bytes, BytesMut};

const U16_MAX: usize = u16::MAX as usize;
const U32_MAX: usize = u32::MAX as usize;

/// The longest prefix of `s` that fits a `u16` length.
fn fit_str(s: &str) -> &str {
    if s.len() <= U16_MAX {
        return s;
    }
    let end = s.floor_char_boundary(U16_MAX);
    s.get(..end).unwrap_or_default()
}

/// The first `max` bytes of `b` at most.
fn fit_bytes(b: &[u8], max: usize) -> &[u8] {
    b.get(..max).unwrap_or(b)
}

fn len_u16(len: usize) -> u16 {
    u16::try_from(len).unwrap_or(u16::MAX)
}

fn len_u32(len: usize) -> u32 {
    u32::try_from(len).unwrap_or(u32::MAX)
}

/// `u16` length + UTF-8 bytes.
pub(crate) fn put_str(dst: &mut BytesMut, s: &str) {
    let s = fit_str(s);
    dst.put_u16(len_u16(s.len()));
    dst.put_slice(s.as_bytes());
}

/// Encoded size of [`put_str`].
pub(crate) fn str_len(s: &str) -> usize {
    2 + fit_str(s).len()
}

/// `u16` length + key bytes.
pub(crate) fn put_key(dst: &mut BytesMut, key: &[u8]) {
    let key = fit_bytes(key, U16_MAX);
    dst.put_u16(len_u16(key.len()));
    dst.put_slice(key);
}

/// Encoded size of [`put_key`].
pub(crate) fn key_len(key: &[u8]) -> usize {
    2 + fit_bytes(key, U16_MAX).len()
}

/// `u32` length + bytes.
pub(crate) fn put_blob(dst: &mut BytesMut, blob: &[u8]) {
    let blob = fit_bytes(blob, U32_MAX);
    dst.put_u32(len_u32(blob.len()));
    dst.put_slice(blob);
}

/// Encoded size of [`put_blob`].
pub(crate) fn blob_len(blob: &[u8]) -> usize {
    4 + fit_bytes(blob, U32_MAX).len()
}

/// `u32` count + that many blobs.
pub(crate) fn put_blobs(dst: &mut BytesMut, blobs: &[Bytes]) {
    let count = blobs.len().min(U32_MAX);
    dst.put_u32(len_u32(count));
    for blob in blobs.iter().take(count) {
        put_blob(dst, blob);
    }
}

/// Encoded size of [`put_blobs`].
pub(crate) fn blobs_len(blobs: &[Bytes]) -> usize {
    let count = blobs.len().min(U32_MAX);
    4 + blobs.iter().take(count).map(|b| blob_len(b)).sum::<usize>()
}

/// A boolean as one byte, 0 or 1.
pub(crate) fn put_bool(dst: &mut BytesMut, value: bool) {
    dst.put_u8(u8::from(value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_layout() {
        let mut buf = BytesMut::new();
        put_str(&mut buf, "hé");
        assert_eq!(&buf[..], &[0, 3, b'h', 0xc3, 0xa9]);
        assert_eq!(str_len("hé"), buf.len());
    }

    #[test]
    fn oversized_string_truncates_on_char_boundary() {
        // 'é' is 2 bytes; 32768 of them is 65536 bytes, one over the limit.
        let s = "é".repeat(32768);
        let mut buf = BytesMut::new();
        put_str(&mut buf, &s);
        assert_eq!(&buf[..2], &[0xff, 0xfe]);
        assert_eq!(buf.len(), 2 + 65534);
        assert_eq!(str_len(&s), buf.len());
        assert!(std::str::from_utf8(&buf[2..]).is_ok());
    }

    #[test]
    fn oversized_key_truncates() {
        let key = vec![7u8; 70_000];
        let mut buf = BytesMut::new();
        put_key(&mut buf, &key);
        assert_eq!(&buf[..2], &[0xff, 0xff]);
        assert_eq!(key_len(&key), buf.len());
    }

    #[test]
    fn blob_layouts() {
        let mut buf = BytesMut::new();
        put_blobs(&mut buf, &[Bytes::from_static(b"ab"), Bytes::new()]);
        assert_eq!(&buf[..], &[0, 0, 0, 2, 0, 0, 0, 2, b'a', b'b', 0, 0, 0, 0]);
        assert_eq!(
            blobs_len(&[Bytes::from_static(b"ab"), Bytes::new()]),
            buf.len()
        );
    }
}
