//! Numbered payloads: a test publishes `payload(i)` and reads `i` back from what arrives, to
//! check order, loss and duplicates. Two widths: 4 bytes ([`payload`], [`index`]; [`padded`]
//! to a given size) and 8 bytes ([`payload64`], [`index64`]).

use bytes::Bytes;

/// A 4-byte payload carrying `i` (big-endian).
pub fn payload(i: u32) -> Bytes {
    Bytes::copy_from_slice(&i.to_be_bytes())
}

/// A `len`-byte payload (at least 4) that starts with `i` as [`payload`] writes it, zeros
/// after: for tests that need volume as well as order.
pub fn padded(i: u32, len: usize) -> Bytes {
    let mut v = vec![0u8; len.max(4)];
    v[..4].copy_from_slice(&i.to_be_bytes());
    Bytes::from(v)
}

/// The number in the first 4 bytes of a payload made by [`payload`] (longer payloads may
/// carry more after it); `None` when it is shorter.
pub fn try_index(p: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(p.get(..4)?.try_into().ok()?))
}

/// [`try_index`], failing the test on a payload shorter than 4 bytes.
#[track_caller]
pub fn index(p: &[u8]) -> u32 {
    try_index(p).unwrap_or_else(|| panic!("a payload of {} bytes carries no index", p.len()))
}

/// An 8-byte payload carrying `i` (big-endian).
pub fn payload64(i: u64) -> Bytes {
    Bytes::copy_from_slice(&i.to_be_bytes())
}

/// The number in a payload made by [`payload64`]; `u64::MAX` when it is not 8 bytes long.
pub fn index64(p: &[u8]) -> u64 {
    p.try_into().map(u64::from_be_bytes).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip() {
        assert_eq!(index(&payload(7)), 7);
        assert_eq!(try_index(b"abc"), None);
        assert_eq!(index(b"\0\0\0\x05tail"), 5);
        let p = padded(9, 2048);
        assert_eq!((p.len(), index(&p)), (2048, 9));
        assert_eq!(padded(3, 0), payload(3));
        assert_eq!(index64(&payload64(u64::MAX - 1)), u64::MAX - 1);
        assert_eq!(index64(&payload(1)), u64::MAX);
    }
}
