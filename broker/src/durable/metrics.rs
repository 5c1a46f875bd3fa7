//! The storage series of durable topics, registered in the broker's registry. Their names
//! are in `starling_config::metric_names`.

use prometheus::{Histogram, HistogramOpts, IntCounter, IntGauge, Registry};
use starling_config::metric_names as names;

/// Handles on the storage series (cheap to clone; every topic's log shares them).
#[derive(Debug, Clone)]
pub struct StorageMetrics {
    /// Record bytes appended to durable logs (headers and trailers included).
    pub appended_bytes: IntCounter,
    /// Records (sealed batches) appended.
    pub appended_records: IntCounter,
    /// Time of each fsync of a durable log.
    pub fsync_seconds: Histogram,
    /// Segment files of open durable logs.
    pub segments: IntGauge,
    /// Record bytes the open durable logs hold on disk.
    pub retained_bytes: IntGauge,
    /// Segments whose torn or corrupt tail recovery truncated.
    pub recovery_truncations: IntCounter,
    /// Records read back from disk for resuming subscribers.
    pub replayed_records: IntCounter,
    /// Segments retention deleted.
    pub retention_deleted_segments: IntCounter,
    /// Failed opens, appends and fsyncs (the publishes concerned got an error frame).
    pub errors: IntCounter,
    /// Records copied from another member's log after an owner change.
    pub handoff_copied_records: IntCounter,
    /// Records served to another member taking over a topic.
    pub handoff_served_records: IntCounter,
    /// Segments recovery quarantined (renamed aside) for damage.
    pub recovery_quarantined: IntCounter,
    /// Open logs poisoned by a failed fsync.
    pub failed_logs: IntGauge,
    /// Open logs whose last append failed for lack of space.
    pub disk_full_logs: IntGauge,
    /// Free bytes on the storage volume (as last measured).
    pub volume_free_bytes: IntGauge,
}

impl StorageMetrics {
    /// Creates the series and registers them in `r`.
    pub fn register(r: &Registry) -> prometheus::Result<StorageMetrics> {
        let counter = |name: &str, help: &str| -> prometheus::Result<IntCounter> {
            let c = IntCounter::new(name, help)?;
            r.register(Box::new(c.clone()))?;
            Ok(c)
        };
        let gauge = |name: &str, help: &str| -> prometheus::Result<IntGauge> {
            let g = IntGauge::new(name, help)?;
            r.register(Box::new(g.clone()))?;
            Ok(g)
        };
        let fsync_seconds = Histogram::with_opts(
            HistogramOpts::new(
                names::STORAGE_FSYNC_SECONDS,
                "Time of each durable log fsync.",
            )
            .buckets(prometheus::exponential_buckets(50e-6, 2.0, 16)?),
        )?;
        r.register(Box::new(fsync_seconds.clone()))?;
        Ok(StorageMetrics {
            appended_bytes: counter(
                names::STORAGE_APPENDED_BYTES,
                "Record bytes appended to durable topic logs.",
            )?,
            appended_records: counter(
                names::STORAGE_APPENDED_RECORDS,
                "Records (sealed batches) appended to durable topic logs.",
            )?,
            fsync_seconds,
            segments: gauge(
                names::STORAGE_SEGMENTS,
                "Segment files of open durable logs.",
            )?,
            retained_bytes: gauge(
                names::STORAGE_RETAINED_BYTES,
                "Record bytes the open durable logs hold on disk.",
            )?,
            recovery_truncations: counter(
                names::STORAGE_RECOVERY_TRUNCATIONS,
                "Segments whose torn or corrupt tail was truncated when a log was opened.",
            )?,
            replayed_records: counter(
                names::STORAGE_REPLAYED_RECORDS,
                "Records read back from disk for resuming subscribers.",
            )?,
            retention_deleted_segments: counter(
                names::STORAGE_RETENTION_DELETED_SEGMENTS,
                "Durable log segments deleted by retention.",
            )?,
            errors: counter(
                names::STORAGE_ERRORS,
                "Failed durable log opens, appends and fsyncs.",
            )?,
            handoff_copied_records: counter(
                names::STORAGE_HANDOFF_COPIED_RECORDS,
                "Records copied from another member's log of a topic after an owner change.",
            )?,
            handoff_served_records: counter(
                names::STORAGE_HANDOFF_SERVED_RECORDS,
                "Records served to another member taking over a durable topic.",
            )?,
            recovery_quarantined: counter(
                names::STORAGE_RECOVERY_QUARANTINED,
                "Durable log segments set aside (renamed, not cut) for damage found when a log was opened.",
            )?,
            failed_logs: gauge(
                names::STORAGE_FAILED_LOGS,
                "Open durable logs stopped by a failed fsync (no append, no persisted ack until reopened).",
            )?,
            disk_full_logs: gauge(
                names::STORAGE_DISK_FULL_LOGS,
                "Open durable logs whose last append failed for lack of space.",
            )?,
            volume_free_bytes: gauge(
                names::STORAGE_VOLUME_FREE_BYTES,
                "Bytes still free for the broker on the volume holding storage_dir.",
            )?,
        })
    }
}
