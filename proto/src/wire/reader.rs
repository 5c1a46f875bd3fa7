//! [`Reader`]: a cursor over one frame payload that checks every read
//! against the bytes remaining and never panics. Blob reads are zero-copy
//! slices of the payload.

use bytes::{Buf, Bytes};

use crate::error::DecodeError;
use crate::validate::{validate_key, validate_topic};

/// Bounds-checked cursor over a frame payload.
pub(crate) struct Reader {
    buf: Bytes,
    frame: &'static str,
    /// The most items a capped count ([`Reader::capped_count`]) may announce.
    max_items: usize,
}

impl Reader {
    /// Wraps `payload`; `frame` names the frame kind in error messages.
    pub(crate) fn new(frame: &'static str, payload: Bytes) -> Reader {
        Reader {
            buf: payload,
            frame,
            max_items: usize::MAX,
        }
    }

    /// The same reader, whose capped counts ([`Reader::capped_count`]) allow at most
    /// `max_items` items.
    pub(crate) fn with_max_items(self, max_items: u32) -> Reader {
        Reader {
            max_items: usize::try_from(max_items).unwrap_or(usize::MAX),
            ..self
        }
    }

    /// A [`DecodeError::Malformed`] for the frame being read.
    pub(crate) fn malformed(&self, reason: &'static str) -> DecodeError {
        DecodeError::Malformed {
            frame: self.frame,
            reason,
        }
    }

    fn array<const N: usize>(&mut self, reason: &'static str) -> Result<[u8; N], DecodeError> {
        let bytes = *self
            .buf
            .first_chunk::<N>()
            .ok_or_else(|| self.malformed(reason))?;
        self.buf.advance(N);
        Ok(bytes)
    }

    fn take(&mut self, len: usize, reason: &'static str) -> Result<Bytes, DecodeError> {
        if self.buf.len() < len {
            return Err(self.malformed(reason));
        }
        Ok(self.buf.split_to(len))
    }

    pub(crate) fn u8(&mut self) -> Result<u8, DecodeError> {
        let [b] = self.array::<1>("truncated integer field")?;
        Ok(b)
    }

    pub(crate) fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_be_bytes(self.array("truncated integer field")?))
    }

    pub(crate) fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.array("truncated integer field")?))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_be_bytes(self.array("truncated integer field")?))
    }

    /// A strict boolean: 0 or 1.
    pub(crate) fn bool(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.malformed("boolean is neither 0 nor 1")),
        }
    }

    /// A presence tag for an optional field: 0 (absent) or 1 (present).
    pub(crate) fn present(&mut self) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.malformed("option tag is neither 0 nor 1")),
        }
    }

    /// `u16` length + UTF-8 bytes.
    pub(crate) fn string(&mut self) -> Result<String, DecodeError> {
        let len = usize::from(self.u16()?);
        let raw = self.take(len, "string overruns payload")?;
        match std::str::from_utf8(&raw) {
            Ok(s) => Ok(s.to_owned()),
            Err(_) => Err(self.malformed("string is not valid UTF-8")),
        }
    }

    /// A string that must also pass [`validate_topic`].
    pub(crate) fn topic(&mut self) -> Result<String, DecodeError> {
        let topic = self.string()?;
        validate_topic(&topic).map_err(|reason| self.malformed(reason))?;
        Ok(topic)
    }

    /// `u16` length + bytes, which must pass [`validate_key`].
    pub(crate) fn key(&mut self) -> Result<Bytes, DecodeError> {
        let len = usize::from(self.u16()?);
        let key = self.take(len, "key overruns payload")?;
        validate_key(&key).map_err(|reason| self.malformed(reason))?;
        Ok(key)
    }

    /// `u32` length + bytes, as a zero-copy slice of the payload.
    pub(crate) fn blob(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.u32()?;
        let len = usize::try_from(len).map_err(|_| self.malformed("byte blob overruns payload"))?;
        self.take(len, "byte blob overruns payload")
    }

    /// A `u32` element count, checked against the bytes remaining assuming
    /// each element needs at least `min_elem_len` bytes. The result is safe
    /// to pass to `Vec::with_capacity`.
    pub(crate) fn count(&mut self, min_elem_len: usize) -> Result<usize, DecodeError> {
        let count = self.u32()?;
        let count = usize::try_from(count).map_err(|_| self.count_too_large())?;
        let needed = count
            .checked_mul(min_elem_len)
            .ok_or_else(|| self.count_too_large())?;
        if needed > self.buf.len() {
            return Err(self.count_too_large());
        }
        Ok(count)
    }

    /// A [`Reader::count`] that must also be at most the reader's item cap
    /// ([`Reader::with_max_items`]); checked before the caller allocates anything for it.
    pub(crate) fn capped_count(&mut self, min_elem_len: usize) -> Result<usize, DecodeError> {
        let count = self.count(min_elem_len)?;
        if count > self.max_items {
            return Err(DecodeError::TooManyItems {
                frame: self.frame,
                count: u32::try_from(count).unwrap_or(u32::MAX),
                max: u32::try_from(self.max_items).unwrap_or(u32::MAX),
            });
        }
        Ok(count)
    }

    fn count_too_large(&self) -> DecodeError {
        self.malformed("element count exceeds remaining bytes")
    }

    /// Payload bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Whether every payload byte was consumed: an optional trailing field is absent.
    pub(crate) fn at_end(&self) -> bool {
        self.buf.is_empty()
    }

    /// Succeeds only if every payload byte was consumed.
    pub(crate) fn finish(&self) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.malformed("trailing bytes after last field"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(bytes: &'static [u8]) -> Reader {
        Reader::new("test", Bytes::from_static(bytes))
    }

    #[test]
    fn integers_are_big_endian() {
        let mut r = reader(&[1, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4]);
        assert_eq!(r.u8().unwrap(), 1);
        assert_eq!(r.u16().unwrap(), 2);
        assert_eq!(r.u32().unwrap(), 3);
        assert_eq!(r.u64().unwrap(), 4);
        r.finish().unwrap();
    }

    #[test]
    fn short_reads_fail() {
        assert!(reader(&[0]).u16().is_err());
        assert!(reader(&[0, 0, 0]).u32().is_err());
        assert!(reader(&[0; 7]).u64().is_err());
        assert!(reader(&[0, 3, b'a', b'b']).string().is_err());
        assert!(reader(&[0, 0, 0, 2, 9]).blob().is_err());
    }

    #[test]
    fn strings_must_be_utf8() {
        let err = reader(&[0, 2, 0xc3, 0x28]).string().unwrap_err();
        assert_eq!(
            err,
            DecodeError::Malformed {
                frame: "test",
                reason: "string is not valid UTF-8"
            }
        );
    }

    #[test]
    fn blob_is_a_slice_of_the_payload() {
        let payload = Bytes::from_static(&[0, 0, 0, 2, 7, 8]);
        let mut r = Reader::new("test", payload.clone());
        let blob = r.blob().unwrap();
        assert_eq!(&blob[..], &[7, 8]);
        assert_eq!(blob.as_ptr(), payload[4..].as_ptr());
    }

    #[test]
    fn count_checks_remaining_bytes() {
        assert_eq!(
            reader(&[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0])
                .count(4)
                .unwrap(),
            2
        );
        assert!(
            reader(&[0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0])
                .count(4)
                .is_err()
        );
        assert!(reader(&[0xff, 0xff, 0xff, 0xff]).count(4).is_err());
        assert!(reader(&[0xff, 0xff, 0xff, 0xff]).count(usize::MAX).is_err());
    }

    #[test]
    fn capped_count_checks_the_cap_after_the_bytes() {
        let two = &[0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(reader(two).with_max_items(2).capped_count(4).unwrap(), 2);
        assert_eq!(
            reader(two).with_max_items(1).capped_count(4),
            Err(DecodeError::TooManyItems {
                frame: "test",
                count: 2,
                max: 1
            })
        );
        // A count the bytes cannot hold is malformed whatever the cap.
        assert!(matches!(
            reader(&[0xff, 0xff, 0xff, 0xff])
                .with_max_items(1)
                .capped_count(4),
            Err(DecodeError::Malformed { .. })
        ));
    }

    #[test]
    fn strict_flags() {
        assert!(reader(&[2]).bool().is_err());
        assert!(reader(&[2]).present().is_err());
        assert!(reader(&[1]).bool().unwrap());
    }

    #[test]
    fn trailing_bytes_fail() {
        let mut r = reader(&[0, 0]);
        r.u8().unwrap();
        assert!(r.finish().is_err());
    }
}
