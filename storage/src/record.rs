//! The record format: one sealed batch as it lies in a segment file, its encoder and its
//! bounded decoder.
//!
//! A record is a 40-byte header, the payload and a 4-byte trailer, all integers
//! little-endian:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `STLG` |
//! | 4 | 1 | version, 1 |
//! | 5 | 3 | reserved, zero |
//! | 8 | 4 | payload length `L` |
//! | 12 | 4 | events in the batch (at least 1) |
//! | 16 | 8 | stream id (nonzero) |
//! | 24 | 8 | sequence number of the batch's first event |
//! | 32 | 8 | timestamp, Unix milliseconds (non-decreasing within a log) |
//! | 40 | `L` | payload: the encoded `EventBatch` frame |
//! | 40+`L` | 4 | CRC-32C (Castagnoli) of bytes `0 .. 40+L` |
//!
//! The record's position is (stream, sequence); its events occupy sequence numbers
//! `seq .. seq + events` of that stream. A decoder of these bytes is a decoder of untrusted
//! input: the declared length is checked against a maximum before anything is allocated or
//! sliced, and a record is valid only when its whole length is present and the CRC matches.

use starling_proto::Position;

use crate::error::Malformed;

/// The record magic, `STLG`.
pub const MAGIC: [u8; 4] = *b"STLG";
/// The record format version written and read.
pub const VERSION: u8 = 1;
/// Bytes of the header.
pub const HEADER_LEN: usize = 40;
/// Bytes of the CRC trailer.
pub const TRAILER_LEN: usize = 4;
/// Bytes a record adds to its payload.
pub const OVERHEAD: u64 = (HEADER_LEN + TRAILER_LEN) as u64;

/// A record's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Position of the batch's first event.
    pub position: Position,
    /// Events in the batch (at least 1).
    pub events: u32,
    /// Unix milliseconds.
    pub timestamp_ms: u64,
    /// Bytes of payload.
    pub payload_len: u32,
}

impl Header {
    /// Bytes of the whole record on disk.
    pub fn record_len(&self) -> u64 {
        OVERHEAD + u64::from(self.payload_len)
    }

    /// One past the batch's last event: the position the next batch of the stream takes.
    /// Saturates (a parsed header never overflows).
    pub fn end(&self) -> Position {
        Position {
            stream: self.position.stream,
            seq: self.position.seq.saturating_add(u64::from(self.events)),
        }
    }

    /// The header's 40 bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[8..12].copy_from_slice(&self.payload_len.to_le_bytes());
        b[12..16].copy_from_slice(&self.events.to_le_bytes());
        b[16..24].copy_from_slice(&self.position.stream.to_le_bytes());
        b[24..32].copy_from_slice(&self.position.seq.to_le_bytes());
        b[32..40].copy_from_slice(&self.timestamp_ms.to_le_bytes());
        b
    }

    /// Parses and checks a header; a payload longer than `max_payload` is refused before
    /// anyone allocates for it.
    pub fn parse(b: &[u8; HEADER_LEN], max_payload: u32) -> Result<Header, Malformed> {
        if b[0..4] != MAGIC {
            return Err(Malformed::BadMagic);
        }
        if b[4] != VERSION {
            return Err(Malformed::BadVersion(b[4]));
        }
        if b[5..8] != [0, 0, 0] {
            return Err(Malformed::Reserved);
        }
        let payload_len = u32_at(b, 8);
        if payload_len > max_payload {
            return Err(Malformed::TooLarge {
                len: payload_len,
                max: max_payload,
            });
        }
        let events = u32_at(b, 12);
        if events == 0 {
            return Err(Malformed::ZeroEvents);
        }
        let stream = u64_at(b, 16);
        if stream == 0 {
            return Err(Malformed::ZeroStream);
        }
        let seq = u64_at(b, 24);
        if seq.checked_add(u64::from(events)).is_none() {
            return Err(Malformed::SeqOverflow);
        }
        Ok(Header {
            position: Position { stream, seq },
            events,
            timestamp_ms: u64_at(b, 32),
            payload_len,
        })
    }
}

fn u32_at(b: &[u8; HEADER_LEN], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8; HEADER_LEN], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// `(stream, seq)` ordering of positions: streams ordered by id (ids grow with their start
/// time), then sequence numbers.
pub fn key(p: Position) -> (u64, u64) {
    (p.stream, p.seq)
}

/// Appends the encoded record (header, payload, CRC trailer) to `out`. The header's
/// `payload_len` is taken from `payload`.
pub fn encode(
    position: Position,
    events: u32,
    timestamp_ms: u64,
    payload: &[u8],
    out: &mut Vec<u8>,
) {
    let header = Header {
        position,
        events,
        timestamp_ms,
        payload_len: u32::try_from(payload.len()).unwrap_or(u32::MAX),
    };
    let h = header.encode();
    let crc = crc32c::crc32c_append(crc32c::crc32c(&h), payload);
    out.reserve(HEADER_LEN + payload.len() + TRAILER_LEN);
    out.extend_from_slice(&h);
    out.extend_from_slice(payload);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the start of `buf`: its header and payload (a slice of `buf`).
/// Refuses a declared payload over `max_payload`, a short buffer ([`Malformed::Incomplete`])
/// and a CRC mismatch.
pub fn decode(buf: &[u8], max_payload: u32) -> Result<(Header, &[u8]), Malformed> {
    let head: &[u8; HEADER_LEN] = buf
        .get(..HEADER_LEN)
        .and_then(|h| h.try_into().ok())
        .ok_or(Malformed::Incomplete)?;
    let header = Header::parse(head, max_payload)?;
    let total = usize::try_from(header.record_len()).map_err(|_| Malformed::Incomplete)?;
    let record = buf.get(..total).ok_or(Malformed::Incomplete)?;
    let body_end = total - TRAILER_LEN;
    let computed = crc32c::crc32c(&record[..body_end]);
    let t = &record[body_end..];
    let stored = u32::from_le_bytes([t[0], t[1], t[2], t[3]]);
    if stored != computed {
        return Err(Malformed::BadCrc { stored, computed });
    }
    Ok((header, &record[HEADER_LEN..body_end]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pos(stream: u64, seq: u64) -> Position {
        Position { stream, seq }
    }

    #[test]
    fn layout_is_as_documented() {
        let mut out = Vec::new();
        encode(pos(0x0102, 7), 3, 0x55, b"abc", &mut out);
        assert_eq!(out.len(), 47);
        assert_eq!(&out[0..4], b"STLG");
        assert_eq!(out[4], 1);
        assert_eq!(&out[8..12], &3u32.to_le_bytes());
        assert_eq!(&out[12..16], &3u32.to_le_bytes());
        assert_eq!(&out[16..24], &0x0102u64.to_le_bytes());
        assert_eq!(&out[24..32], &7u64.to_le_bytes());
        assert_eq!(&out[32..40], &0x55u64.to_le_bytes());
        assert_eq!(&out[40..43], b"abc");
        assert_eq!(&out[43..47], &crc32c::crc32c(&out[..43]).to_le_bytes());
    }

    #[test]
    fn a_declared_length_over_the_maximum_is_refused_before_reading_it() {
        let mut out = Vec::new();
        encode(pos(1, 0), 1, 0, &[9u8; 100], &mut out);
        assert_eq!(
            decode(&out[..HEADER_LEN], 99),
            Err(Malformed::TooLarge { len: 100, max: 99 })
        );
        assert_eq!(decode(&out[..HEADER_LEN], 100), Err(Malformed::Incomplete));
    }

    #[test]
    fn invalid_headers_are_named() {
        let mut out = Vec::new();
        encode(pos(1, u64::MAX - 1), 1, 0, b"x", &mut out);
        assert!(decode(&out, 10).is_ok());
        let mut b = out.clone();
        b[12] = 2; // events 2 overflows seq
        assert_eq!(decode(&b, 10), Err(Malformed::SeqOverflow));
        let mut b = out.clone();
        b[12] = 0;
        assert_eq!(decode(&b, 10), Err(Malformed::ZeroEvents));
        let mut b = out.clone();
        b[16] = 0;
        assert_eq!(decode(&b, 10), Err(Malformed::ZeroStream));
        let mut b = out.clone();
        b[4] = 2;
        assert_eq!(decode(&b, 10), Err(Malformed::BadVersion(2)));
        let mut b = out.clone();
        b[6] = 1;
        assert_eq!(decode(&b, 10), Err(Malformed::Reserved));
        let mut b = out;
        b[0] = b'X';
        assert_eq!(decode(&b, 10), Err(Malformed::BadMagic));
    }

    proptest! {
        #[test]
        fn round_trip(stream in 1u64.., seq in 0u64..u64::MAX / 2, events in 1u32.., ts: u64,
                      payload in proptest::collection::vec(any::<u8>(), 0..512)) {
            let mut out = Vec::new();
            encode(pos(stream, seq), events, ts, &payload, &mut out);
            prop_assert_eq!(out.len() as u64, OVERHEAD + payload.len() as u64);
            let (h, p) = decode(&out, 1024).unwrap();
            prop_assert_eq!(h.position, pos(stream, seq));
            prop_assert_eq!(h.events, events);
            prop_assert_eq!(h.timestamp_ms, ts);
            prop_assert_eq!(p, &payload[..]);
            // Every strict prefix is incomplete, never a record and never a panic.
            for cut in 0..out.len() {
                prop_assert!(decode(&out[..cut], 1024).is_err());
            }
        }

        #[test]
        fn any_flipped_bit_is_caught(payload in proptest::collection::vec(any::<u8>(), 0..64),
                                     bit in any::<prop::sample::Index>()) {
            let mut out = Vec::new();
            encode(pos(9, 4), 2, 1234, &payload, &mut out);
            let bit = bit.index(out.len() * 8);
            out[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(decode(&out, 1 << 20).is_err());
        }
    }
}
