//! The log's counters and figures, for the broker to export as metrics: [`LogStats`] is a
//! snapshot; the live counters are atomics shared by the writer, the readers and the
//! flusher.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// A snapshot of a log's counters (totals since open) and figures (now).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LogStats {
    /// Record bytes appended (headers and trailers included).
    pub bytes_appended: u64,
    /// Records appended.
    pub records_appended: u64,
    /// fsyncs of segment data done.
    pub fsyncs: u64,
    /// Time spent in them.
    pub fsync_total: Duration,
    /// The longest one.
    pub fsync_max: Duration,
    /// Segments now on disk.
    pub segments: u64,
    /// Record bytes now on disk.
    pub bytes_retained: u64,
    /// Records now on disk.
    pub records_retained: u64,
    /// Segments whose tail recovery truncated when the log was opened.
    pub recovery_truncations: u64,
    /// Bytes recovery truncated.
    pub recovery_truncated_bytes: u64,
    /// Segments recovery quarantined (renamed aside) when the log was opened.
    pub recovery_quarantined: u64,
    /// Records returned by readers.
    pub records_replayed: u64,
    /// Segments retention deleted.
    pub segments_deleted: u64,
    /// Bytes retention deleted.
    pub bytes_deleted: u64,
    /// Records retention deleted.
    pub records_deleted: u64,
}

/// The live counters.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub bytes_appended: AtomicU64,
    pub records_appended: AtomicU64,
    pub fsyncs: AtomicU64,
    pub fsync_nanos: AtomicU64,
    pub fsync_max_nanos: AtomicU64,
    pub recovery_truncations: AtomicU64,
    pub recovery_truncated_bytes: AtomicU64,
    pub recovery_quarantined: AtomicU64,
    pub records_replayed: AtomicU64,
    pub segments_deleted: AtomicU64,
    pub bytes_deleted: AtomicU64,
    pub records_deleted: AtomicU64,
}

impl Counters {
    /// Counts one fsync that took `took`.
    pub fn fsync(&self, took: Duration) {
        let nanos = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
        self.fsyncs.fetch_add(1, Ordering::Relaxed);
        self.fsync_nanos.fetch_add(nanos, Ordering::Relaxed);
        self.fsync_max_nanos.fetch_max(nanos, Ordering::Relaxed);
    }

    /// The counters' part of a snapshot (the figures are filled in by the log).
    pub fn snapshot(&self) -> LogStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        LogStats {
            bytes_appended: get(&self.bytes_appended),
            records_appended: get(&self.records_appended),
            fsyncs: get(&self.fsyncs),
            fsync_total: Duration::from_nanos(get(&self.fsync_nanos)),
            fsync_max: Duration::from_nanos(get(&self.fsync_max_nanos)),
            recovery_truncations: get(&self.recovery_truncations),
            recovery_truncated_bytes: get(&self.recovery_truncated_bytes),
            recovery_quarantined: get(&self.recovery_quarantined),
            records_replayed: get(&self.records_replayed),
            segments_deleted: get(&self.segments_deleted),
            bytes_deleted: get(&self.bytes_deleted),
            records_deleted: get(&self.records_deleted),
            ..LogStats::default()
        }
    }
}
