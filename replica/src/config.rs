//! A replicated topic's settings ([`ReplicaConfig`]) and the openraft configuration and
//! storage configurations derived from them.
//!
//! | knob | default | what it does |
//! |---|---|---|
//! | `heartbeat` | 100 ms | the leader's heartbeat (and replication retry) interval |
//! | `election_timeout_min`, `_max` | 300 ms, 600 ms | a follower that hears no leader for a random time in this range starts an election: the fail-over gap is about this plus one round trip |
//! | `segment_bytes` | 64 MiB | segment size of the Raft log and the committed log |
//! | `max_record_bytes` | 16 MiB | largest stored entry (a publish is refused before it is proposed when its entry would not fit) |
//! | `max_frame_bytes` | 64 MiB | largest RPC frame sent or accepted; at least `max_record_bytes` + [`APPEND_FRAME_OVERHEAD`] (an append of several entries over it is sent as several; [`ReplicaConfig::within_frame`] fits a config to a transport's bound) |
//! | `max_snapshot_bytes` | 1 GiB | largest snapshot image accepted |
//! | `snapshot_every` | 10 000 | entries applied between snapshots (then the Raft log is purged up to the snapshot, keeping `keep_after_snapshot`) |
//! | `keep_after_snapshot` | 1 000 | Raft log entries kept behind a snapshot, so a follower a little behind catches up from the log, not a snapshot |
//! | `max_entries_per_append` | 300 | entries per replication RPC |
//! | `max_entries_in_flight` | 4 | entries a broker's proposer keeps submitted and not yet committed at once (more batches queue and are merged into the next entry) |
//! | `retention` | none | retention of the committed log (what readers and snapshots see) |
//!
//! The broker sets `heartbeat` from the knob `replica_heartbeat_ms`, `election_timeout_min`
//! from `replica_election_timeout_ms` and `election_timeout_max` to twice it, and the
//! retention from the storage retention knobs (`config/`, the knob table); the rest keep the
//! defaults above, fitted to the peer link's frame bound by [`ReplicaConfig::within_frame`].

use std::time::Duration;

use openraft::SnapshotPolicy;
use starling_storage::{FsyncPolicy, LogConfig, RetentionPolicy};

use crate::error::ReplicaError;

/// A replicated topic's settings; see the module doc for each knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaConfig {
    /// Leader heartbeat interval.
    pub heartbeat: Duration,
    /// Lower bound of the election timeout.
    pub election_timeout_min: Duration,
    /// Upper bound of the election timeout.
    pub election_timeout_max: Duration,
    /// Segment size of both logs.
    pub segment_bytes: u64,
    /// Largest stored entry.
    pub max_record_bytes: u32,
    /// Largest RPC frame.
    pub max_frame_bytes: usize,
    /// Largest snapshot image accepted.
    pub max_snapshot_bytes: usize,
    /// Entries applied between snapshots.
    pub snapshot_every: u64,
    /// Raft log entries kept behind a snapshot.
    pub keep_after_snapshot: u64,
    /// Entries per replication RPC.
    pub max_entries_per_append: u64,
    /// Entries submitted and not yet committed at once, per topic (the broker's proposer).
    pub max_entries_in_flight: usize,
    /// Retention of the committed log.
    pub retention: RetentionPolicy,
}

impl Default for ReplicaConfig {
    fn default() -> ReplicaConfig {
        ReplicaConfig {
            heartbeat: Duration::from_millis(100),
            election_timeout_min: Duration::from_millis(300),
            election_timeout_max: Duration::from_millis(600),
            segment_bytes: 64 * 1024 * 1024,
            max_record_bytes: 16 * 1024 * 1024,
            max_frame_bytes: 64 * 1024 * 1024,
            max_snapshot_bytes: 1024 * 1024 * 1024,
            snapshot_every: 10_000,
            keep_after_snapshot: 1_000,
            max_entries_per_append: 300,
            max_entries_in_flight: 4,
            retention: RetentionPolicy::default(),
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Bytes of an append RPC frame besides its one entry at most (the vote, the previous log id,
/// the commit index, the enum tags and the length prefix): a frame of `max_frame_bytes` must
/// hold one entry of `max_record_bytes` and this much, or an entry could be stored that no
/// append can carry.
pub const APPEND_FRAME_OVERHEAD: usize = 4096;

impl ReplicaConfig {
    /// This configuration with frames of at most `max_frame_bytes` (a transport's bound), and
    /// `max_record_bytes` lowered, if need be, so that one entry fits a frame.
    pub fn within_frame(self, max_frame_bytes: usize) -> ReplicaConfig {
        let fits = max_frame_bytes.saturating_sub(APPEND_FRAME_OVERHEAD);
        let fits = u32::try_from(fits).unwrap_or(u32::MAX);
        ReplicaConfig {
            max_frame_bytes,
            max_record_bytes: self.max_record_bytes.min(fits),
            ..self
        }
    }

    /// The openraft configuration, validated by the library.
    pub fn raft_config(&self, topic: &str) -> Result<openraft::Config, ReplicaError> {
        let record = usize::try_from(self.max_record_bytes).unwrap_or(usize::MAX);
        if record.saturating_add(APPEND_FRAME_OVERHEAD) > self.max_frame_bytes {
            return Err(ReplicaError::Config(format!(
                "max_frame_bytes {} cannot carry an entry of max_record_bytes {} (it needs \
                 {APPEND_FRAME_OVERHEAD} bytes more)",
                self.max_frame_bytes, self.max_record_bytes
            )));
        }
        let config = openraft::Config {
            cluster_name: topic.to_string(),
            heartbeat_interval: millis(self.heartbeat),
            election_timeout_min: millis(self.election_timeout_min),
            election_timeout_max: millis(self.election_timeout_max),
            max_payload_entries: self.max_entries_per_append,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_after_snapshot,
            // Snapshot chunks must fit a frame with room for the JSON encoding of bytes.
            snapshot_max_chunk_size: (self.max_frame_bytes / 8) as u64,
            ..openraft::Config::default()
        };
        config
            .validate()
            .map_err(|e| ReplicaError::Config(e.to_string()))
    }

    /// The storage configuration of the Raft log (explicit fsyncs, see
    /// [`crate::log_store`]).
    pub fn raft_log_config(&self) -> LogConfig {
        crate::log_store::log_config(self.segment_bytes, self.max_record_bytes)
    }

    /// The storage configuration of the committed log (explicit fsyncs, retention).
    pub fn committed_log_config(&self) -> LogConfig {
        LogConfig {
            segment_bytes: self.segment_bytes,
            max_record_bytes: self.max_record_bytes,
            fsync: FsyncPolicy::Interval(Duration::from_secs(24 * 3600)),
            retention: self.retention,
            ..LogConfig::default()
        }
    }
}
