//! [`DurableLog`]: one durable topic's log as its topic task uses it: append a sealed batch,
//! hand `persisted` acks to the [`Committer`], read back from a position (or find the position
//! of a time) for a resuming subscriber, apply retention, and keep the storage gauges current.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use starling_config::StorageFsync;
use starling_proto::Position;
use starling_storage::{Appended, FsyncPolicy, Log, LogConfig, LogStats, LogView, Record, now_ms};

use super::commit::{Committer, Waiter};
use super::metrics::StorageMetrics;

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
pub struct DurableLog<W: Waiter> {
    topic: String,
    dir: PathBuf,
    // Declared before `log`: dropped (last sync, thread joined) while the log is still open.
    committer: Committer<W>,
    log: Log,
    metrics: StorageMetrics,
    shown: LogStats,
    last_retention: Instant,
}

impl<W: Waiter + std::fmt::Debug> DurableLog<W> {
    /// Opens and recovers the log in `dir`; blocking file I/O.
    pub fn open(
        topic: &str,
        dir: &Path,
        config: LogConfig,
        mode: StorageFsync,
        metrics: StorageMetrics,
    ) -> Result<DurableLog<W>, DurableError> {
        let storage = |source| DurableError::Storage {
            topic: topic.to_string(),
            dir: dir.to_path_buf(),
            source,
        };
        let (log, report) = Log::open(dir, config).map_err(storage)?;
        metrics
            .recovery_truncations
            .inc_by(report.truncated_segments);
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
            shown: LogStats::default(),
            last_retention: Instant::now(),
        };
        durable.show_stats();
        Ok(durable)
    }

    /// One past the last record: where the topic's numbering continues.
    pub fn next_position(&self) -> Option<Position> {
        self.log.next_position()
    }

    /// Appends one sealed batch (`frame`: its encoded EventBatch) of `events` events at
    /// `position`, stamped now; returns where the stream continues and the record's
    /// timestamp. Under `always` this wakes the group commit; it never waits for an fsync.
    pub fn append(
        &mut self,
        position: Position,
        events: u32,
        frame: &[u8],
    ) -> Result<Appended, DurableError> {
        let written = self.log.append(position, events, frame);
        let appended = self.count_append(written, frame.len())?;
        if self.last_retention.elapsed() >= RETENTION_EVERY {
            self.last_retention = Instant::now();
            match self.log.enforce_retention(now_ms()) {
                Ok(r) => self.metrics.retention_deleted_segments.inc_by(r.segments),
                Err(e) => {
                    self.metrics.errors.inc();
                    tracing::warn!(topic = %self.topic, error = %e, "durable log retention failed");
                }
            }
        }
        self.show_stats();
        Ok(appended)
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
    pub fn view(&self) -> LogView {
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

impl<W: Waiter> Drop for DurableLog<W> {
    fn drop(&mut self) {
        self.metrics.segments.sub(self.shown.segments as i64);
        self.metrics
            .retained_bytes
            .sub(self.shown.bytes_retained as i64);
    }
}
