//! Durable topics: the broker side of `starling-storage`. A durable topic (one a policy of
//! the topics document matches, or `durable_topics` names: [`policy`]) gets one append-only
//! log under `storage_dir/<escaped topic name>/` ([`escape`]), opened
//! (and recovered: a torn tail is truncated, a damaged sealed segment quarantined, both
//! counted) when the topic's task starts. The task appends each sealed batch, numbered with
//! the topic's position, before it offers the batch to subscribers; after opening a log it
//! numbers in a new stream above the log's end, so the records' positions stay stable across
//! restarts and a position a crash took back is never given out again (see
//! `docs/durability.md`). `ack_level: persisted` acks wait in
//! [`DurableLog`] until the log is durable past their batch under `storage_fsync`: one
//! fsync for everything appended since the last (`always`, [`commit`]), the storage crate's
//! flusher (`interval`) or at once (`never`).
//!
//! - [`escape`]: topic name → directory name (injective, filesystem-safe).
//! - [`commit`]: the group-commit thread and the acks waiting for durability.
//! - [`log`](DurableLog): one topic's log, as the topic task uses it.
//! - [`metrics`](StorageMetrics): the storage series.
//! - [`policy`]: what applies to each topic (durable or not, replicas, fsync, retention, the
//!   largest message), from the topics document in force and the knobs.
//! - [`topics_file`]: reading the topics document at start and re-reading it while the broker
//!   runs.
//! - [`record`]: what a log record holds (a batch's headers frame, if any, and its batch).
//! - [`transfer`]: copying a topic's log to its new owner after an owner change.
//! - [`replicated`]: replicated durable topics (the replicas open here and their RPCs).
//! - [`volume`]: the storage volume as `GET /storage` reports it (free bytes, full logs).

pub mod commit;
pub mod escape;
mod log;
pub mod metrics;
pub mod policy;
pub mod record;
pub mod replicated;
pub mod topics_file;
pub mod transfer;
pub mod volume;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use starling_config::topics::CompiledTopics;
use starling_config::{AckLevel, BrokerConfig, StorageFsync};
use starling_storage::{FsyncPolicy, LogConfig};

pub use commit::Waiter;
pub use log::{DurableError, DurableLog};
pub use metrics::StorageMetrics;
pub use policy::{Policies, TopicDurability};
pub use volume::{Volume, VolumeReport};

/// The file in a log's directory holding the topic's whole name (the directory name may be
/// cut, see [`escape`]); the storage ignores files it does not know.
const NAME_FILE: &str = "topic.name";

/// Which topics are durable, where their logs live and how they are synced.
#[derive(Debug)]
pub struct Durability {
    policies: Arc<Policies>,
    dir: Option<PathBuf>,
    /// The knobs' log settings (fsync and retention are each topic's, [`policy`]).
    config: LogConfig,
    interval: Duration,
    ack_level: AckLevel,
    metrics: StorageMetrics,
    volume: Arc<Volume>,
}

/// The log's own fsync bookkeeping under a topic's `storage_fsync` mode.
fn fsync_policy(mode: StorageFsync, interval: Duration) -> FsyncPolicy {
    match mode {
        // Appends do not fsync: the group committer does, for everything appended since
        // its last fsync. The log's own `Interval` bookkeeping is what it relies on.
        StorageFsync::Always | StorageFsync::Interval => FsyncPolicy::Interval(interval),
        StorageFsync::Never => FsyncPolicy::Never,
    }
}

impl Durability {
    /// Reads the durability knobs of `cfg`, with no topics document.
    pub fn new(cfg: &BrokerConfig, metrics: StorageMetrics) -> Arc<Durability> {
        Durability::with_policies(cfg, metrics, Policies::new(cfg, CompiledTopics::empty()))
    }

    /// Reads the durability knobs of `cfg`; `policies` holds the topics document in force.
    pub fn with_policies(
        cfg: &BrokerConfig,
        metrics: StorageMetrics,
        policies: Arc<Policies>,
    ) -> Arc<Durability> {
        let interval = Duration::from_millis(cfg.storage_fsync_interval_ms.max(1));
        let config = LogConfig {
            fsync: fsync_policy(cfg.storage_fsync, interval),
            // A record is one EventBatch frame, at most a frame and its headers.
            max_record_bytes: cfg.max_frame_bytes.saturating_mul(2),
            ..LogConfig::default()
        };
        Arc::new(Durability {
            policies,
            dir: cfg.storage_dir.clone(),
            config,
            interval,
            ack_level: cfg.ack_level,
            metrics,
            volume: Arc::new(Volume::new(cfg.storage_dir.as_deref())),
        })
    }

    /// The topics document in force and what it decides for each topic.
    pub fn policies(&self) -> &Arc<Policies> {
        &self.policies
    }

    /// The storage volume, as `GET /storage` reports it.
    pub fn volume(&self) -> Arc<Volume> {
        Arc::clone(&self.volume)
    }

    /// Whether `topic` is durable here ([`Policies::is_durable`]).
    pub fn is_durable(&self, topic: &str) -> bool {
        self.dir.is_some() && self.policies.is_durable(topic)
    }

    /// Whether acked publishes wait for durability (`ack_level: persisted`).
    pub fn persisted_acks(&self) -> bool {
        self.ack_level == AckLevel::Persisted
    }

    /// Opens (recovering) the log of durable topic `topic`; blocking file I/O.
    pub fn open<W: Waiter + std::fmt::Debug>(
        &self,
        topic: &str,
    ) -> Result<DurableLog<W>, DurableError> {
        let Some(root) = &self.dir else {
            return Err(DurableError::NoStorageDir);
        };
        let dir = root.join(escape::dir_name(topic));
        let mode = self.policies.fsync_at_open(topic);
        let config = LogConfig {
            fsync: fsync_policy(mode, self.interval),
            retention: self.policies.retention(topic),
            ..self.config
        };
        let log = DurableLog::open(
            topic,
            &dir,
            config,
            mode,
            self.metrics.clone(),
            Arc::clone(&self.volume),
        )?
        .with_live_retention(self.policies.live_retention(topic));
        // The whole name beside the log, for a directory name that was cut (see
        // `topics_on_disk`); best effort: without it the log is only not claimed.
        let named = dir.join(NAME_FILE);
        if !named.exists()
            && let Err(e) = std::fs::write(&named, topic)
        {
            tracing::warn!(topic, error = %e, "durable log: cannot record the topic name");
        }
        Ok(log)
    }

    /// Whether this broker holds a log of `topic` on disk (without opening it).
    pub fn has_log(&self, topic: &str) -> bool {
        self.is_durable(topic)
            && self
                .dir
                .as_ref()
                .is_some_and(|root| root.join(escape::dir_name(topic)).is_dir())
    }

    /// The durable topics this broker holds logs of on disk (directory names it cannot map
    /// back to a durable topic are skipped); blocking file I/O.
    pub fn topics_on_disk(&self) -> Vec<String> {
        let Some(root) = &self.dir else {
            return Vec::new();
        };
        let Ok(entries) = std::fs::read_dir(root) else {
            return Vec::new();
        };
        entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| {
                let dir = e.file_name().to_string_lossy().into_owned();
                escape::topic_name(&dir).or_else(|| {
                    // A cut name: the whole one is in the directory, if it maps back to it.
                    let name = std::fs::read_to_string(e.path().join(NAME_FILE)).ok()?;
                    (escape::dir_name(&name) == dir).then_some(name)
                })
            })
            .filter(|t| self.is_durable(t))
            .collect()
    }

    /// The storage metrics.
    pub fn metrics(&self) -> &StorageMetrics {
        &self.metrics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_on_disk_map_back_to_their_topics_even_when_cut() {
        let dir =
            std::env::temp_dir().join(format!("starling-durable-names-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut cfg = starling_config::Profile::Balanced.config();
        cfg.durable_topics = vec!["orders.>".into()];
        cfg.storage_dir = Some(dir.clone());
        let registry = prometheus::Registry::new();
        let d = Durability::new(&cfg, StorageMetrics::register(&registry).unwrap());
        let long = format!("orders.{}", "x".repeat(300));
        for topic in ["orders.eu", long.as_str()] {
            let log = d.open::<crate::pubsub::ack::AckToken>(topic).unwrap();
            drop(log);
            assert!(d.has_log(topic));
        }
        // Not a durable topic: not listed, whatever is on disk.
        std::fs::create_dir_all(dir.join("other")).unwrap();
        let mut found = d.topics_on_disk();
        found.sort();
        assert_eq!(found, vec!["orders.eu".to_string(), long]);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
