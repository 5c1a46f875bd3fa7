//! [`DurableLog`]: one durable topic's log as its topic task uses it: append a sealed batch,
//! hand `persisted` acks to the [`Committer`], read back from a position (or find the position
//! of a time) for a resuming subscriber, apply retention, and keep the storage gauges current.
//!
//! A full volume refuses the batch being appended (typed, counted, the log stays usable) and
//! runs retention at once, retrying the batch if that freed space; the next batch tries again,
//! so appends resume by themselves when space returns. A failed fsync poisons the log
//! (`starling_storage::Error::Failed`): every later append is refused and no `persisted` ack
//! completes until the log is reopened; [`DurableLog::failure`] says why.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_config::StorageFsync;
use starling_proto::Position;
use starling_storage::{
    Appended, Failure, Fs, FsyncPolicy, Log, LogConfig, LogStats, LogView, RealFs, Record,
    RetentionSource, now_ms,
};

use super::commit::{Committer, Waiter};
use super::metrics::StorageMetrics;
use super::volume::Volume;

/// How often retention runs on a log that is being appended to.
const RETENTION_EVERY: Duration = Duration::from_secs(1);

/// Why a durable log could not be opened or appended to.
#[derive(Debug, thiserror::Error)]
pub enum DurableError {
    /// `durable_topics` is set without `storage_dir`.
    #[error("durable topics need storage_dir")]
    NoStorageDir,
    /// The storage layer failed.
    #[error("durable log of `{topic}` in {dir}: {source}")]
    Storage {
        /// The topic.
        topic: String,
        /// Its log directory.
        dir: PathBuf,
        /// What failed.
        #[source]
        source: starling_storage::Error,
    },
    /// The sync thread could not be started.
    #[error("durable log of `{topic}`: cannot start its sync thread: {source}")]
    Thread {
        /// The topic.
        topic: String,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}

/// One open durable topic log; dropping it stops its sync thread after a last sync.
#[derive(Debug)]
pub struct DurableLog<W: Waiter, F: Fs = RealFs> {
    topic: String,
    dir: PathBuf,
    // Declared before `log`: dropped (last sync, thread joined) while the log is still open.
    committer: Committer<W, F>,
    log: Log<F>,
    metrics: StorageMetrics,
    /// The volume's program state (`GET /storage`), beside the gauges.
    volume: Arc<Volume>,
    shown: LogStats,
    last_retention: Instant,
    /// Whether this log counts in `disk_full_logs` (its last append failed for space).
    full: bool,
    /// Where each retention run reads the topic's retention in force (`None`: the one the
    /// log was opened with).
    live_retention: Option<Arc<dyn RetentionSource>>,
}

impl<W: Waiter + std::fmt::Debug> DurableLog<W> {
    /// Opens and recovers the log in `dir` on the real file system; blocking file I/O.
    pub fn open(
        topic: &str,
        dir: &Path,
        config: LogConfig,
        mode: StorageFsync,
        metrics: StorageMetrics,
        volume: Arc<Volume>,
    ) -> Result<DurableLog<W>, DurableError> {
        DurableLog::open_in(RealFs, topic, dir, config, mode, metrics, volume)
    }
}

impl<W: Waiter + std::fmt::Debug, F: Fs> DurableLog<W, F> {
    /// Opens and recovers the log in `dir` through `fs`; blocking file I/O.
    pub fn open_in(
        fs: F,
        topic: &str,
        dir: &Path,
        config: LogConfig,
        mode: StorageFsync,
        metrics: StorageMetrics,
        volume: Arc<Volume>,
    ) -> Result<DurableLog<W, F>, DurableError> {
        let storage = |source| DurableError::Storage {
            topic: topic.to_string(),
            dir: dir.to_path_buf(),
            source,
        };
        let (log, report) = Log::open_in(fs, dir, config).map_err(storage)?;
        metrics
            .recovery_truncations
            .inc_by(report.truncated_segments);
        metrics
            .recovery_quarantined
            .inc_by(report.quarantined.len() as u64);
        for aside in &report.quarantined {
            tracing::error!(
                topic,
                dir = %dir.display(),
                quarantined = %aside.display(),
                "durable log recovery found damage in a segment that may hold fsynced records: \
                 set it aside whole (nothing cut) and kept its valid prefix; the records after \
                 the damage are only in the quarantined file"
            );
        }
        if report.truncated_segments > 0 {
            tracing::warn!(
                topic,
                dir = %dir.display(),
                segments = report.truncated_segments,
                bytes = report.truncated_bytes,
                "durable log recovery truncated a torn or corrupt tail"
            );
        }
        tracing::info!(
            topic,
            dir = %dir.display(),
            segments = report.segments,
            records = report.records,
            next = ?report.next,
            "durable log opened"
        );
        let every = match config.fsync {
            FsyncPolicy::Interval(d) => d,
            _ => Duration::from_millis(100),
        };
        let committer = Committer::start(topic, log.view(), mode, every, metrics.clone()).map_err(
            |source| DurableError::Thread {
                topic: topic.to_string(),
                source,
            },
        )?;
        let mut durable = DurableLog {
            topic: topic.to_string(),
            dir: dir.to_path_buf(),
            committer,
            log,
            metrics,
            volume,
            shown: LogStats::default(),
            last_retention: Instant::now(),
            full: false,
            live_retention: None,
        };
        durable.show_free_space();
        durable.show_stats();
        Ok(durable)
    }

    /// Makes each retention run apply the retention `source` gives then
    /// ([`super::policy::Policies::live_retention`]), so a changed topics document reaches
    /// an open log.
    pub fn with_live_retention(mut self, source: Arc<dyn RetentionSource>) -> Self {
        self.live_retention = Some(source);
        self
    }

    /// One past the last record recovered or appended. After opening a log, the topic
    /// numbers in a new stream above it: a crash may have cut records past it that
    /// subscribers already saw, so their positions are never given out again.
    pub fn next_position(&self) -> Option<Position> {
        self.log.next_position()
    }

    /// Why the log is stopped (a failed fsync), if it is: it takes no append and completes no
    /// `persisted` ack until the topic reopens it.
    pub fn failure(&self) -> Option<Failure> {
        self.log.failure()
    }

    /// Whether the last append failed for lack of space on the volume.
    pub fn disk_full(&self) -> bool {
        self.full
    }

    /// Appends one sealed batch (`frame`: its encoded EventBatch) of `events` events at
    /// `position`, stamped now; returns where the stream continues and the record's
    /// timestamp. Under `always` this wakes the group commit; it never waits for an fsync.
    /// On a full volume, retention runs at once and the batch is tried again if it freed
    /// something; a batch still refused leaves the log usable for the next one.
    pub fn append(
        &mut self,
        position: Position,
        events: u32,
        frame: &[u8],
    ) -> Result<Appended, DurableError> {
        let mut written = self.log.append(position, events, frame);
        if matches!(&written, Err(e) if e.is_no_space()) {
            if self.retain() > 0 {
                written = self.log.append(position, events, frame);
            }
        } else if self.last_retention.elapsed() >= RETENTION_EVERY {
            self.retain();
        }
        self.set_full(matches!(&written, Err(e) if e.is_no_space()));
        let appended = self.count_append(written, frame.len());
        self.show_stats();
        appended
    }

    /// Applies retention now (and measures the volume's free space); the segments deleted.
    fn retain(&mut self) -> u64 {
        self.last_retention = Instant::now();
        let run = match &self.live_retention {
            Some(source) => {
                let policy = source.retention_now();
                self.log.enforce_retention_under(policy, now_ms())
            }
            None => self.log.enforce_retention(now_ms()),
        };
        let deleted = match run {
            Ok(r) => {
                self.metrics.retention_deleted_segments.inc_by(r.segments);
                r.segments
            }
            Err(e) => {
                self.metrics.errors.inc();
                tracing::warn!(topic = %self.topic, error = %e, "durable log retention failed");
                0
            }
        };
        self.show_free_space();
        deleted
    }

    fn set_full(&mut self, full: bool) {
        if full != self.full {
            self.full = full;
            self.volume.log_full(full);
            if full {
                self.metrics.disk_full_logs.inc();
                tracing::error!(topic = %self.topic, dir = %self.dir.display(), "durable log: the volume is full; publishes are refused until space returns");
            } else {
                self.metrics.disk_full_logs.dec();
                tracing::info!(topic = %self.topic, "durable log: space returned; appends resumed");
            }
        }
    }

    fn show_free_space(&self) {
        if let Ok(free) = self.log.view().available_bytes() {
            self.metrics
                .volume_free_bytes
                .set(i64::try_from(free).unwrap_or(i64::MAX));
        }
    }

    /// Appends a record copied from another member's log of the topic, with its original
    /// position and time (see [`super::transfer`]). Synced like any append.
    pub fn append_copied(&mut self, rec: &Record) -> Result<Appended, DurableError> {
        let written = self
            .log
            .append_at(rec.position, rec.events, rec.timestamp_ms, &rec.payload);
        let appended = self.count_append(written, rec.payload.len())?;
        self.metrics.handoff_copied_records.inc();
        self.show_stats();
        Ok(appended)
    }

    /// What every append does after the write: a failure counted and typed, a success
    /// handed to the group commit and counted (`payload_len` bytes plus the record's own).
    fn count_append(
        &mut self,
        written: starling_storage::Result<Appended>,
        payload_len: usize,
    ) -> Result<Appended, DurableError> {
        let appended = written.map_err(|source| {
            self.metrics.errors.inc();
            if matches!(source, starling_storage::Error::Failed(_)) {
                self.committer.poisoned();
            }
            DurableError::Storage {
                topic: self.topic.clone(),
                dir: self.dir.clone(),
                source,
            }
        })?;
        self.committer.appended();
        self.metrics.appended_records.inc();
        self.metrics
            .appended_bytes
            .inc_by(payload_len as u64 + starling_storage::record::OVERHEAD);
        Ok(appended)
    }

    /// The largest record payload the log takes.
    pub fn max_record_bytes(&self) -> u32 {
        self.log.view().config().max_record_bytes
    }

    /// Completes `acks` once the batch ending before `next` is durable.
    pub fn wait_durable(&self, next: Position, acks: Vec<W>) {
        self.committer.wait(next, acks);
    }

    /// A handle for reading the log from another thread.
    pub fn view(&self) -> LogView<F> {
        self.log.view()
    }

    /// Moves the segment and byte gauges by what changed since last shown.
    fn show_stats(&mut self) {
        let now = self.log.stats();
        let delta = |new: u64, old: u64| new as i64 - old as i64;
        self.metrics
            .segments
            .add(delta(now.segments, self.shown.segments));
        self.metrics
            .retained_bytes
            .add(delta(now.bytes_retained, self.shown.bytes_retained));
        self.shown = now;
    }
}

impl<W: Waiter, F: Fs> Drop for DurableLog<W, F> {
    fn drop(&mut self) {
        if self.full {
            self.metrics.disk_full_logs.dec();
            self.volume.log_full(false);
        }
        self.metrics.segments.sub(self.shown.segments as i64);
        self.metrics
            .retained_bytes
            .sub(self.shown.bytes_retained as i64);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use starling_proto::ErrorCode;
    use starling_storage::RetentionPolicy;
    use starling_storage::fault::FaultFs;

    use super::*;

    /// Counts completed and refused acks.
    #[derive(Debug)]
    struct Ack(Arc<AtomicUsize>, Arc<AtomicUsize>);

    impl Waiter for Ack {
        fn durable(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
        fn failed(self, _: ErrorCode, _: String) {
            self.1.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn open(fs: &FaultFs, max_bytes: Option<u64>) -> (DurableLog<Ack, FaultFs>, StorageMetrics) {
        open_on(fs, max_bytes, Arc::new(Volume::new(None)))
    }

    fn open_on(
        fs: &FaultFs,
        max_bytes: Option<u64>,
        volume: Arc<Volume>,
    ) -> (DurableLog<Ack, FaultFs>, StorageMetrics) {
        let metrics = StorageMetrics::register(&prometheus::Registry::new()).unwrap();
        let config = LogConfig {
            segment_bytes: 450,
            index_interval_bytes: 4096,
            fsync: FsyncPolicy::Interval(Duration::from_millis(5)),
            retention: RetentionPolicy {
                max_bytes,
                max_age_ms: None,
            },
            ..LogConfig::default()
        };
        let log = DurableLog::open_in(
            fs.clone(),
            "t",
            Path::new("/data/t"),
            config,
            StorageFsync::Always,
            metrics.clone(),
            volume,
        )
        .unwrap();
        (log, metrics)
    }

    fn at(seq: u64) -> Position {
        Position { stream: 7, seq }
    }

    fn used(fs: &FaultFs) -> u64 {
        fs.files()
            .iter()
            .filter_map(|p| fs.contents(p))
            .map(|c| c.len() as u64)
            .sum()
    }

    fn eventually(what: &str, f: impl Fn() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !f() {
            assert!(Instant::now() < deadline, "timed out: {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_full_volume_refuses_the_batch_and_appends_resume_when_space_returns() {
        let fs = FaultFs::new();
        let volume = Arc::new(Volume::new(None));
        let (mut log, metrics) = open_on(&fs, None, Arc::clone(&volume));
        for i in 0..6 {
            log.append(at(i), 1, &[1; 56]).unwrap();
        }
        fs.set_capacity(Some(used(&fs) + 10));
        let e = log.append(at(6), 1, &[1; 56]).unwrap_err();
        assert!(
            matches!(&e, DurableError::Storage { source, .. } if source.is_no_space()),
            "{e}"
        );
        assert!(log.disk_full());
        assert_eq!(metrics.disk_full_logs.get(), 1);
        // What `GET /storage` (and so the operator's `DiskFull` condition) reads.
        assert!(volume.report().full && volume.report().full_logs == 1);
        assert!(metrics.volume_free_bytes.get() <= 10);
        assert!(
            log.failure().is_none(),
            "a full volume does not stop the log"
        );
        // Still full: refused again, the log still usable.
        assert!(log.append(at(6), 1, &[1; 56]).is_err());
        fs.set_capacity(None);
        log.append(at(6), 1, &[1; 56]).unwrap();
        assert!(!log.disk_full());
        assert_eq!(metrics.disk_full_logs.get(), 0);
        assert!(!volume.report().full && volume.report().full_logs == 0);
        let read: Vec<_> = log
            .view()
            .read_from(at(0))
            .map(|r| r.unwrap().position)
            .collect();
        assert_eq!(read, (0..7).map(at).collect::<Vec<_>>());
    }

    #[test]
    fn a_retention_changed_while_the_log_is_open_applies_at_its_next_run() {
        use starling_config::topics::{CompiledTopics, TopicPolicy, TopicsDocument};

        use crate::durable::policy::Policies;
        let fs = FaultFs::new();
        let cfg = starling_config::Profile::Balanced.config();
        let policies = Policies::new(&cfg, CompiledTopics::empty());
        let (log, metrics) = open(&fs, None);
        let mut log = log.with_live_retention(policies.live_retention("t"));
        for i in 0..8 {
            log.append(at(i), 1, &[1; 56]).unwrap(); // two segments of four records
        }
        assert_eq!(log.retain(), 0, "no limit in force");
        let mut p = TopicPolicy::new("t", "t");
        p.retention_max_bytes = Some(450);
        policies.install(CompiledTopics::new(TopicsDocument::new(vec![p])));
        assert_eq!(log.retain(), 1, "the new limit deletes the oldest segment");
        assert_eq!(metrics.retention_deleted_segments.get(), 1);
    }

    #[test]
    fn on_a_full_volume_retention_runs_at_once_and_the_batch_goes_through() {
        let fs = FaultFs::new();
        let (mut log, metrics) = open(&fs, Some(450));
        for i in 0..8 {
            log.append(at(i), 1, &[1; 56]).unwrap(); // two segments of four records
        }
        fs.set_capacity(Some(used(&fs)));
        // The ninth rolls into a new segment and finds no space; retention deletes the
        // oldest segment and the batch is taken.
        log.append(at(8), 1, &[1; 56]).unwrap();
        assert_eq!(metrics.retention_deleted_segments.get(), 1);
        assert!(!log.disk_full());
        assert_eq!(log.view().first_position(), Some(at(4)));
    }

    #[test]
    fn a_failed_fsync_refuses_every_persisted_ack_from_then_on() {
        let fs = FaultFs::new();
        let (mut log, metrics) = open(&fs, None);
        let (ok, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let ack = || Ack(Arc::clone(&ok), Arc::clone(&refused));
        let a = log.append(at(0), 1, b"durable").unwrap();
        log.wait_durable(a.next, vec![ack()]);
        eventually("the first ack", || ok.load(Ordering::SeqCst) == 1);
        fs.fail_fsyncs(1);
        let a = log.append(at(1), 1, b"lost").unwrap();
        log.wait_durable(a.next, vec![ack()]);
        eventually("the log stopped", || log.failure().is_some());
        eventually("the waiting ack refused", || {
            refused.load(Ordering::SeqCst) == 1
        });
        assert_eq!(metrics.failed_logs.get(), 1);
        // Every later append is refused, and an ack handed over now is refused at once.
        assert!(log.append(at(2), 1, b"after").is_err());
        log.wait_durable(a.next, vec![ack()]);
        assert_eq!(refused.load(Ordering::SeqCst), 2);
        assert_eq!(ok.load(Ordering::SeqCst), 1);
        drop(log);
        assert_eq!(metrics.failed_logs.get(), 0);
    }

    #[test]
    fn a_failed_fsync_at_a_segment_roll_stops_the_log_and_its_acks() {
        let fs = FaultFs::new();
        let (mut log, metrics) = open(&fs, None);
        let (ok, refused) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let ack = || Ack(Arc::clone(&ok), Arc::clone(&refused));
        for i in 0..8 {
            // Two segments of four records.
            let a = log.append(at(i), 1, &[1; 56]).unwrap();
            log.wait_durable(a.next, vec![ack()]);
        }
        eventually("eight acks", || ok.load(Ordering::SeqCst) == 8);
        // The group commit is idle (nothing appended since its last fsync): the next fsync
        // is the writer's, sealing the second segment at the roll.
        fs.fail_fsyncs(1);
        let e = log.append(at(8), 1, &[1; 56]).unwrap_err();
        assert!(
            matches!(
                &e,
                DurableError::Storage {
                    source: starling_storage::Error::Failed(_),
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(metrics.failed_logs.get(), 1);
        // An ack handed over now is refused at once; appends stay refused.
        log.wait_durable(at(9), vec![ack()]);
        assert_eq!(refused.load(Ordering::SeqCst), 1);
        assert!(log.append(at(8), 1, &[1; 56]).is_err());
        assert_eq!(metrics.failed_logs.get(), 1, "counted once");
        assert_eq!(ok.load(Ordering::SeqCst), 8);
    }
}
