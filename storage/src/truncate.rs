//! Cutting a log back: [`Log::truncate_from`] removes the tail from a position on (whole
//! segments, newest first, then the cut inside the segment that holds the position), and
//! [`Log::remove_segments_before`] deletes whole segments whose records all lie before a
//! position. A replicated log store needs both: its consensus library replaces an
//! uncommitted, conflicting suffix and purges the prefix a snapshot covers.
//!
//! Both are durable when they return (the cut segment and the directory are fsynced), and
//! any failure of the file layer part way poisons the log ([`crate::Error::Failed`]): what is
//! on disk is then unknown until the log is reopened. A crash part way leaves a log whose
//! records are still a contiguous prefix of what it held (segments are removed newest first
//! for a truncation, oldest first for a purge), never a gap.
//!
//! Readers placed on a removed segment end with [`crate::Error::Truncated`]; a reader on the
//! cut segment must not be kept across a truncation (the store that truncates owns its
//! readers and drops them first).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use starling_proto::Position;

use crate::error::{FailedOp, Result};
use crate::fs::{Fs, FsFile};
use crate::index::{ENTRY_LEN, INDEX_HEADER_LEN, SparseIndex};
use crate::log::{Active, Log};
use crate::record::key;
use crate::segment::read_record_at;
use crate::shared::Segment;

/// What a truncation or a purge removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cut {
    /// Whole segment files deleted.
    pub segments: u64,
    /// Records removed from the segment that was cut (not counting whole segments).
    pub records_cut: u64,
}

impl<F: Fs> Log<F> {
    /// Removes every record that ends after `position` (the record holding it and all later
    /// ones), so the next append goes at the first removed record's position. Segments that
    /// start at or after `position` are deleted, newest first; the segment holding it is cut
    /// and fsynced and becomes the active one. A position at or after the log's end removes
    /// nothing; a position at or before the first record empties the log (the next append
    /// may then take any position).
    pub fn truncate_from(&mut self, position: Position) -> Result<Cut> {
        self.shared.check()?;
        let Some(next) = self.next else {
            return Ok(Cut::default());
        };
        if key(position) >= key(next) {
            return Ok(Cut::default());
        }
        let shared = Arc::clone(&self.shared);
        let (doomed, keep) = {
            let mut state = shared.state.lock();
            let i = state
                .segments
                .partition_point(|s| key(s.base) < key(position));
            let doomed: Vec<Arc<Segment>> = state.segments.drain(i..).collect();
            for s in &doomed {
                s.deleted.store(true, Ordering::Release);
            }
            state.active_file = None;
            (doomed, state.segments.last().cloned())
        };
        // The writer's handles on a removed or cut segment go first.
        self.active = None;
        let mut cut = Cut::default();
        for s in doomed.iter().rev() {
            if let Err(e) = shared.fs.remove_file(&s.path) {
                return Err(shared.poison(FailedOp::Rollback, &s.path, &e));
            }
            let _ = shared.fs.remove_file(&s.index_path);
            cut.segments += 1;
        }
        if !doomed.is_empty() {
            let _sync = shared.sync_lock.lock();
            shared.sync_dir_locked()?;
        }
        let Some(seg) = keep else {
            let mut state = shared.state.lock();
            state.next = None;
            state.durable = None;
            self.next = None;
            return Ok(cut);
        };
        let file = match shared.fs.open(&seg.path) {
            Ok(f) => f,
            Err(e) => return Err(shared.poison(FailedOp::Rollback, &seg.path, &e)),
        };
        let len = seg.len.load(Ordering::Acquire);
        let checkpoint = seg.index.lock().seek_position(position);
        let (mut offset, mut ordinal) = checkpoint.map_or((0, 0), |e| (e.offset, e.ordinal));
        let mut new_next = checkpoint.map_or(seg.base, |e| e.position);
        let max = shared.config.max_record_bytes;
        while offset < len {
            let (record, record_len) = read_record_at(&file, &seg.path, offset, len, max)?;
            if key(record.end()) > key(position) {
                new_next = record.position;
                break;
            }
            new_next = record.end();
            offset += record_len;
            ordinal += 1;
        }
        let old_records = seg.records.load(Ordering::Relaxed);
        if offset < len {
            if let Err(e) = file.set_len(offset) {
                return Err(shared.poison(FailedOp::Rollback, &seg.path, &e));
            }
            let _sync = shared.sync_lock.lock();
            if let Err(e) = file.sync_data() {
                return Err(shared.poison(FailedOp::Fsync, &seg.path, &e));
            }
        }
        cut.records_cut = old_records.saturating_sub(ordinal);
        let kept: Vec<_> = {
            let index = seg.index.lock();
            index
                .entries()
                .iter()
                .copied()
                .filter(|e| e.offset < offset)
                .collect()
        };
        let index_len = (INDEX_HEADER_LEN + kept.len() * ENTRY_LEN) as u64;
        let index_file = shared
            .fs
            .open(&seg.index_path)
            .and_then(|f| f.set_len(index_len).map(|()| f))
            .ok();
        let file = Arc::new(file);
        {
            let mut state = shared.state.lock();
            *seg.index.lock() = SparseIndex::new(shared.config.index_interval_bytes, kept);
            seg.records.store(ordinal, Ordering::Relaxed);
            seg.len.store(offset, Ordering::Release);
            seg.sealed.store(false, Ordering::Release);
            state.next = Some(new_next);
            state.durable = Some(new_next);
            state.active_file = Some(Arc::clone(&file));
        }
        self.next = Some(new_next);
        self.active = Some(Active {
            seg,
            file,
            index_file,
            index_len,
            len: offset,
            records: ordinal,
        });
        Ok(cut)
    }

    /// Deletes, oldest first, the whole segments whose records all lie before `position`
    /// (a segment goes when the next segment starts at or before `position`; the active
    /// segment never goes), and fsyncs the directory. Returns what it removed.
    pub fn remove_segments_before(&mut self, position: Position) -> Result<Cut> {
        let shared = Arc::clone(&self.shared);
        let doomed: Vec<Arc<Segment>> = {
            let mut state = shared.state.lock();
            let segs = &state.segments;
            let mut n = 0;
            while n + 1 < segs.len() && key(segs[n + 1].base) <= key(position) {
                n += 1;
            }
            let doomed: Vec<_> = state.segments.drain(..n).collect();
            for s in &doomed {
                s.deleted.store(true, Ordering::Release);
            }
            doomed
        };
        let mut cut = Cut::default();
        if doomed.is_empty() {
            return Ok(cut);
        }
        for s in &doomed {
            if let Err(e) = shared.fs.remove_file(&s.path) {
                return Err(shared.poison(FailedOp::Rollback, &s.path, &e));
            }
            let _ = shared.fs.remove_file(&s.index_path);
            cut.segments += 1;
            shared
                .stats
                .records_deleted
                .fetch_add(s.records.load(Ordering::Relaxed), Ordering::Relaxed);
            shared
                .stats
                .bytes_deleted
                .fetch_add(s.len.load(Ordering::Acquire), Ordering::Relaxed);
        }
        shared
            .stats
            .segments_deleted
            .fetch_add(cut.segments, Ordering::Relaxed);
        let _sync = shared.sync_lock.lock();
        shared.sync_dir_locked()?;
        Ok(cut)
    }
}
