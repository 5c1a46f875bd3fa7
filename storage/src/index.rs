//! The sparse index of one segment: checkpoints mapping a record's position and timestamp to
//! its file offset, one every `index_interval_bytes` of segment, kept in memory and appended
//! to a `.idx` file beside the segment.
//!
//! The index is a cache. Its file is never fsynced and is checked on load: an 8-byte header
//! (magic `STIX`, version 1, three zero bytes), then 44-byte entries, little-endian:
//! stream (8), sequence (8), timestamp ms (8), offset (8), record ordinal within the segment
//! (8), and a CRC-32C of those 40 bytes (4). Loading keeps the longest valid prefix (each
//! entry's CRC holds, offsets, positions and ordinals strictly grow, timestamps do not
//! fall, the first entry is the record at offset 0); recovery then checks the last kept
//! checkpoint against the segment and rebuilds the rest by scanning the segment.

use starling_proto::Position;

use crate::record::key;

/// The index file magic.
pub const INDEX_MAGIC: [u8; 4] = *b"STIX";
/// The index format version.
pub const INDEX_VERSION: u8 = 1;
/// Bytes of the index file header.
pub const INDEX_HEADER_LEN: usize = 8;
/// Bytes of one index entry.
pub const ENTRY_LEN: usize = 44;

/// One checkpoint: where a record starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// The record's (first event's) position.
    pub position: Position,
    /// The record's timestamp.
    pub timestamp_ms: u64,
    /// The record's byte offset in the segment.
    pub offset: u64,
    /// How many records of the segment come before it.
    pub ordinal: u64,
}

impl IndexEntry {
    /// The entry's 44 bytes.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut b = [0u8; ENTRY_LEN];
        b[0..8].copy_from_slice(&self.position.stream.to_le_bytes());
        b[8..16].copy_from_slice(&self.position.seq.to_le_bytes());
        b[16..24].copy_from_slice(&self.timestamp_ms.to_le_bytes());
        b[24..32].copy_from_slice(&self.offset.to_le_bytes());
        b[32..40].copy_from_slice(&self.ordinal.to_le_bytes());
        let crc = crc32c::crc32c(&b[..40]);
        b[40..44].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Parses an entry; `None` when its CRC does not match.
    pub fn decode(b: &[u8; ENTRY_LEN]) -> Option<IndexEntry> {
        let word = |at: usize| {
            let mut x = [0u8; 8];
            x.copy_from_slice(&b[at..at + 8]);
            u64::from_le_bytes(x)
        };
        let stored = u32::from_le_bytes([b[40], b[41], b[42], b[43]]);
        if crc32c::crc32c(&b[..40]) != stored {
            return None;
        }
        Some(IndexEntry {
            position: Position {
                stream: word(0),
                seq: word(8),
            },
            timestamp_ms: word(16),
            offset: word(24),
            ordinal: word(32),
        })
    }

    /// Whether `next` may follow this entry in one index.
    fn precedes(&self, next: &IndexEntry) -> bool {
        next.offset > self.offset
            && key(next.position) > key(self.position)
            && next.ordinal > self.ordinal
            && next.timestamp_ms >= self.timestamp_ms
    }
}

/// The index file's header bytes.
pub fn file_header() -> [u8; INDEX_HEADER_LEN] {
    let mut h = [0u8; INDEX_HEADER_LEN];
    h[0..4].copy_from_slice(&INDEX_MAGIC);
    h[4] = INDEX_VERSION;
    h
}

/// What loading an index file's bytes found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loaded {
    /// The valid prefix of entries.
    pub entries: Vec<IndexEntry>,
    /// Whether the whole file was valid (no bad header, entry or trailing bytes).
    pub clean: bool,
}

/// Decodes an index file's bytes, keeping the longest valid prefix of entries.
pub fn decode_file(buf: &[u8]) -> Loaded {
    let bad = Loaded {
        entries: Vec::new(),
        clean: false,
    };
    if buf.get(..INDEX_HEADER_LEN) != Some(&file_header()[..]) {
        return bad;
    }
    let body = &buf[INDEX_HEADER_LEN..];
    let mut entries: Vec<IndexEntry> = Vec::with_capacity(body.len() / ENTRY_LEN);
    let mut chunks = body.chunks_exact(ENTRY_LEN);
    for chunk in chunks.by_ref() {
        let Some(e) = <&[u8; ENTRY_LEN]>::try_from(chunk)
            .ok()
            .and_then(IndexEntry::decode)
        else {
            return Loaded {
                entries,
                clean: false,
            };
        };
        let fits = match entries.last() {
            None => e.offset == 0 && e.ordinal == 0,
            Some(prev) => prev.precedes(&e),
        };
        if !fits {
            return Loaded {
                entries,
                clean: false,
            };
        }
        entries.push(e);
    }
    let clean = chunks.remainder().is_empty();
    Loaded { entries, clean }
}

/// A segment's checkpoints in memory, and the rule for when to add one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SparseIndex {
    entries: Vec<IndexEntry>,
    interval: u64,
}

impl SparseIndex {
    /// An index adding a checkpoint at the first record and then once at least `interval`
    /// bytes of segment lie since the last one.
    pub fn new(interval: u64, entries: Vec<IndexEntry>) -> SparseIndex {
        SparseIndex {
            entries,
            interval: interval.max(1),
        }
    }

    /// The checkpoints, in segment order.
    pub fn entries(&self) -> &[IndexEntry] {
        &self.entries
    }

    /// Whether a record starting at `offset` gets a checkpoint.
    pub fn wants(&self, offset: u64) -> bool {
        match self.entries.last() {
            None => true,
            Some(last) => offset >= last.offset.saturating_add(self.interval),
        }
    }

    /// Adds a checkpoint (the caller keeps them in segment order).
    pub fn push(&mut self, entry: IndexEntry) {
        self.entries.push(entry);
    }

    /// The last checkpoint at or before `target`: where to start scanning for the record that
    /// holds `target` (or the first one after it).
    pub fn seek_position(&self, target: Position) -> Option<IndexEntry> {
        let i = self
            .entries
            .partition_point(|e| key(e.position) <= key(target));
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// The last checkpoint older than `timestamp_ms`: every record at or after that time
    /// lies after it (timestamps do not fall within a log).
    pub fn seek_time(&self, timestamp_ms: u64) -> Option<IndexEntry> {
        let i = self
            .entries
            .partition_point(|e| e.timestamp_ms < timestamp_ms);
        i.checked_sub(1).map(|i| self.entries[i])
    }

    /// The whole index file for these checkpoints.
    pub fn encode_file(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(INDEX_HEADER_LEN + self.entries.len() * ENTRY_LEN);
        out.extend_from_slice(&file_header());
        for e in &self.entries {
            out.extend_from_slice(&e.encode());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entries(n: usize) -> Vec<IndexEntry> {
        (0..n as u64)
            .map(|i| IndexEntry {
                position: Position {
                    stream: 1 + i / 3,
                    seq: i * 10,
                },
                timestamp_ms: 1000 + i / 2,
                offset: i * 100,
                ordinal: i * 5,
            })
            .collect()
    }

    #[test]
    fn seeks_find_the_checkpoint_before() {
        let idx = SparseIndex::new(100, entries(6));
        // entries: (1,0)@0 (1,10)@100 (1,20)@200 (2,30)@300 (2,40)@400 (2,50)@500
        let at = |s, q| Position { stream: s, seq: q };
        assert_eq!(idx.seek_position(at(1, 15)).map(|e| e.offset), Some(100));
        assert_eq!(idx.seek_position(at(1, 10)).map(|e| e.offset), Some(100));
        assert_eq!(idx.seek_position(at(1, 99)).map(|e| e.offset), Some(200));
        assert_eq!(idx.seek_position(at(2, 0)).map(|e| e.offset), Some(200));
        assert_eq!(idx.seek_position(at(0, 0)), None);
        // timestamps: 1000 1000 1001 1001 1002 1002
        assert_eq!(idx.seek_time(1000), None);
        assert_eq!(idx.seek_time(1001).map(|e| e.offset), Some(100));
        assert_eq!(idx.seek_time(5000).map(|e| e.offset), Some(500));
        assert!(idx.wants(600));
        assert!(!idx.wants(599));
    }

    #[test]
    fn a_bad_header_loads_nothing() {
        let mut f = SparseIndex::new(1, entries(3)).encode_file();
        f[4] = 9;
        assert_eq!(decode_file(&f).entries, vec![]);
        assert_eq!(decode_file(&[]).entries, vec![]);
    }

    #[test]
    fn entries_out_of_order_end_the_valid_prefix() {
        let mut es = entries(4);
        es.swap(2, 3);
        let f = SparseIndex::new(1, es.clone()).encode_file();
        let loaded = decode_file(&f);
        assert!(!loaded.clean);
        // The swapped-in later entry still follows; the earlier one after it does not.
        assert_eq!(loaded.entries, es[..3].to_vec());
    }

    proptest! {
        #[test]
        fn round_trip_and_damage(n in 0usize..40, cut in any::<prop::sample::Index>(),
                                 flip in any::<prop::sample::Index>()) {
            let es = entries(n);
            let f = SparseIndex::new(100, es.clone()).encode_file();
            let loaded = decode_file(&f);
            prop_assert!(loaded.clean);
            prop_assert_eq!(&loaded.entries, &es);

            // A cut file keeps exactly the whole entries before the cut.
            let cut = cut.index(f.len() + 1);
            let loaded = decode_file(&f[..cut]);
            let whole = cut.saturating_sub(INDEX_HEADER_LEN) / ENTRY_LEN;
            let expect = if cut < INDEX_HEADER_LEN { 0 } else { whole };
            prop_assert_eq!(&loaded.entries, &es[..expect].to_vec());

            // A flipped bit keeps at most the entries before it, and only valid ones.
            let mut g = f.clone();
            let bit = flip.index(g.len() * 8);
            g[bit / 8] ^= 1 << (bit % 8);
            let loaded = decode_file(&g);
            prop_assert!(!loaded.clean);
            let at = bit / 8;
            let before = if at < INDEX_HEADER_LEN { 0 } else { (at - INDEX_HEADER_LEN) / ENTRY_LEN };
            prop_assert_eq!(&loaded.entries, &es[..before].to_vec());
        }
    }
}
