//! The benchmark message header: every payload starts with a magic number,
//! the producer id, the producer's sequence number and the (intended) send
//! time, so subscribers can measure latency and check loss and order. The
//! Go load program for NATS (`bench/nats/load`) writes the same 24 bytes.
//!
//! Layout (big-endian): `magic u32 | producer u32 | seq u64 | send_ns u64`,
//! then filler up to the payload size.

use bytes::{BufMut, Bytes, BytesMut};

/// `"STB1"`: marks a payload written by a benchmark producer.
pub(crate) const MAGIC: u32 = 0x5354_4231;
/// Bytes of the header; the smallest allowed `--payload`.
pub(crate) const HEADER_LEN: usize = 24;

/// What a subscriber reads back from a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// Producer index (0-based).
    pub(crate) producer: u32,
    /// Sequence number within the producer (0-based).
    pub(crate) seq: u64,
    /// Intended send time in nanoseconds since the run's epoch.
    pub(crate) send_ns: u64,
}

/// Builds payloads of one size from a filler template.
#[derive(Debug, Clone)]
pub(crate) struct PayloadFactory {
    filler: Bytes,
}

impl PayloadFactory {
    /// A factory for `size`-byte payloads (`size >= HEADER_LEN`).
    pub(crate) fn new(size: usize) -> Self {
        let filler: Vec<u8> = (0..size.saturating_sub(HEADER_LEN))
            .map(|i| b'a' + (i % 26) as u8)
            .collect();
        PayloadFactory {
            filler: Bytes::from(filler),
        }
    }

    /// One payload carrying `header`.
    pub(crate) fn make(&self, header: Header) -> Bytes {
        let mut buf = BytesMut::with_capacity(HEADER_LEN + self.filler.len());
        buf.put_u32(MAGIC);
        buf.put_u32(header.producer);
        buf.put_u64(header.seq);
        buf.put_u64(header.send_ns);
        buf.extend_from_slice(&self.filler);
        buf.freeze()
    }
}

/// The header of `payload`, or `None` when it is not a benchmark payload.
pub(crate) fn decode(payload: &[u8]) -> Option<Header> {
    let head = payload.get(..HEADER_LEN)?;
    let u32_at = |i: usize| {
        head.get(i..i + 4)
            .and_then(|b| <[u8; 4]>::try_from(b).ok())
            .map(u32::from_be_bytes)
    };
    let u64_at = |i: usize| {
        head.get(i..i + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    if u32_at(0)? != MAGIC {
        return None;
    }
    Some(Header {
        producer: u32_at(4)?,
        seq: u64_at(8)?,
        send_ns: u64_at(16)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_keeps_the_size() {
        let f = PayloadFactory::new(256);
        let h = Header {
            producer: 7,
            seq: 1 << 40,
            send_ns: 123_456_789,
        };
        let p = f.make(h);
        assert_eq!(p.len(), 256);
        assert_eq!(decode(&p), Some(h));
        assert_eq!(PayloadFactory::new(HEADER_LEN).make(h).len(), HEADER_LEN);
    }

    #[test]
    fn rejects_foreign_and_short_payloads() {
        assert_eq!(decode(b"hello"), None);
        assert_eq!(decode(&[0u8; 64]), None);
        let p = PayloadFactory::new(32).make(Header {
            producer: 0,
            seq: 0,
            send_ns: 0,
        });
        assert_eq!(decode(&p[..HEADER_LEN - 1]), None);
    }
}
