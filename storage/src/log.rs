//! The log: one directory of segments that a single writer appends to and any number of
//! readers read, with its configuration, fsync policy, recovery on open and retention.
//!
//! [`Log`] is the writer (one per directory; appends take `&mut self`). [`LogView`] is a
//! cheap, cloneable, thread-safe handle for everything else: readers, `sync`, stats. Both
//! share the segment list; the writer publishes a record (segment length, index checkpoint,
//! next position) only after its bytes are written, so readers never see part of a record.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;
use starling_proto::Position;

use crate::error::{Error, Result, io_err};
use crate::index::{self, IndexEntry, SparseIndex};
use crate::record::{self, OVERHEAD, key};
use crate::recovery::{self, RecoveryReport};
use crate::retention::{self, RetentionPolicy, RetentionReport, SegmentSummary};
use crate::segment::{self, INDEX_EXT, LOG_EXT};
use crate::stats::{Counters, LogStats};

/// When appended records are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before `append` returns: an appended record is durable.
    Always,
    /// When [`LogView::sync`] runs, which the caller (or a [`crate::Flusher`]) does every
    /// interval; [`LogView::durable_next`] says how far the log is durable. Sealed segments
    /// are fsynced when the log rolls past them.
    Interval(Duration),
    /// Never: records are in the OS page cache when `append` returns; they survive a crash of
    /// the process but not of the machine.
    Never,
}

/// A log's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment is rolled before a record would take it past this many bytes (a record
    /// larger than this gets a segment of its own).
    pub segment_bytes: u64,
    /// An index checkpoint is added once this many segment bytes lie since the last one.
    pub index_interval_bytes: u64,
    /// The largest payload appended or read; a declared length beyond it is refused before
    /// anything is allocated.
    pub max_record_bytes: u32,
    /// When records are fsynced.
    pub fsync: FsyncPolicy,
    /// What [`Log::enforce_retention`] deletes.
    pub retention: RetentionPolicy,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 64 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_record_bytes: 16 * 1024 * 1024,
            fsync: FsyncPolicy::Always,
            retention: RetentionPolicy::default(),
        }
    }
}

impl LogConfig {
    fn validate(&self) -> Result<()> {
        if self.segment_bytes == 0 {
            return Err(Error::Config("segment_bytes must be positive"));
        }
        if self.index_interval_bytes == 0 {
            return Err(Error::Config("index_interval_bytes must be positive"));
        }
        if self.max_record_bytes == 0 {
            return Err(Error::Config("max_record_bytes must be positive"));
        }
        if matches!(self.fsync, FsyncPolicy::Interval(d) if d.is_zero()) {
            return Err(Error::Config("the fsync interval must be positive"));
        }
        Ok(())
    }
}

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

/// One segment as the writer and readers share it.
#[derive(Debug)]
pub(crate) struct Segment {
    pub base: Position,
    pub path: PathBuf,
    pub index_path: PathBuf,
    /// Bytes of whole records published to readers.
    pub len: AtomicU64,
    pub records: AtomicU64,
    /// Set once the writer rolled past it (after its last `len` store).
    pub sealed: AtomicBool,
    /// Set when retention deleted it.
    pub deleted: AtomicBool,
    pub last_ms: AtomicU64,
    pub index: Mutex<SparseIndex>,
}

/// What the writer publishes.
#[derive(Debug, Default)]
pub(crate) struct State {
    /// Oldest first; the last is the active one.
    pub segments: Vec<Arc<Segment>>,
    /// One past the last record.
    pub next: Option<Position>,
    /// One past the last durable record.
    pub durable: Option<Position>,
    /// The active segment's file, for `sync` from other threads.
    pub active_file: Option<Arc<File>>,
    /// A segment file was created and the directory not fsynced since.
    pub dir_dirty: bool,
    /// Why a [`LogView::sync`] failed, once one has: after a failed fsync the page cache's
    /// state is unknown (the kernel may have dropped the dirty pages and a later fsync
    /// succeed without them), so the log takes no more appends and reports no more
    /// durability until it is reopened and recovered.
    pub sync_failed: Option<String>,
}

/// What the writer, the views and the readers share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub dir: PathBuf,
    pub config: LogConfig,
    pub state: Mutex<State>,
    pub stats: Counters,
}

/// The writer's hold on the active segment.
#[derive(Debug)]
struct Active {
    seg: Arc<Segment>,
    file: Arc<File>,
    /// `None` after an index write failed: the index is rebuilt at the next open.
    index_file: Option<File>,
    len: u64,
    records: u64,
}

/// The writer of a log directory.
#[derive(Debug)]
pub struct Log {
    shared: Arc<Shared>,
    active: Option<Active>,
    next: Option<Position>,
    last_ms: u64,
    buf: Vec<u8>,
    failed: Option<String>,
}

/// A cloneable, thread-safe handle on a log for reading, syncing and stats.
#[derive(Debug, Clone)]
pub struct LogView {
    pub(crate) shared: Arc<Shared>,
}

/// Unix milliseconds now.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

impl Log {
    /// Opens (creating it if needed) the log in `dir` and recovers it: each segment is
    /// scanned from its last index checkpoint, a torn or corrupt tail is truncated, missing or
    /// damaged indexes are rebuilt, empty segments are removed. Appends continue one past the
    /// last valid record.
    pub fn open(dir: impl AsRef<Path>, config: LogConfig) -> Result<(Log, RecoveryReport)> {
        config.validate()?;
        let dir = dir.as_ref().to_path_buf();
        fs::create_dir_all(&dir).map_err(io_err(&dir))?;
        let mut bases = Vec::new();
        for entry in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let entry = entry.map_err(io_err(&dir))?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Some(base) = segment::parse_name(name) {
                bases.push(base);
            } else if name.ends_with(".idx.tmp") {
                let _ = fs::remove_file(entry.path());
            }
        }
        bases.sort_by_key(|b| key(*b));

        let mut report = RecoveryReport::default();
        let mut segments: Vec<Arc<Segment>> = Vec::new();
        let mut last: Option<(File, u64, u64)> = None;
        let mut next: Option<Position> = None;
        let mut last_ms = 0;
        for base in bases {
            let stem = segment::stem(base);
            let path = dir.join(format!("{stem}.{LOG_EXT}"));
            let index_path = dir.join(format!("{stem}.{INDEX_EXT}"));
            if next.is_some_and(|n| key(base) < key(n)) {
                return Err(Error::SegmentOrder { path });
            }
            let r =
                recovery::recover_segment(&path, &index_path, base, config.index_interval_bytes)?;
            report.records_scanned += r.scanned;
            if r.truncated > 0 {
                report.truncated_segments += 1;
                report.truncated_bytes += r.truncated;
            }
            if r.len == 0 {
                drop(r.file);
                fs::remove_file(&path).map_err(io_err(&path))?;
                let _ = fs::remove_file(&index_path);
                report.empty_segments_removed += 1;
                continue;
            }
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
            last = Some((r.file, r.len, r.records));
        }
        // Remove index files whose segment is gone.
        for entry in fs::read_dir(&dir).map_err(io_err(&dir))? {
            let entry = entry.map_err(io_err(&dir))?;
            let path = entry.path();
            if path.extension().is_some_and(|e| e == INDEX_EXT)
                && !path.with_extension(LOG_EXT).exists()
            {
                let _ = fs::remove_file(&path);
            }
        }
        report.next = next;

        let mut active = None;
        if let (Some(seg), Some((file, len, records))) = (segments.last(), last) {
            // What the previous process wrote may still be only in the page cache.
            file.sync_all().map_err(io_err(&seg.path))?;
            seg.sealed.store(false, Ordering::Release);
            let index_file = OpenOptions::new().append(true).open(&seg.index_path).ok();
            active = Some(Active {
                seg: Arc::clone(seg),
                file: Arc::new(file),
                index_file,
                len,
                records,
            });
        }
        let shared = Arc::new(Shared {
            dir,
            config,
            state: Mutex::new(State {
                segments,
                next,
                durable: next,
                active_file: active.as_ref().map(|a| Arc::clone(&a.file)),
                dir_dirty: false,
                sync_failed: None,
            }),
            stats: Counters::default(),
        });
        shared
            .stats
            .recovery_truncations
            .store(report.truncated_segments, Ordering::Relaxed);
        shared
            .stats
            .recovery_truncated_bytes
            .store(report.truncated_bytes, Ordering::Relaxed);
        let log = Log {
            shared,
            active,
            next,
            last_ms,
            buf: Vec::new(),
            failed: None,
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
    /// durable once [`LogView::durable_next`] passes it).
    pub fn append_at(
        &mut self,
        position: Position,
        events: u32,
        timestamp_ms: u64,
        payload: &[u8],
    ) -> Result<Appended> {
        if let Some(why) = &self.failed {
            return Err(Error::Failed(why.clone()));
        }
        if let Some(why) = self.shared.state.lock().sync_failed.clone() {
            self.failed = Some(why.clone());
            return Err(Error::Failed(why));
        }
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
            return Err(Error::Failed("no active segment".into()));
        };

        self.buf.clear();
        record::encode(position, events, ts, payload, &mut self.buf);
        let offset = active.len;
        if let Err(e) = active.file.write_all_at(&self.buf, offset) {
            // Take back a partial write; if that fails too the tail is unknown.
            if let Err(e2) = active.file.set_len(offset) {
                self.failed = Some(format!("write failed ({e}) and its rollback too ({e2})"));
            }
            return Err(io_err(&active.seg.path)(e));
        }
        let mut fsync = None;
        if self.shared.config.fsync == FsyncPolicy::Always {
            let started = Instant::now();
            if let Err(e) = active.file.sync_data() {
                // After a failed fsync the page cache's state is unknown: stop.
                self.failed = Some(format!("fsync failed: {e}"));
                return Err(io_err(&active.seg.path)(e));
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
            && let Some(f) = active.index_file.as_mut()
            && f.write_all(&e.encode()).is_err()
        {
            active.index_file = None;
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
    /// named `base`.
    fn roll(&mut self, base: Position) -> Result<()> {
        let policy = self.shared.config.fsync;
        if let Some(old) = &self.active
            && policy != FsyncPolicy::Never
        {
            let started = Instant::now();
            if let Err(e) = old.file.sync_data() {
                self.failed = Some(format!("fsync failed: {e}"));
                return Err(io_err(&old.seg.path)(e));
            }
            self.shared.stats.fsync(started.elapsed());
        }
        let dir = &self.shared.dir;
        let stem = segment::stem(base);
        let path = dir.join(format!("{stem}.{LOG_EXT}"));
        let index_path = dir.join(format!("{stem}.{INDEX_EXT}"));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err(&path))?;
        let index_file = fs::write(&index_path, index::file_header())
            .and_then(|()| OpenOptions::new().append(true).open(&index_path))
            .ok();
        if policy == FsyncPolicy::Always {
            sync_dir(dir)?;
        }
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
                self.shared.config.index_interval_bytes,
                Vec::new(),
            )),
        });
        let file = Arc::new(file);
        {
            let mut state = self.shared.state.lock();
            state.segments.push(Arc::clone(&seg));
            state.active_file = Some(Arc::clone(&file));
            if matches!(policy, FsyncPolicy::Interval(_)) {
                state.dir_dirty = true;
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
    pub fn view(&self) -> LogView {
        LogView {
            shared: Arc::clone(&self.shared),
        }
    }

    /// See [`LogView::sync`].
    pub fn sync(&self) -> Result<Synced> {
        self.view().sync()
    }

    /// See [`LogView::position_at_time`].
    pub fn position_at_time(&self, timestamp_ms: u64) -> Result<Option<Position>> {
        self.view().position_at_time(timestamp_ms)
    }

    /// See [`LogView::stats`].
    pub fn stats(&self) -> LogStats {
        self.view().stats()
    }

    /// Applies the configured retention at `now_ms`: deletes whole segments, oldest first,
    /// that are older than `max_age_ms` or beyond `max_bytes` — never the active segment. A
    /// reader on a deleted segment ends with [`Error::Truncated`].
    pub fn enforce_retention(&mut self, now_ms: u64) -> Result<RetentionReport> {
        let policy = self.shared.config.retention;
        let doomed: Vec<Arc<Segment>> = {
            let mut state = self.shared.state.lock();
            let summaries: Vec<SegmentSummary> = state
                .segments
                .iter()
                .map(|s| SegmentSummary {
                    bytes: s.len.load(Ordering::Acquire),
                    last_ms: s.last_ms.load(Ordering::Relaxed),
                })
                .collect();
            let (n, _) = retention::plan(&summaries, &policy, now_ms);
            let doomed: Vec<_> = state.segments.drain(..n).collect();
            for s in &doomed {
                s.deleted.store(true, Ordering::Release);
            }
            doomed
        };
        let summaries: Vec<SegmentSummary> = doomed
            .iter()
            .map(|s| SegmentSummary {
                bytes: s.len.load(Ordering::Acquire),
                last_ms: s.last_ms.load(Ordering::Relaxed),
            })
            .collect();
        let mut report = RetentionReport::default();
        for (s, summary) in doomed.iter().zip(&summaries) {
            if policy
                .max_age_ms
                .is_some_and(|age| now_ms.saturating_sub(summary.last_ms) > age)
            {
                report.by_age += 1;
            }
            report.segments += 1;
            report.bytes += summary.bytes;
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
        for s in &doomed {
            fs::remove_file(&s.path).map_err(io_err(&s.path))?;
            let _ = fs::remove_file(&s.index_path);
        }
        Ok(report)
    }
}

impl LogView {
    /// Fsyncs what was appended so far (and the directory, if a segment was created since
    /// the last sync); safe to call from any thread while appends continue. Under
    /// `Interval` this is what makes appends durable; under the other policies it has
    /// nothing to do. A failed fsync stops the log: every later `sync` and append fails with
    /// [`Error::Failed`] and `durable_next` no longer moves, until the log is reopened (and
    /// recovered from what is really on disk).
    pub fn sync(&self) -> Result<Synced> {
        let (file, next, durable, dir_dirty) = {
            let mut state = self.shared.state.lock();
            if let Some(why) = &state.sync_failed {
                return Err(Error::Failed(why.clone()));
            }
            let dir_dirty = std::mem::take(&mut state.dir_dirty);
            (
                state.active_file.clone(),
                state.next,
                state.durable,
                dir_dirty,
            )
        };
        let pending = next != durable || dir_dirty;
        let Some(file) = file.filter(|_| pending) else {
            return Ok(Synced {
                durable_next: durable,
                took: None,
            });
        };
        let started = Instant::now();
        let mut done = file.sync_data().map_err(io_err(&self.shared.dir));
        if done.is_ok() && dir_dirty {
            done = sync_dir(&self.shared.dir);
        }
        if let Err(e) = done {
            let mut state = self.shared.state.lock();
            state.dir_dirty |= dir_dirty;
            state.sync_failed = Some(format!("fsync failed: {e}"));
            return Err(e);
        }
        let took = started.elapsed();
        self.shared.stats.fsync(took);
        let mut state = self.shared.state.lock();
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
