//! Crash recovery of one segment on open: load its index, check the last checkpoint against
//! the segment, scan forward from it, truncate a torn or CRC-failing tail, and rewrite the
//! index if it was missing, damaged or behind. [`RecoveryReport`] sums what a log's open did.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::Path;

use starling_proto::Position;

use crate::error::{Error, Result, io_err};
use crate::index::{self, IndexEntry, SparseIndex};
use crate::record::key;
use crate::segment::check_at;

/// What opening a log found and repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments kept.
    pub segments: u64,
    /// Valid records in them.
    pub records: u64,
    /// Records scanned to recover (those after the last index checkpoints, or all of a
    /// segment whose index was rebuilt).
    pub records_scanned: u64,
    /// Segments whose tail was truncated.
    pub truncated_segments: u64,
    /// Bytes truncated.
    pub truncated_bytes: u64,
    /// Index files that were missing or damaged and were rewritten.
    pub indexes_rebuilt: u64,
    /// Segments left empty (nothing valid in them) and removed.
    pub empty_segments_removed: u64,
    /// One past the last valid record: where appends continue.
    pub next: Option<Position>,
}

/// One segment after recovery.
#[derive(Debug)]
pub(crate) struct Recovered {
    pub file: File,
    pub len: u64,
    pub index: SparseIndex,
    pub records: u64,
    pub first_ms: u64,
    pub last_ms: u64,
    /// One past the last record (`None` when the segment is empty).
    pub end: Option<Position>,
    pub scanned: u64,
    pub truncated: u64,
    pub index_rebuilt: bool,
}

/// Recovers the segment at `log_path` whose name says it starts at `base`.
pub(crate) fn recover_segment(
    log_path: &Path,
    index_path: &Path,
    base: Position,
    interval: u64,
) -> Result<Recovered> {
    let io = io_err(log_path);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(log_path)
        .map_err(io_err(log_path))?;
    let file_len = file.metadata().map_err(io_err(log_path))?.len();

    let loaded = match fs::read(index_path) {
        Ok(bytes) => index::decode_file(&bytes),
        Err(e) if e.kind() == io::ErrorKind::NotFound => index::Loaded {
            entries: Vec::new(),
            clean: false,
        },
        Err(e) => return Err(io_err(index_path)(e)),
    };
    let mut entries = loaded.entries;
    let mut scratch = Vec::new();
    let mut dirty = !loaded.clean;
    if entries.first().is_some_and(|e| e.position != base) {
        // An index of some other segment.
        entries.clear();
        dirty = true;
    }
    // Drop checkpoints past the end or not matching the record at their offset; scan from
    // the last one that holds.
    let mut start: Option<IndexEntry> = None;
    while let Some(last) = entries.last().copied() {
        let checked =
            check_at(&file, last.offset, file_len, &mut scratch).map_err(io_err(log_path))?;
        if checked
            .is_some_and(|h| h.position == last.position && h.timestamp_ms == last.timestamp_ms)
        {
            start = Some(last);
            break;
        }
        entries.pop();
        dirty = true;
    }
    let first_ms = entries.first().map(|e| e.timestamp_ms);
    let mut index = SparseIndex::new(interval, entries);

    let (mut offset, mut records) = match start {
        Some(e) => (e.offset, e.ordinal),
        None => (0, 0),
    };
    let mut first_ms = first_ms;
    let mut last_ms = start.map_or(0, |e| e.timestamp_ms);
    let mut end: Option<Position> = None;
    let mut scanned = 0u64;
    let mut prev_ms = last_ms;
    while let Some(h) = check_at(&file, offset, file_len, &mut scratch).map_err(io_err(log_path))? {
        if offset == 0 && h.position != base {
            return Err(Error::SegmentOrder {
                path: log_path.to_path_buf(),
            });
        }
        let in_order = end.is_none_or(|e| key(h.position) >= key(e));
        if !in_order || h.timestamp_ms < prev_ms {
            break;
        }
        if index.wants(offset) {
            index.push(IndexEntry {
                position: h.position,
                timestamp_ms: h.timestamp_ms,
                offset,
                ordinal: records,
            });
            dirty = true;
        }
        first_ms.get_or_insert(h.timestamp_ms);
        last_ms = h.timestamp_ms;
        prev_ms = h.timestamp_ms;
        end = Some(h.end());
        records += 1;
        scanned += 1;
        offset += h.record_len();
    }
    let truncated = file_len - offset;
    if truncated > 0 {
        file.set_len(offset).map_err(io_err(log_path))?;
        file.sync_all().map_err(io)?;
    }
    if dirty && offset > 0 {
        write_index(index_path, &index)?;
    }
    Ok(Recovered {
        file,
        len: offset,
        index,
        records,
        first_ms: first_ms.unwrap_or(0),
        last_ms,
        end,
        scanned,
        truncated,
        index_rebuilt: dirty && offset > 0,
    })
}

/// Writes a whole index file (through a temporary file and a rename, so a crash leaves the
/// old or the new one).
pub(crate) fn write_index(index_path: &Path, index: &SparseIndex) -> Result<()> {
    let tmp = index_path.with_extension("idx.tmp");
    fs::write(&tmp, index.encode_file()).map_err(io_err(&tmp))?;
    fs::rename(&tmp, index_path).map_err(io_err(index_path))
}
