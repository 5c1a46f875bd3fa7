//! Crash recovery of one segment on open: load its index, check the last checkpoint against
//! the segment, scan forward from it, and decide what the first invalid record means.
//!
//! - In the **last** segment, invalid bytes with no valid record after them are the tail a
//!   crash tore (never fsynced, since an fsync covers the whole file): they are truncated.
//! - Anywhere else (a **sealed** segment, fsynced when the log rolled past it, or the last
//!   segment with valid records after the damage) the bytes may be fsynced data: nothing is
//!   cut. The segment is **quarantined**: renamed aside whole (`<name>.quarantined`, kept
//!   for an operator or a peer to repair from), and its valid prefix copied back under its
//!   name, so the records before the damage are still served.
//! - A record of an **unknown format version** (written by a newer build) fails the open.
//!
//! The index is rewritten if it was missing, damaged or behind. [`RecoveryReport`] sums what a
//! log's open did.

use std::io;
use std::path::{Path, PathBuf};

use starling_proto::Position;

use crate::error::{Error, Malformed, Result, io_err};
use crate::fs::{Fs, FsFile};
use crate::index::{self, IndexEntry, SparseIndex};
use crate::record::{HEADER_LEN, MAGIC, key};
use crate::segment::check_at;

/// The suffix a quarantined segment is renamed with.
pub const QUARANTINE_SUFFIX: &str = "quarantined";

/// What opening a log found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Segments kept.
    pub segments: u64,
    /// Valid records in them.
    pub records: u64,
    /// Records scanned to recover (those after the last index checkpoints, or all of a
    /// segment whose index was rebuilt).
    pub records_scanned: u64,
    /// Segments whose tail was truncated (only ever the last one).
    pub truncated_segments: u64,
    /// Bytes truncated.
    pub truncated_bytes: u64,
    /// Segments quarantined: where each damaged segment file was renamed to. Their valid
    /// prefixes are kept in the log; the rest is only in these files.
    pub quarantined: Vec<PathBuf>,
    /// Index files that were missing or damaged and were rewritten.
    pub indexes_rebuilt: u64,
    /// Last segments that held nothing valid (a torn first record, or empty) and were
    /// removed.
    pub empty_segments_removed: u64,
    /// One past the last valid record: where appends continue. Everything before it that was
    /// fsynced before the crash is here; records after it may have existed (and been read)
    /// before the crash, so a writer numbering its own positions starts a new stream.
    pub next: Option<Position>,
}

/// What recovery did to a segment's file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SegmentState {
    /// Nothing to repair.
    Clean,
    /// This many bytes of torn tail were cut.
    Truncated(u64),
    /// Renamed aside to this path (the valid prefix, if any, copied back).
    Quarantined(PathBuf),
}

/// One segment after recovery.
#[derive(Debug)]
pub(crate) struct Recovered<F> {
    /// The segment's file (`None`: nothing valid is left under its name).
    pub file: Option<F>,
    /// Whether its file was removed (a last segment with nothing valid).
    pub removed: bool,
    pub state: SegmentState,
    pub len: u64,
    pub index: SparseIndex,
    pub records: u64,
    pub first_ms: u64,
    pub last_ms: u64,
    /// One past the last record (`None` when the segment is empty).
    pub end: Option<Position>,
    pub scanned: u64,
    pub index_rebuilt: bool,
}

/// Recovers the segment at `log_path` whose name says it starts at `base`; `last`: whether
/// it is the log's last segment.
pub(crate) fn recover_segment<F: Fs>(
    fs: &F,
    log_path: &Path,
    index_path: &Path,
    base: Position,
    interval: u64,
    last: bool,
) -> Result<Recovered<F::File>> {
    let io = io_err(log_path);
    let file = fs.open(log_path).map_err(io_err(log_path))?;
    let file_len = file.len().map_err(io_err(log_path))?;

    let loaded = match fs.read(index_path) {
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
        let checked = check_at(&file, last.offset, file_len, &mut scratch).map_err(&io)?;
        if checked.is_ok_and(|h| h.position == last.position && h.timestamp_ms == last.timestamp_ms)
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
    let stop = loop {
        if offset >= file_len {
            break None;
        }
        let h = match check_at(&file, offset, file_len, &mut scratch).map_err(&io)? {
            Ok(h) => h,
            Err(why) => break Some(why),
        };
        if offset == 0 && h.position != base {
            return Err(Error::SegmentOrder {
                path: log_path.to_path_buf(),
            });
        }
        let in_order = end.is_none_or(|e| key(h.position) >= key(e));
        if !in_order || h.timestamp_ms < prev_ms {
            break Some(Malformed::OutOfOrder);
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
    };
    let mut out = Recovered {
        file: None,
        removed: false,
        state: SegmentState::Clean,
        len: offset,
        index,
        records,
        first_ms: first_ms.unwrap_or(0),
        last_ms,
        end,
        scanned,
        index_rebuilt: false,
    };
    let Some(why) = stop else {
        if offset == 0 {
            // An empty file (a roll the crash interrupted): nothing to keep or lose.
            drop(file);
            fs.remove_file(log_path).map_err(&io)?;
            let _ = fs.remove_file(index_path);
            out.removed = true;
            return Ok(out);
        }
        return keep(fs, file, index_path, out, dirty);
    };
    if let Malformed::BadVersion(version) = why {
        return Err(Error::UnknownVersion {
            path: log_path.to_path_buf(),
            offset,
            version,
        });
    }
    let later = valid_after(&file, log_path, offset + 1, file_len, &mut scratch)?;
    if last && !later {
        // The torn tail of the last segment: never fsynced, so nothing acked is cut.
        let cut = file_len - offset;
        file.set_len(offset).map_err(&io)?;
        file.sync_data().map_err(&io)?;
        out.state = SegmentState::Truncated(cut);
        if offset == 0 {
            drop(file);
            fs.remove_file(log_path).map_err(&io)?;
            let _ = fs.remove_file(index_path);
            out.removed = true;
            return Ok(out);
        }
        return keep(fs, file, index_path, out, dirty);
    }
    // Possibly fsynced data is damaged: set the whole file aside, keep the valid prefix.
    drop(file);
    let aside = quarantine_path(fs, log_path);
    fs.rename(log_path, &aside).map_err(&io)?;
    let _ = fs.remove_file(index_path);
    out.state = SegmentState::Quarantined(aside.clone());
    if offset == 0 {
        return Ok(out);
    }
    let copy = fs.create_new(log_path).map_err(&io)?;
    let original = fs.open_read(&aside).map_err(io_err(&aside))?;
    copy_prefix(&original, &copy, offset).map_err(&io)?;
    copy.sync_data().map_err(&io)?;
    keep(fs, copy, index_path, out, true)
}

/// Keeps `file` as the recovered segment, writing its index if it changed.
fn keep<F: Fs>(
    fs: &F,
    file: F::File,
    index_path: &Path,
    mut out: Recovered<F::File>,
    dirty: bool,
) -> Result<Recovered<F::File>> {
    if dirty && out.len > 0 {
        write_index(fs, index_path, &out.index)?;
        out.index_rebuilt = true;
    }
    out.file = Some(file);
    Ok(out)
}

/// A free name beside `log_path` for its quarantined copy.
fn quarantine_path<F: Fs>(fs: &F, log_path: &Path) -> PathBuf {
    let base = format!("{}.{QUARANTINE_SUFFIX}", log_path.display());
    let mut path = PathBuf::from(&base);
    let mut n = 1;
    while fs.exists(&path) {
        path = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    path
}

/// Copies the first `len` bytes of `from` into `to`.
fn copy_prefix<T: FsFile>(from: &T, to: &T, len: u64) -> io::Result<()> {
    let mut buf = vec![0u8; usize::try_from(len.min(1 << 20)).unwrap_or(1 << 20)];
    let mut at = 0u64;
    while at < len {
        let n = usize::try_from((len - at).min(buf.len() as u64)).unwrap_or(buf.len());
        from.read_exact_at(&mut buf[..n], at)?;
        to.write_all_at(&buf[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

/// Whether a valid record starts anywhere in `from .. file_len` (every occurrence of the
/// record magic is checked). A record there of an unknown format version fails with
/// [`Error::UnknownVersion`].
fn valid_after<T: FsFile>(
    file: &T,
    path: &Path,
    from: u64,
    file_len: u64,
    scratch: &mut Vec<u8>,
) -> Result<bool> {
    const CHUNK: u64 = 64 * 1024;
    let io = io_err(path);
    let mut buf = vec![0u8; CHUNK as usize];
    let mut at = from;
    while at + HEADER_LEN as u64 <= file_len {
        let n = (file_len - at).min(CHUNK);
        let chunk = &mut buf[..usize::try_from(n).unwrap_or(0)];
        file.read_exact_at(chunk, at).map_err(&io)?;
        for i in 0..chunk.len().saturating_sub(MAGIC.len() - 1) {
            if chunk[i..i + MAGIC.len()] != MAGIC {
                continue;
            }
            let offset = at + i as u64;
            match check_at(file, offset, file_len, scratch).map_err(&io)? {
                Ok(_) => return Ok(true),
                Err(Malformed::BadVersion(version)) => {
                    return Err(Error::UnknownVersion {
                        path: path.to_path_buf(),
                        offset,
                        version,
                    });
                }
                Err(_) => {}
            }
        }
        // The next chunk overlaps by the magic's length less one, so no magic is missed.
        if at + n >= file_len {
            break;
        }
        at += n - (MAGIC.len() as u64 - 1);
    }
    Ok(false)
}

/// Writes a whole index file (through a temporary file and a rename, so a crash leaves the
/// old or the new one).
pub(crate) fn write_index<F: Fs>(fs: &F, index_path: &Path, index: &SparseIndex) -> Result<()> {
    let tmp = index_path.with_extension("idx.tmp");
    fs.create(&tmp)
        .and_then(|f| f.write_all_at(&index.encode_file(), 0))
        .map_err(io_err(&tmp))?;
    fs.rename(&tmp, index_path).map_err(io_err(index_path))
}
