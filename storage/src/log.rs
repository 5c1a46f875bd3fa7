//! The log: one directory of segments that a single writer appends to and any number of
//! readers read, with its configuration, fsync policy, recovery on open and retention.
//!
//! [`Log`] is the writer (one per directory; appends take `&mut self`). [`LogView`] is a
//! cheap, cloneable, thread-safe handle for everything else: readers, `sync`, stats. Both
//! share the segment list; the writer publishes a record (segment length, index checkpoint,
//! next position) only after its bytes are written, so readers never see part of a record.
//! Both are generic over the file layer ([`Fs`], [`RealFs`] by default).
//!
//! Every fsync (the writer's at a roll or under `Always`, a view's `sync`, the directory's)
//! runs under one lock, and its failure poisons the log for every handle before the lock is
//! released: no fsync that runs after a failed one can report durability for data the failed
//! one may have dropped.

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use starling_proto::Position;

pub use crate::config::{FsyncPolicy, LogConfig};
use crate::error::{Error, FailedOp, Failure, Result, io_err};
use crate::fs::{Fs, FsFile, RealFs};
use crate::index::{self, IndexEntry, SparseIndex};
use crate::reader::{Reader, Start};
use crate::record::{self, OVERHEAD, key};
use crate::recovery::{self, RecoveryReport, SegmentState};
use crate::retention::{self, RetentionPolicy, RetentionReport, SegmentSummary};
use crate::segment::{self, INDEX_EXT, LOG_EXT};
use crate::shared::{Segment, Shared, State};
use crate::stats::{Counters, LogStats};

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Appended {
    /// The record's position (its first event's).
    pub position: Position,
    /// One past its last event: where the next batch of the stream goes.
    pub next: Position,
    /// The timestamp stored (the one given, raised to the previous record's if older).
    pub timestamp_ms: u64,
    /// Whether the fsync policy is satisfied for it already (`Always` and `Never`); under
    /// `Interval` it is once [`LogView::durable_next`] passes `next`.
    pub durable: bool,
    /// How long the fsync took, if this append did one.
    pub fsync: Option<Duration>,
}

/// What a sync did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Synced {
    /// Every record before this position is durable (`None`: the log is empty).
    pub durable_next: Option<Position>,
    /// How long the fsync took (`None`: nothing was pending).
    pub took: Option<Duration>,
}

impl Synced {
    /// Whether a record whose [`Appended::next`] is `next` is durable by this sync: the point
    /// at which a `persisted` ack for it may be sent.
    pub fn covers(&self, next: Position) -> bool {
        self.durable_next.is_some_and(|d| key(d) >= key(next))
    }
}

/// The writer's hold on the active segment.
#[derive(Debug)]
pub(crate) struct Active<F: Fs> {
    pub(crate) seg: Arc<Segment>,
    pub(crate) file: Arc<F::File>,
    /// `None` after an index write failed: the index is rebuilt at the next open.
    pub(crate) index_file: Option<F::File>,
    /// Bytes of the index file written.
    pub(crate) index_len: u64,
    pub(crate) len: u64,
    pub(crate) records: u64,
}

/// The writer of a log directory.
#[derive(Debug)]
pub struct Log<F: Fs = RealFs> {
    pub(crate) shared: Arc<Shared<F>>,
    pub(crate) active: Option<Active<F>>,
    pub(crate) next: Option<Position>,
    last_ms: u64,
    buf: Vec<u8>,
}

/// A cloneable, thread-safe handle on a log for reading, syncing and stats.
#[derive(Debug)]
pub struct LogView<F: Fs = RealFs> {
    shared: Arc<Shared<F>>,
}

impl<F: Fs> Clone for LogView<F> {
    fn clone(&self) -> Self {
        LogView {
            shared: Arc::clone(&self.shared),
        }
    }
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Log<RealFs> {
    /// Opens (creating it if needed) the log in `dir` on the real file system and recovers
    /// it; see [`Log::open_in`].
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<(Log, RecoveryReport)> {
        Log::open_in(RealFs, dir, config)
    }
}

impl<F: Fs> Log<F> {
    /// Opens (creating it if needed) the log in `dir` through `fs` and recovers it. Each
    /// segment is scanned from its last index checkpoint; missing or damaged indexes are
    /// rebuilt. The last segment's torn or corrupt tail (its unsynced end after a crash) is
    /// truncated; damage anywhere else (a sealed segment, or the last one with valid records
    /// after the damage) is never cut: the segment is quarantined, renamed aside whole, and
    /// its valid prefix kept as the segment. A record of an unknown format version fails the
    /// open ([`Error::UnknownVersion`]) before anything is changed in its segment. Appends
    /// continue one past the last valid record ([`RecoveryReport::next`]); a writer that
    /// numbers its own positions should start a new stream there, since records past it may
    /// have been read before the crash took them.
    pub fn open_in(
        fs: F,
        dir: impl AsRef<Path>,
        config: LogConfig,
    ) -> Result<(Log<F>, RecoveryReport)> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs.create_dir_all(&dir).map_err(io_err(&dir))?;
        let names = fs.list(&dir).map_err(io_err(&dir))?;
        let mut bases = Vec::new();
        for name in &names {
            if let Some(base) = segment::parse_name(name) {
                bases.push(base);
            } else if name.ends_with(".idx.tmp") {
                let _ = fs.remove_file(&dir.join(name));
            }
        }
        bases.sort_by_key(|b| key(*b));

        let mut report = RecoveryReport::default();
        let mut segments: Vec<Arc<Segment>> = Vec::new();
        let mut last: Option<(F::File, u64, u64)> = None;
        let mut next: Option<Position> = None;
        let mut last_ms = 0;
        let mut dir_changed = false;
        let count = bases.len();
        for (i, base) in bases.into_iter().enumerate() {
            let stem = segment::stem(base);
            let path = dir.join(format!("{stem}.{LOG_EXT}"));
            let index_path = dir.join(format!("{stem}.{INDEX_EXT}"));
            if next.is_some_and(|n| key(base) < key(n)) {
                return Err(Error::SegmentOrder { path });
            }
            let r = recovery::recover_segment(
                &fs,
                &path,
                &index_path,
                base,
                config.index_interval_bytes,
                i + 1 == count,
            )?;
            report.records_scanned += r.scanned;
            match &r.state {
                SegmentState::Clean => {}
                SegmentState::Truncated(bytes) => {
                    report.truncated_segments += 1;
                    report.truncated_bytes += bytes;
                }
                SegmentState::Quarantined(to) => {
                    report.quarantined.push(to.clone());
                    dir_changed = true;
                }
            }
            let Some(file) = r.file else {
                // Nothing valid left under the segment's name.
                if r.removed {
                    report.empty_segments_removed += 1;
                    dir_changed = true;
                }
                continue;
            };
            if r.index_rebuilt {
                report.indexes_rebuilt += 1;
            }
            if r.first_ms < last_ms {
                return Err(Error::SegmentOrder { path });
            }
            report.segments += 1;
            report.records += r.records;
            next = r.end;
            last_ms = r.last_ms;
            segments.push(Arc::new(Segment {
                base,
                path,
                index_path,
                len: AtomicU64::new(r.len),
                records: AtomicU64::new(r.records),
                sealed: AtomicBool::new(true),
                deleted: AtomicBool::new(false),
                last_ms: AtomicU64::new(r.last_ms),
                index: Mutex::new(r.index),
            }));
            last = Some((file, r.len, r.records));
        }
        // Remove index files whose segment is gone.
        for name in fs.list(&dir).map_err(io_err(&dir))? {
            if let Some(stem) = name.strip_suffix(&format!(".{INDEX_EXT}"))
                && !fs.exists(&dir.join(format!("{stem}.{LOG_EXT}")))
            {
                let _ = fs.remove_file(&dir.join(&name));
            }
        }
        if dir_changed {
            fs.sync_dir(&dir).map_err(io_err(&dir))?;
        }
        report.next = next;

        let mut active = None;
        if let (Some(seg), Some((file, len, records))) = (segments.last(), last) {
            // What the previous process wrote may still be only in the page cache.
            file.sync_data().map_err(io_err(&seg.path))?;
            seg.sealed.store(false, Ordering::Release);
            let (index_file, index_len) = match fs.open(&seg.index_path) {
                Ok(f) => match f.len() {
                    Ok(n) => (Some(f), n),
                    Err(_) => (None, 0),
                },
                Err(_) => (None, 0),
            };
            active = Some(Active {
                seg: Arc::clone(seg),
                file: Arc::new(file),
                index_file,
                index_len,
                len,
                records,
            });
        }
        let shared = Arc::new(Shared {
            fs,
            dir,
            config,
            state: Mutex::new(State {
                segments,
                next,
                durable: next,
                active_file: active.as_ref().map(|a| Arc::clone(&a.file)),
                failure: None,
            }),
            stats: Counters::default(),
            sync_lock: Mutex::new(()),
            poisoned: AtomicBool::new(false),
        });
        let stats = &shared.stats;
        stats
            .recovery_truncations
            .store(report.truncated_segments, Ordering::Relaxed);
        stats
            .recovery_truncated_bytes
            .store(report.truncated_bytes, Ordering::Relaxed);
        stats
            .recovery_quarantined
            .store(report.quarantined.len() as u64, Ordering::Relaxed);
        let log = Log {
            shared,
            active,
            next,
            last_ms,
            buf: Vec::new(),
        };
        Ok((log, report))
    }

    /// Appends one sealed batch, `events` events from `position`, stamped now. See
    /// [`Log::append_at`].
    pub fn append(&mut self, position: Position, events: u32, payload: &[u8]) -> Result<Appended> {
        self.append_at(position, events, now_ms(), payload)
    }

    /// Appends one sealed batch: `events` events starting at `position`, `payload` its
    /// encoded frame, stamped `timestamp_ms` (raised to the last record's timestamp if
    /// older, so times never fall within a log). `position` must be the log's next position
    /// ([`Log::next_position`]) or start a stream with a larger id. Returns once the fsync
    /// policy is satisfied (`Always`: fsynced; `Never`: written; `Interval`: written, and
    /// durable once [`LogView::durable_next`] passes it). A write that fails (a full disk:
    /// [`Error::is_no_space`]) is taken back and the log stays usable; a failed fsync, or a
    /// failed write that cannot be taken back, poisons it ([`Error::Failed`]).
    pub fn append_at(
        &mut self,
        position: Position,
        events: u32,
        timestamp_ms: u64,
        payload: &[u8],
    ) -> Result<Appended> {
        self.shared.check()?;
        let max = self.shared.config.max_record_bytes;
        if payload.len() as u64 > u64::from(max) {
            return Err(Error::RecordTooLarge {
                len: payload.len() as u64,
                max,
            });
        }
        if position.stream == 0 {
            return Err(Error::InvalidBatch("stream id 0"));
        }
        if events == 0 {
            return Err(Error::InvalidBatch("no events"));
        }
        let Some(end_seq) = position.seq.checked_add(u64::from(events)) else {
            return Err(Error::InvalidBatch("sequence overflows"));
        };
        if let Some(next) = self.next {
            let follows = position == next || position.stream > next.stream;
            if !follows {
                return Err(Error::OutOfOrder {
                    next,
                    got: position,
                });
            }
        }
        let ts = timestamp_ms.max(self.last_ms);
        let record_len = OVERHEAD + payload.len() as u64;
        let roll = match &self.active {
            None => true,
            Some(a) => a.len > 0 && a.len + record_len > self.shared.config.segment_bytes,
        };
        if roll {
            self.roll(position)?;
        }
        let Some(active) = self.active.as_mut() else {
            return Err(Error::InvalidBatch("no active segment"));
        };

        self.buf.clear();
        record::encode(position, events, ts, payload, &mut self.buf);
        let offset = active.len;
        if let Err(e) = active.file.write_all_at(&self.buf, offset) {
            // Take back a partial write; if that fails too the tail is unknown.
            if let Err(e2) = active.file.set_len(offset) {
                return Err(self
                    .shared
                    .poison(FailedOp::Rollback, &active.seg.path, &e2));
            }
            return Err(io_err(&active.seg.path)(e));
        }
        let mut fsync = None;
        if self.shared.config.fsync == FsyncPolicy::Always {
            let _sync = self.shared.sync_lock.lock();
            self.shared.check()?;
            let started = Instant::now();
            if let Err(e) = active.file.sync_data() {
                return Err(self.shared.poison(FailedOp::Fsync, &active.seg.path, &e));
            }
            let took = started.elapsed();
            self.shared.stats.fsync(took);
            fsync = Some(took);
        }

        let next = Position {
            stream: position.stream,
            seq: end_seq,
        };
        let mut entry = None;
        {
            let index = active.seg.index.lock();
            if index.wants(offset) {
                entry = Some(IndexEntry {
                    position,
                    timestamp_ms: ts,
                    offset,
                    ordinal: active.records,
                });
            }
        }
        if let Some(e) = entry
            && let Some(f) = active.index_file.as_ref()
        {
            if f.write_all_at(&e.encode(), active.index_len).is_ok() {
                active.index_len += index::ENTRY_LEN as u64;
            } else {
                active.index_file = None;
            }
        }
        active.len = offset + record_len;
        active.records += 1;
        {
            let mut state = self.shared.state.lock();
            if let Some(e) = entry {
                active.seg.index.lock().push(e);
            }
            active.seg.last_ms.store(ts, Ordering::Relaxed);
            active.seg.records.store(active.records, Ordering::Relaxed);
            active.seg.len.store(active.len, Ordering::Release);
            state.next = Some(next);
            if !matches!(self.shared.config.fsync, FsyncPolicy::Interval(_)) {
                state.durable = Some(next);
            }
        }
        self.shared
            .stats
            .bytes_appended
            .fetch_add(record_len, Ordering::Relaxed);
        self.shared
            .stats
            .records_appended
            .fetch_add(1, Ordering::Relaxed);
        self.next = Some(next);
        self.last_ms = ts;
        Ok(Appended {
            position,
            next,
            timestamp_ms: ts,
            durable: !matches!(self.shared.config.fsync, FsyncPolicy::Interval(_)),
            fsync,
        })
    }

    /// Seals the active segment (fsynced unless the policy is `Never`) and starts a new one
    /// named `base`, fsyncing the directory so the new segment's entry is durable before any
    /// record in it can be reported durable.
    fn roll(&mut self, base: Position) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let policy = shared.config.fsync;
        let _sync = shared.sync_lock.lock();
        shared.check()?;
        if let Some(old) = &self.active
            && policy != FsyncPolicy::Never
        {
            let started = Instant::now();
            if let Err(e) = old.file.sync_data() {
                return Err(shared.poison(FailedOp::Fsync, &old.seg.path, &e));
            }
            shared.stats.fsync(started.elapsed());
        }
        let dir = &shared.dir;
        let stem = segment::stem(base);
        let path = dir.join(format!("{stem}.{LOG_EXT}"));
        let index_path = dir.join(format!("{stem}.{INDEX_EXT}"));
        let file = match shared.fs.create_new(&path) {
            Ok(f) => f,
            // A roll that failed after creating the file (a full disk) left it empty.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let f = shared.fs.open(&path).map_err(io_err(&path))?;
                if f.len().map_err(io_err(&path))? != 0 {
                    return Err(io_err(&path)(e));
                }
                f
            }
            Err(e) => return Err(io_err(&path)(e)),
        };
        let header = index::file_header();
        let index_file = shared
            .fs
            .create(&index_path)
            .and_then(|f| f.write_all_at(&header, 0).map(|()| f))
            .ok();
        shared.sync_dir_locked()?;
        let seg = Arc::new(Segment {
            base,
            path,
            index_path,
            len: AtomicU64::new(0),
            records: AtomicU64::new(0),
            sealed: AtomicBool::new(false),
            deleted: AtomicBool::new(false),
            last_ms: AtomicU64::new(self.last_ms),
            index: Mutex::new(SparseIndex::new(
                shared.config.index_interval_bytes,
                Vec::new(),
            )),
        });
        let file = Arc::new(file);
        {
            let mut state = shared.state.lock();
            state.segments.push(Arc::clone(&seg));
            state.active_file = Some(Arc::clone(&file));
            if matches!(policy, FsyncPolicy::Interval(_)) {
                // Everything before the new segment was fsynced above.
                state.durable = state.next;
            }
            if let Some(old) = &self.active {
                old.seg.sealed.store(true, Ordering::Release);
            }
        }
        self.active = Some(Active {
            seg,
            file,
            index_file,
            index_len: header.len() as u64,
            len: 0,
            records: 0,
        });
        Ok(())
    }

    /// One past the last record: the position the current stream's next batch takes
    /// (`None` while the log is empty).
    pub fn next_position(&self) -> Option<Position> {
        self.next
    }

    /// A handle for readers, syncs and stats that outlives borrows of the writer.
    pub fn view(&self) -> LogView<F> {
        LogView {
            shared: Arc::clone(&self.shared),
        }
    }

    /// See [`LogView::sync`].
    pub fn sync(&self) -> Result<Synced> {
        self.view().sync()
    }

    /// See [`LogView::read_from`].
    pub fn read_from(&self, position: Position) -> Reader<F> {
        self.view().read_from(position)
    }

    /// See [`LogView::read_from_time`].
    pub fn read_from_time(&self, timestamp_ms: u64) -> Reader<F> {
        self.view().read_from_time(timestamp_ms)
    }

    /// See [`LogView::position_at_time`].
    pub fn position_at_time(&self, timestamp_ms: u64) -> Result<Option<Position>> {
        self.view().position_at_time(timestamp_ms)
    }

    /// See [`LogView::stats`].
    pub fn stats(&self) -> LogStats {
        self.view().stats()
    }

    /// See [`LogView::failure`].
    pub fn failure(&self) -> Option<Failure> {
        self.shared.failure()
    }

    /// Applies the configured retention at `now_ms`: deletes whole segments, oldest first,
    /// that are older than `max_age_ms` or beyond `max_bytes` — never the active segment —
    /// and fsyncs the directory. A reader on a deleted segment ends with
    /// [`Error::Truncated`]. Runs on a poisoned log too (it frees space, and deletes nothing
    /// the retention policy keeps).
    pub fn enforce_retention(&mut self, now_ms: u64) -> Result<RetentionReport> {
        let policy = self.shared.config.retention;
        self.enforce_retention_under(policy, now_ms)
    }

    /// How many segments [`Log::enforce_retention_under`] would delete under `policy` at
    /// `now_ms` (nothing is deleted): a caller that must make what stays durable before
    /// anything goes (a replicated topic's committed log) syncs first when it is not 0.
    pub fn retention_due(&self, policy: RetentionPolicy, now_ms: u64) -> usize {
        let state = self.shared.state.lock();
        retention::plan(&summaries(&state.segments), &policy, now_ms).0
    }

    /// [`Log::enforce_retention`] under `policy` instead of the configured one (a retention
    /// changed while the log is open).
    pub fn enforce_retention_under(
        &mut self,
        policy: RetentionPolicy,
        now_ms: u64,
    ) -> Result<RetentionReport> {
        let doomed: Vec<Arc<Segment>> = {
            let mut state = self.shared.state.lock();
            let (n, _) = retention::plan(&summaries(&state.segments), &policy, now_ms);
            let doomed: Vec<_> = state.segments.drain(..n).collect();
            for s in &doomed {
                s.deleted.store(true, Ordering::Release);
            }
            doomed
        };
        let mut report = RetentionReport::default();
        if doomed.is_empty() {
            return Ok(report);
        }
        for s in &doomed {
            let last_ms = s.last_ms.load(Ordering::Relaxed);
            if policy
                .max_age_ms
                .is_some_and(|age| now_ms.saturating_sub(last_ms) > age)
            {
                report.by_age += 1;
            }
            report.segments += 1;
            report.bytes += s.len.load(Ordering::Acquire);
            report.records += s.records.load(Ordering::Relaxed);
        }
        let stats = &self.shared.stats;
        stats
            .segments_deleted
            .fetch_add(report.segments, Ordering::Relaxed);
        stats
            .bytes_deleted
            .fetch_add(report.bytes, Ordering::Relaxed);
        stats
            .records_deleted
            .fetch_add(report.records, Ordering::Relaxed);
        let fs = &self.shared.fs;
        for s in &doomed {
            fs.remove_file(&s.path).map_err(io_err(&s.path))?;
            let _ = fs.remove_file(&s.index_path);
        }
        let _sync = self.shared.sync_lock.lock();
        self.shared.sync_dir_locked()?;
        Ok(report)
    }
}

impl<F: Fs> LogView<F> {
    /// Reads the log from the record holding `position` (or the first one after it), in
    /// order, across segments: the rest of `position`'s stream and every later stream, as
    /// the retained tail's replay does. A position older than what is left starts at the
    /// oldest record.
    pub fn read_from(&self, position: Position) -> Reader<F> {
        Reader::new(Arc::clone(&self.shared), Start::Position(position))
    }

    /// Reads the log from the first record stamped at or after `timestamp_ms`.
    pub fn read_from_time(&self, timestamp_ms: u64) -> Reader<F> {
        Reader::new(Arc::clone(&self.shared), Start::Time(timestamp_ms))
    }

    /// Like [`LogView::read_from`], but what it returns is not counted as replayed (a copy
    /// for another member, not a resume).
    pub fn copy_from(&self, position: Position) -> Reader<F> {
        Reader::new(Arc::clone(&self.shared), Start::Position(position)).uncounted()
    }

    /// Where [`LogView::read_from_time`] starts, as a position: the position of the first
    /// record stamped at or after `timestamp_ms` (found through the time index), or `None`
    /// when every record is older or the log is empty. [`LogView::read_from`] that position
    /// returns what `read_from_time(timestamp_ms)` does, so a time can be served as a resume
    /// position. A time before the oldest record gives the oldest record's position; several
    /// records stamped with the same millisecond give the first of them. Reads the records
    /// from the index checkpoint before that time up to the one found (about
    /// `index_interval_bytes` and one record), and does not count as a replay. Retention
    /// deleting the segment being looked at is retried on the segments left.
    pub fn position_at_time(&self, timestamp_ms: u64) -> Result<Option<Position>> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let reader = Reader::new(Arc::clone(&self.shared), Start::Time(timestamp_ms));
            match reader.uncounted().next() {
                None => return Ok(None),
                Some(Ok(record)) => return Ok(Some(record.position)),
                Some(Err(Error::Truncated { .. })) if attempts < 3 => continue,
                Some(Err(e)) => return Err(e),
            }
        }
    }

    /// Fsyncs what was appended so far; safe to call from any thread while appends
    /// continue. Under `Interval` this is what makes appends durable; under the other
    /// policies it has nothing to do. A failed fsync poisons the log for every handle: every
    /// later `sync` and append fails with [`Error::Failed`] and `durable_next` no longer
    /// moves, until the log is reopened (and recovered from what is really on disk).
    pub fn sync(&self) -> Result<Synced> {
        let shared = &self.shared;
        let _sync = shared.sync_lock.lock();
        let (file, path, next, durable) = {
            let state = shared.state.lock();
            if let Some(f) = &state.failure {
                return Err(Error::Failed(f.clone()));
            }
            (
                state.active_file.clone(),
                state.segments.last().map(|s| s.path.clone()),
                state.next,
                state.durable,
            )
        };
        let (Some(file), Some(path)) = (file.filter(|_| next != durable), path) else {
            return Ok(Synced {
                durable_next: durable,
                took: None,
            });
        };
        let started = Instant::now();
        if let Err(e) = file.sync_data() {
            return Err(shared.poison(FailedOp::Fsync, &path, &e));
        }
        let took = started.elapsed();
        shared.stats.fsync(took);
        let mut state = shared.state.lock();
        let advanced = match (state.durable, next) {
            (Some(d), Some(n)) => key(n) > key(d),
            (None, Some(_)) => true,
            _ => false,
        };
        if advanced {
            state.durable = next;
        }
        Ok(Synced {
            durable_next: state.durable,
            took: Some(took),
        })
    }

    /// One past the last durable record: every record before it satisfies the fsync policy.
    pub fn durable_next(&self) -> Option<Position> {
        self.shared.state.lock().durable
    }

    /// One past the last record appended.
    pub fn next_position(&self) -> Option<Position> {
        self.shared.state.lock().next
    }

    /// The oldest record's position (`None` while the log is empty).
    pub fn first_position(&self) -> Option<Position> {
        self.shared.state.lock().segments.first().map(|s| s.base)
    }

    /// Why the log is poisoned (`None`: it is not): the first failed fsync, directory fsync
    /// or rollback. A poisoned log takes no append and completes no durability until it is
    /// reopened.
    pub fn failure(&self) -> Option<Failure> {
        self.shared.failure()
    }

    /// Bytes that can still be written on the log's volume.
    pub fn available_bytes(&self) -> Result<u64> {
        self.shared
            .fs
            .available_bytes(&self.shared.dir)
            .map_err(io_err(&self.shared.dir))
    }

    /// The log's directory.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The log's configuration.
    pub fn config(&self) -> &LogConfig {
        &self.shared.config
    }

    /// The counters and current figures.
    pub fn stats(&self) -> LogStats {
        let mut stats = self.shared.stats.snapshot();
        let state = self.shared.state.lock();
        stats.segments = state.segments.len() as u64;
        for s in &state.segments {
            stats.bytes_retained += s.len.load(Ordering::Acquire);
            stats.records_retained += s.records.load(Ordering::Relaxed);
        }
        stats
    }
}

/// What the retention rule sees of `segments` (oldest first).
fn summaries(segments: &[Arc<Segment>]) -> Vec<SegmentSummary> {
    segments
        .iter()
        .map(|s| SegmentSummary {
            bytes: s.len.load(Ordering::Acquire),
            last_ms: s.last_ms.load(Ordering::Relaxed),
        })
        .collect()
}
