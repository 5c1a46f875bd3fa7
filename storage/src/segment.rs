//! Segment files: their names, and reading records out of them.
//!
//! A segment is a file of records back to back (see [`crate::record`]), with no header of its
//! own, named by its first record's position: `{stream:016x}-{seq:016x}.log`, its sparse
//! index beside it as `{stream:016x}-{seq:016x}.idx`. Names sort in position order.
//! Readers read with positioned reads (`pread`) within the length the writer has published,
//! so they never see a record being written.

use std::io;
use std::path::Path;

use bytes::Bytes;
use starling_proto::Position;

use crate::error::{Error, Malformed, Result, io_err};
use crate::fs::FsFile;
use crate::record::{self, HEADER_LEN, Header, TRAILER_LEN, key};

/// The segment file extension.
pub const LOG_EXT: &str = "log";
/// The index file extension.
pub const INDEX_EXT: &str = "idx";

/// A segment's file name without extension: its first position in fixed-width hex.
pub fn stem(base: Position) -> String {
    format!("{:016x}-{:016x}", base.stream, base.seq)
}

/// Parses a segment file name (`{stream:016x}-{seq:016x}.log`) back into its position.
pub fn parse_name(name: &str) -> Option<Position> {
    let stem = name.strip_suffix(".log")?;
    let (s, q) = stem.split_once('-')?;
    if s.len() != 16 || q.len() != 16 {
        return None;
    }
    let stream = u64::from_str_radix(s, 16).ok()?;
    let seq = u64::from_str_radix(q, 16).ok()?;
    (stream != 0).then_some(Position { stream, seq })
}

/// One record read back from the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Position of the batch's first event.
    pub position: Position,
    /// Events in the batch.
    pub events: u32,
    /// When it was appended, Unix milliseconds.
    pub timestamp_ms: u64,
    /// The batch's bytes, as appended.
    pub payload: Bytes,
}

impl Record {
    /// One past the batch's last event.
    pub fn end(&self) -> Position {
        Position {
            stream: self.position.stream,
            seq: self.position.seq.saturating_add(u64::from(self.events)),
        }
    }
}

/// Reads and checks the record at `offset`, which must lie whole below `limit` (the length
/// the writer published). The payload is allocated only after its declared length passed
/// `max_payload` and `limit`.
pub(crate) fn read_record_at(
    file: &impl FsFile,
    path: &Path,
    offset: u64,
    limit: u64,
    max_payload: u32,
) -> Result<(Record, u64)> {
    let corrupt = |kind| Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        kind,
    };
    if limit.saturating_sub(offset) < HEADER_LEN as u64 {
        return Err(corrupt(Malformed::Incomplete));
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact_at(&mut head, offset)
        .map_err(io_err(path))?;
    let header = match Header::parse(&head, max_payload) {
        Ok(h) => h,
        Err(Malformed::TooLarge { len, max }) => {
            return Err(Error::RecordTooLarge {
                len: u64::from(len),
                max,
            });
        }
        Err(kind) => return Err(corrupt(kind)),
    };
    let len = header.record_len();
    if limit - offset < len {
        return Err(corrupt(Malformed::Incomplete));
    }
    let total = usize::try_from(len).map_err(|_| corrupt(Malformed::Incomplete))?;
    let mut buf = vec![0u8; total];
    buf[..HEADER_LEN].copy_from_slice(&head);
    file.read_exact_at(&mut buf[HEADER_LEN..], offset + HEADER_LEN as u64)
        .map_err(io_err(path))?;
    record::decode(&buf, max_payload).map_err(corrupt)?;
    let payload = Bytes::from(buf).slice(HEADER_LEN..total - TRAILER_LEN);
    Ok((
        Record {
            position: header.position,
            events: header.events,
            timestamp_ms: header.timestamp_ms,
            payload,
        },
        len,
    ))
}

/// Checks the record at `offset` of a file `file_len` bytes long without allocating for its
/// payload (the CRC is computed over reads of at most 64 KiB into `scratch`): the header when
/// the record is whole and its CRC matches, else why the bytes there are not a valid record
/// (a torn or corrupt tail, or a version this build does not read). Used by recovery, which
/// must not trust any declared length.
pub(crate) fn check_at(
    file: &impl FsFile,
    offset: u64,
    file_len: u64,
    scratch: &mut Vec<u8>,
) -> io::Result<std::result::Result<Header, Malformed>> {
    if file_len.saturating_sub(offset) < HEADER_LEN as u64 {
        return Ok(Err(Malformed::Incomplete));
    }
    let mut head = [0u8; HEADER_LEN];
    file.read_exact_at(&mut head, offset)?;
    let header = match Header::parse(&head, u32::MAX) {
        Ok(h) => h,
        Err(why) => return Ok(Err(why)),
    };
    if file_len - offset < header.record_len() {
        return Ok(Err(Malformed::Incomplete));
    }
    let mut crc = crc32c::crc32c(&head);
    const CHUNK: u64 = 64 * 1024;
    let mut at = offset + HEADER_LEN as u64;
    let mut left = u64::from(header.payload_len);
    // At most 64 KiB, and no more than this payload needs: reused across records.
    let want = usize::try_from(left.min(CHUNK)).unwrap_or(0);
    if scratch.len() < want {
        scratch.resize(want, 0);
    }
    while left > 0 {
        let n = usize::try_from(left.min(CHUNK))
            .unwrap_or(want)
            .min(scratch.len());
        file.read_exact_at(&mut scratch[..n], at)?;
        crc = crc32c::crc32c_append(crc, &scratch[..n]);
        at += n as u64;
        left -= n as u64;
    }
    let mut trailer = [0u8; TRAILER_LEN];
    file.read_exact_at(&mut trailer, at)?;
    let stored = u32::from_le_bytes(trailer);
    if stored != crc {
        return Ok(Err(Malformed::BadCrc {
            stored,
            computed: crc,
        }));
    }
    Ok(Ok(header))
}

/// What [`scan`] found in a segment's bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scan {
    /// The valid records, in order, each with its offset.
    pub records: Vec<(u64, Header)>,
    /// Bytes of valid records from the start; the rest is a torn or corrupt tail.
    pub valid_len: u64,
    /// Why the scan stopped before the end, if it did.
    pub stop: Option<Malformed>,
}

/// Scans a whole segment held in memory the way recovery scans a file: records back to back,
/// each valid, at a position not before the previous record's end and stamped no earlier,
/// up to the first that is not. Allocates nothing per
/// record beyond the result (declared lengths are checked against `max_payload` and the
/// buffer). The fuzz target drives this.
pub fn scan(buf: &[u8], max_payload: u32) -> Scan {
    let mut records = Vec::new();
    let mut at = 0usize;
    let mut prev_end: Option<Position> = None;
    let mut prev_ms = 0u64;
    let stop = loop {
        let Some(rest) = buf.get(at..) else {
            break Some(Malformed::Incomplete);
        };
        if rest.is_empty() {
            break None;
        }
        match record::decode(rest, max_payload) {
            Ok((h, _)) => {
                if prev_end.is_some_and(|e| key(h.position) < key(e)) || h.timestamp_ms < prev_ms {
                    break Some(Malformed::OutOfOrder);
                }
                prev_end = Some(h.end());
                prev_ms = h.timestamp_ms;
                records.push((at as u64, h));
                // decode checked the whole record lies in `rest`.
                at += usize::try_from(h.record_len()).unwrap_or(rest.len());
            }
            Err(m) => break Some(m),
        }
    };
    Scan {
        records,
        valid_len: at as u64,
        stop,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_round_trip_and_sort_in_position_order() {
        let a = Position {
            stream: 0x1234,
            seq: 0xff,
        };
        let b = Position {
            stream: 0x1234,
            seq: 0x100,
        };
        let c = Position {
            stream: 0x1_0000_0000,
            seq: 0,
        };
        let name = |p| format!("{}.log", stem(p));
        assert_eq!(name(a), "0000000000001234-00000000000000ff.log");
        assert_eq!(parse_name(&name(a)), Some(a));
        assert!(name(a) < name(b) && name(b) < name(c));
        assert_eq!(parse_name("0000000000000000-0000000000000000.log"), None);
        assert_eq!(parse_name("12-34.log"), None);
        assert_eq!(parse_name(&format!("{}.idx", stem(a))), None);
    }

    proptest! {
        /// A segment of records round-trips through `scan`; cut anywhere, it keeps exactly
        /// the whole records before the cut.
        #[test]
        fn segment_round_trip(sizes in proptest::collection::vec(0usize..300, 1..20),
                              cut in any::<prop::sample::Index>()) {
            let mut buf = Vec::new();
            let mut seq = 0u64;
            let mut ends = Vec::new();
            for (i, n) in sizes.iter().enumerate() {
                let events = 1 + (i as u32 % 3);
                record::encode(Position { stream: 7, seq }, events, 100 + i as u64, &vec![i as u8; *n], &mut buf);
                seq += u64::from(events);
                ends.push(buf.len() as u64);
            }
            let s = scan(&buf, 1024);
            prop_assert_eq!(s.stop, None);
            prop_assert_eq!(s.valid_len, buf.len() as u64);
            prop_assert_eq!(s.records.len(), sizes.len());
            let cut = cut.index(buf.len() + 1);
            let s = scan(&buf[..cut], 1024);
            let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
            prop_assert_eq!(s.records.len(), whole);
            prop_assert_eq!(s.valid_len, if whole == 0 { 0 } else { ends[whole - 1] });
        }
    }
}
