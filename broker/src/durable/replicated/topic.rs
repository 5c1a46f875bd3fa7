//! One replicated durable topic's replica on this broker ([`ReplicatedLog`]), as its topic
//! task uses it, and what every such topic shares ([`Replication`]).
//!
//! With a replica count N > 1 on a cluster member (the topic's policy's, else
//! `durable_replicas`: `durable::policy`), a durable topic's replica set is the first N
//! members of the topic's placement order ([`ReplicaNet::replica_set`]). The count is asked
//! afresh at every look of the mover and the status watcher, so a policy moving a topic
//! between 3 and 5 replicas is carried out on the open topic. A broker of
//! the set opens its replica (`starling_replica::ReplicatedTopic`, under
//! `storage_dir/<escaped topic>/`, on the real file system) when the topic's task starts, and
//! registers its RPC server in the [`ReplicaRegistry`] so the peer links route the topic's
//! Raft RPCs to it; closing unregisters it and stops its Raft. The first member of the set
//! creates the topic (`ReplicatedTopic::create`: only when no replica holds any state of it,
//! so a first member back with an empty volume is caught up, never bootstraps a second
//! history), retrying until every replica has answered. With fewer than N members the topic
//! is not opened: publishes are refused with a retryable error.
//!
//! Tasks per open replica: the proposer and its completer (sealed batches in order, up to
//! `max_entries_in_flight` entries submitted to Raft and not yet committed at once, the
//! batches waiting while the window is full merged into the next entry; each batch's outcome
//! reported, in order, when its entry committed or failed), the reader (every committed
//! entry, in index order, handed to the topic task for delivery: subscribers see committed
//! entries only), and the watcher (the Raft leader as this replica knows it, for routing publishes, and the
//! metrics, with the under-replicated and leaderless judgement of [`super::health`]). The broker side of the network is behind [`ReplicaNet`], so this module does
//! not depend on the cluster module.
//!
//! Positions: stream [`STREAM`], seq = Raft index × 2^[`SEQ_SHIFT`] + the message's offset in
//! its entry ([`seq_of`], [`split_seq`]); stable on every replica, never reused.
//!
//! Retention: every replica's committed log (leader and followers) reads the topic's
//! retention in force at each apply from [`Policies::live_retention`], the source a
//! single-copy log reads at each run, so a changed topics document trims an open replicated
//! topic too, on each replica after its next apply. It trims only the committed log (what
//! readers and snapshots see), never the Raft log a lagging follower is caught up from; why
//! that keeps the state machine and snapshots whole is in `starling_replica::state_machine`.
//! A read from before the oldest retained entry begins at it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use starling_proto::{EventHeaders, Frame, IndexedHeaders};
use starling_replica::{
    Committed, Created, Node, NodeId, Pending, ReplicaConfig, ReplicaError, ReplicatedTopic,
    Transport,
};
use starling_storage::RealFs;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, watch};

use super::health::Health;
use super::registry::{RegistryFull, ReplicaRegistry};
use crate::durable::policy::Policies;

/// The stream every position of a replicated topic is in.
pub const STREAM: u64 = 1;
/// Bits of a position's seq below the Raft index: the offset of a message in its entry.
pub const SEQ_SHIFT: u32 = 24;
/// The most messages one entry carries (offsets must fit below [`SEQ_SHIFT`]).
pub const MAX_ENTRY_MESSAGES: usize = 1 << SEQ_SHIFT;

/// The seq of the message at `offset` in the entry at Raft index `index`.
pub fn seq_of(index: u64, offset: u64) -> u64 {
    (index << SEQ_SHIFT) | (offset & ((1 << SEQ_SHIFT) - 1))
}

/// The Raft index and the offset in its entry of a seq.
pub fn split_seq(seq: u64) -> (u64, u64) {
    (seq >> SEQ_SHIFT, seq & ((1 << SEQ_SHIFT) - 1))
}

/// What a replicated topic needs of the cluster: who the replicas are and how to reach them.
pub trait ReplicaNet: Send + Sync {
    /// This broker's replica id.
    fn self_id(&self) -> NodeId;
    /// Whether this broker is in a cluster (replication applies only there).
    fn is_clustered(&self) -> bool;
    /// The replica ids of the first `n` members of `topic`'s placement order, or `None` when
    /// the cluster has fewer than `n` members.
    fn replica_set(&self, topic: &str, n: usize) -> Option<Vec<NodeId>>;
    /// The transport of `topic`'s replica here.
    fn transport(&self, topic: &str) -> Arc<dyn Transport>;
}

/// Why a topic's replica is not open here.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Fewer members than the topic's replica count.
    #[error(
        "the cluster has fewer members than the topic's replicas ({need}: its policy's, else durable_replicas): persisted publishes are refused until there are enough"
    )]
    TooFewMembers {
        /// The topic's replica count.
        need: usize,
    },
    /// This broker is not one of the topic's replicas.
    #[error("this broker is not one of the topic's replicas")]
    NotAReplica,
    /// The replica failed to open.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// The registry is full (`max_topics`).
    #[error(transparent)]
    Full(#[from] RegistryFull),
}

/// Why a proposed batch was not committed (nothing was acknowledged).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProposeError {
    /// This replica is not the leader (or stopped being it before the entry committed):
    /// publish again, at the leader.
    #[error("this replica is not the topic's leader (leader: {leader:?}); publish again")]
    NotLeader {
        /// The leader as this replica knows it.
        leader: Option<NodeId>,
    },
    /// The replica or its Raft failed or stopped.
    #[error("{0}")]
    Failed(String),
}

/// The outcome callback of one proposed batch.
pub type Done = Box<dyn FnOnce(Result<(), ProposeError>) + Send>;

/// One sealed batch on its way into the Raft log.
pub struct Proposal {
    /// Its messages: the publish frames' own buffers, shared (copied only when the entry is
    /// encoded into the Raft log).
    pub messages: Vec<bytes::Bytes>,
    /// The headers of the messages that have any, by strictly increasing index into
    /// `messages`; the entry keeps them as one `EventHeaders` frame (`Batch::headers`).
    pub headers: Vec<IndexedHeaders>,
    /// Called with the outcome once the entry carrying it committed (or failed).
    pub done: Done,
}

/// The Raft leader of each replicated topic open here, as its replica knows it.
#[derive(Default)]
pub struct Leaders {
    map: parking_lot::RwLock<HashMap<Arc<str>, NodeId>>,
}

impl Leaders {
    /// The leader of `topic`, if a replica here knows one.
    pub fn get(&self, topic: &str) -> Option<NodeId> {
        self.map.read().get(topic).copied()
    }

    fn set(&self, topic: &Arc<str>, leader: Option<NodeId>) {
        let mut map = self.map.write();
        match leader {
            Some(l) => {
                map.insert(Arc::clone(topic), l);
            }
            None => {
                map.remove(topic);
            }
        }
    }
}

/// The replication metrics (names in `crate::metrics`).
#[derive(Clone)]
pub struct ReplicaMetrics {
    /// Leader changes seen by the replicas here.
    pub leader_changes: prometheus::IntCounter,
    /// Last applied (committed) Raft index, by topic.
    pub applied_index: prometheus::IntGaugeVec,
    /// Entries in the Raft log not applied yet, by topic.
    pub apply_lag: prometheus::IntGaugeVec,
    /// Whether the replica here leads the topic (1) or not (0), by topic.
    pub is_leader: prometheus::IntGaugeVec,
    /// Replica-set moves led here, by outcome (`mover::OUTCOMES`).
    pub moves: prometheus::IntCounterVec,
    /// 1 when the replica here leads the topic and a voter is missing or behind
    /// ([`super::health`]), by topic.
    pub under_replicated: prometheus::IntGaugeVec,
    /// 1 when the replica here knows no leader of the topic, by topic.
    pub leaderless: prometheus::IntGaugeVec,
}

/// What every replicated topic of this broker shares.
pub struct Replication {
    /// `durable_replicas`.
    pub replicas: usize,
    /// Each topic's replica count (`durable::policy`).
    pub policies: Arc<Policies>,
    /// Whether a topics document is configured (`topics_file`): a policy may replicate a
    /// topic whatever `durable_replicas` says.
    pub per_topic: bool,
    /// The cluster side.
    pub net: Arc<dyn ReplicaNet>,
    /// Where incoming Raft RPCs find the replicas.
    pub registry: Arc<ReplicaRegistry>,
    /// The leaders the replicas here know.
    pub leaders: Arc<Leaders>,
    /// `storage_dir`.
    pub dir: Option<PathBuf>,
    /// The replicas' settings.
    pub config: ReplicaConfig,
    /// Metrics.
    pub metrics: ReplicaMetrics,
    /// The replicas open here, for [`Replication::stop_all`].
    pub open: Arc<Open>,
    /// Replica-set moves at once on this broker (`max_concurrent_replica_moves`; see
    /// `mover`).
    pub move_permits: Arc<tokio::sync::Semaphore>,
    /// The cluster's membership changes, which wake the movers (`None`: they only look
    /// periodically).
    pub changes: Option<watch::Receiver<u64>>,
}

/// The replicas open on this broker, by topic.
pub type Open = parking_lot::Mutex<HashMap<Arc<str>, Arc<ReplicatedTopic<RealFs>>>>;

/// Sealed batches waiting for the proposer, at most.
const PROPOSALS_QUEUED: usize = 256;
/// Committed entries read ahead of the topic task, at most.
const COMMITTED_QUEUED: usize = 256;
/// Entries read per committed-log read.
const READ_ENTRIES: usize = 64;
/// How often the watcher looks at the replica's state.
const WATCH_EVERY: Duration = Duration::from_millis(20);
/// Between two attempts to create the topic.
const CREATE_RETRY: Duration = Duration::from_millis(300);

/// The network of a broker that is not in a cluster: no durable topic is replicated there.
struct Standalone;

impl ReplicaNet for Standalone {
    fn self_id(&self) -> NodeId {
        0
    }

    fn is_clustered(&self) -> bool {
        false
    }

    fn replica_set(&self, _topic: &str, _n: usize) -> Option<Vec<NodeId>> {
        None
    }

    fn transport(&self, _topic: &str) -> Arc<dyn Transport> {
        Arc::new(Standalone)
    }
}

impl Transport for Standalone {
    fn call(
        &self,
        _from: NodeId,
        to: NodeId,
        _frame: Vec<u8>,
    ) -> starling_replica::network::CallFuture<'_> {
        Box::pin(async move { Err(starling_replica::TransportError::Unreachable(to)) })
    }
}

impl ReplicaMetrics {
    /// Series registered nowhere (for a broker part tested alone).
    pub fn unregistered() -> ReplicaMetrics {
        let gauges = |name: &str| {
            prometheus::IntGaugeVec::new(prometheus::Opts::new(name, name), &["topic"])
                .unwrap_or_else(|_| unreachable!("a valid metric name"))
        };
        ReplicaMetrics {
            leader_changes: prometheus::IntCounter::new("leader_changes", "leader_changes")
                .unwrap_or_else(|_| unreachable!("a valid metric name")),
            applied_index: gauges("applied_index"),
            apply_lag: gauges("apply_lag"),
            is_leader: gauges("is_leader"),
            moves: prometheus::IntCounterVec::new(
                prometheus::Opts::new("moves", "moves"),
                &["outcome"],
            )
            .unwrap_or_else(|_| unreachable!("a valid metric name")),
            under_replicated: gauges("under_replicated"),
            leaderless: gauges("leaderless"),
        }
    }
}

impl Replication {
    /// Replication that never applies: durable topics have one copy (outside a cluster, or
    /// for a broker part tested alone).
    pub fn off(max_topics: usize) -> Arc<Replication> {
        let cfg = starling_config::Profile::Balanced.config();
        Arc::new(Replication {
            replicas: 1,
            policies: Policies::new(&cfg, starling_config::topics::CompiledTopics::empty()),
            per_topic: false,
            net: Arc::new(Standalone),
            registry: ReplicaRegistry::new(max_topics),
            leaders: Arc::default(),
            dir: None,
            config: ReplicaConfig::default(),
            metrics: ReplicaMetrics::unregistered(),
            open: Arc::default(),
            move_permits: Arc::new(tokio::sync::Semaphore::new(1)),
            changes: None,
        })
    }

    /// Whether durable topics may be replicated here (in a cluster, `durable_replicas` > 1 or
    /// a topics document whose policies may ask for replicas).
    pub fn enabled(&self) -> bool {
        (self.replicas > 1 || self.per_topic) && self.net.is_clustered()
    }

    /// Whether `topic`, if durable, is replicated here (in a cluster, with a replica count
    /// above 1: [`Policies::is_replicated`]). Says nothing about whether it is durable.
    pub fn is_replicated(&self, topic: &str) -> bool {
        self.net.is_clustered() && self.policies.is_replicated(topic)
    }

    /// The replica count of `topic` now ([`Policies::replicas_now`]).
    pub fn replicas_of(&self, topic: &str) -> usize {
        self.policies.replicas_now(topic) as usize
    }

    /// Whether this broker is one of `topic`'s replicas (replicated here, and this broker
    /// among the first N members of the topic's placement order, N its replica count). Says
    /// nothing about whether `topic` is durable.
    pub fn is_replica_here(&self, topic: &str) -> bool {
        self.is_replicated(topic)
            && self
                .net
                .replica_set(topic, self.replicas_of(topic))
                .is_some_and(|set| set.contains(&self.net.self_id()))
    }

    /// Stops the Raft of every replica open here (the broker stops: its replicas stop taking
    /// part, as a crashed broker's would); their topic tasks then refuse publishes.
    pub async fn stop_all(&self) {
        let open: Vec<_> = self.open.lock().drain().collect();
        for (topic, replica) in open {
            self.registry.unregister(&topic);
            if let Err(e) = replica.shutdown().await {
                tracing::debug!(topic = %topic, error = %e, "replicated topic: stop");
            }
        }
    }

    /// Opens this broker's replica of `topic` (see the module doc) and starts its tasks.
    pub async fn open(&self, topic: &Arc<str>) -> Result<ReplicatedLog, OpenError> {
        let n = self.replicas_of(topic);
        let Some(set) = self.net.replica_set(topic, n) else {
            return Err(OpenError::TooFewMembers { need: n });
        };
        let me = self.net.self_id();
        let dir = match &self.dir {
            Some(root) => root.join(crate::durable::escape::dir_name(topic)),
            None => {
                return Err(OpenError::Replica(ReplicaError::Config(
                    "no storage_dir".into(),
                )));
            }
        };
        // A removal cut short by a crash is finished before anything opens there.
        let leftover = dir.clone();
        tokio::task::spawn_blocking(move || super::removal::finish(&leftover))
            .await
            .map_err(|e| ReplicaError::Storage(e.to_string()))?
            .map_err(|e| ReplicaError::Storage(e.to_string()))?;
        let holds = dir.join("raft").is_dir();
        if !set.contains(&me) && !holds {
            return Err(OpenError::NotAReplica);
        }
        // The committed log follows the topic's retention in force, as a single-copy log
        // does (the one source: `Policies::live_retention`); see the module doc.
        let config = ReplicaConfig {
            retention: self.policies.retention(topic),
            ..self.config
        };
        let replica =
            ReplicatedTopic::open(topic, me, RealFs, &dir, config, self.net.transport(topic))
                .await?;
        replica.follow_retention(self.policies.live_retention(topic));
        let replica = Arc::new(replica);
        if let Err(e) = self.registry.register(topic, replica.server()) {
            let _ = replica.shutdown().await;
            return Err(e.into());
        }
        self.open
            .lock()
            .insert(Arc::clone(topic), Arc::clone(&replica));
        let (stop, stopped) = watch::channel(false);
        let (proposals, queued) = mpsc::channel(PROPOSALS_QUEUED);
        let (committed_tx, committed) = mpsc::channel(COMMITTED_QUEUED);
        let live_from = replica.status().applied.map_or(0, |a| a + 1);
        let max_bytes = (self.config.max_record_bytes as usize / 4).max(64 * 1024);
        tokio::spawn(propose(
            Arc::clone(&replica),
            queued,
            max_bytes,
            self.config.max_entries_in_flight,
        ));
        tokio::spawn(read(
            Arc::clone(&replica),
            live_from,
            committed_tx,
            stopped.clone(),
        ));
        tokio::spawn(watch_status(
            Arc::clone(&replica),
            Arc::clone(topic),
            self.metrics.clone(),
            stopped.clone(),
            Arc::clone(&self.leaders),
            Arc::clone(&self.policies),
        ));
        let (removed_tx, removed) = watch::channel(false);
        let desired: super::mover::Desired = {
            let (net, topic) = (Arc::clone(&self.net), Arc::clone(topic));
            let policies = Arc::clone(&self.policies);
            Box::new(move || net.replica_set(&topic, policies.replicas_now(&topic) as usize))
        };
        tokio::spawn(
            super::mover::Mover {
                replica: Arc::clone(&replica),
                topic: Arc::clone(topic),
                desired,
                permits: Arc::clone(&self.move_permits),
                moves: self.metrics.moves.clone(),
                changes: self.changes.clone(),
                stopped: stopped.clone(),
                removed: removed_tx,
            }
            .run(),
        );
        if set.first() == Some(&me) {
            let members: BTreeMap<NodeId, Node> = set
                .iter()
                .map(|&id| (id, Node::new(format!("{id:016x}"))))
                .collect();
            tokio::spawn(create(Arc::clone(&replica), members, stopped));
        }
        tracing::info!(topic = %topic, replica = me, ?set, live_from, "replicated topic: replica open");
        Ok(ReplicatedLog {
            topic: Arc::clone(topic),
            replica,
            proposals,
            committed,
            live_from,
            stop,
            registry: Arc::clone(&self.registry),
            open: Arc::clone(&self.open),
            removed,
            dir,
        })
    }
}

/// One replica of a replicated topic, open on this broker, as its topic task uses it.
pub struct ReplicatedLog {
    topic: Arc<str>,
    replica: Arc<ReplicatedTopic<RealFs>>,
    proposals: mpsc::Sender<Proposal>,
    committed: mpsc::Receiver<Committed>,
    live_from: u64,
    stop: watch::Sender<bool>,
    registry: Arc<ReplicaRegistry>,
    open: Arc<Open>,
    /// Set by the mover when this replica left the topic.
    removed: watch::Receiver<bool>,
    /// The topic's directory.
    dir: PathBuf,
}

/// What a replica hands its topic task next.
pub enum ReplicaEvent {
    /// The next committed entry, in index order.
    Committed(Committed),
    /// This replica left the topic's membership (see `mover`): close it with
    /// [`ReplicatedLog::remove`].
    Removed,
}

impl ReplicatedLog {
    /// Hands a sealed batch to the proposer (waiting while `PROPOSALS_QUEUED` are queued);
    /// its `done` is called with the outcome.
    pub async fn propose(&self, proposal: Proposal) {
        if let Err(mpsc::error::SendError(p)) = self.proposals.send(proposal).await {
            (p.done)(Err(ProposeError::Failed("the replica stopped".into())));
        }
    }

    /// The term this replica leads in, if it is the topic's leader.
    pub fn leader_term(&self) -> Option<u64> {
        self.replica.leader_term()
    }

    /// The next committed entry, in index order (its messages may be empty for none).
    pub async fn next_committed(&mut self) -> Option<Committed> {
        self.committed.recv().await
    }

    /// The next committed entry, or the news that this replica left the topic; `None` when
    /// the reader stopped.
    pub async fn next_event(&mut self) -> Option<ReplicaEvent> {
        if *self.removed.borrow() {
            return Some(ReplicaEvent::Removed);
        }
        tokio::select! {
            c = self.committed.recv() => c.map(ReplicaEvent::Committed),
            r = self.removed.changed() => match r {
                Ok(()) if *self.removed.borrow() => Some(ReplicaEvent::Removed),
                // The mover ended without a removal: only entries from now on.
                _ => self.committed.recv().await.map(ReplicaEvent::Committed),
            },
        }
    }

    /// Closes the replica of a topic it left (see `mover`) and deletes its files.
    pub async fn remove(self) {
        let dir = self.dir.clone();
        let topic = Arc::clone(&self.topic);
        self.close().await;
        match tokio::task::spawn_blocking(move || super::removal::remove_files(&dir)).await {
            Ok(Ok(())) => {
                tracing::info!(topic = %topic, "replicated topic: left the replica set; files deleted");
            }
            Ok(Err(e)) => {
                tracing::warn!(topic = %topic, error = %e, "replicated topic: deleting a removed replica's files failed");
            }
            Err(e) => {
                tracing::warn!(topic = %topic, error = %e, "replicated topic: deleting a removed replica's files failed");
            }
        }
    }

    /// The first index the reader handed over live (what was applied before is read back
    /// with [`ReplicatedLog::read`]).
    pub fn live_from(&self) -> u64 {
        self.live_from
    }

    /// The message ids of the committed entries applied here within the last `window`, oldest
    /// first, each with its age, at most the newest `max` (`record::msg_ids_of`): what the
    /// topic's de-duplication window starts from when the replica opens.
    pub async fn msg_ids_within(
        &self,
        window: Duration,
        max: usize,
    ) -> Result<Vec<(String, Duration)>, ReplicaError> {
        let replica = Arc::clone(&self.replica);
        let now = starling_storage::now_ms();
        let since = now.saturating_sub(u64::try_from(window.as_millis()).unwrap_or(u64::MAX));
        tokio::task::spawn_blocking(move || {
            let frames = replica.headers_since(since, max)?;
            Ok(crate::durable::record::msg_ids_of(frames, now, max))
        })
        .await
        .map_err(|e| ReplicaError::Stopped(e.to_string()))?
    }

    /// Up to `max` committed entries from index `from` on, read from the committed log.
    pub async fn read(&self, from: u64, max: usize) -> Result<Vec<Committed>, ReplicaError> {
        let replica = Arc::clone(&self.replica);
        tokio::task::spawn_blocking(move || replica.read_committed(from, max))
            .await
            .map_err(|e| ReplicaError::Stopped(e.to_string()))?
    }

    /// The replica's state.
    pub fn status(&self) -> starling_replica::TopicStatus {
        self.replica.status()
    }

    /// Stops the replica's tasks and its Raft and unregisters it (its files stay).
    pub async fn close(self) {
        let _ = self.stop.send(true);
        self.registry.unregister(&self.topic);
        self.open.lock().remove(&self.topic);
        if let Err(e) = self.replica.shutdown().await {
            tracing::warn!(topic = %self.topic, error = %e, "replicated topic: shutdown failed");
        }
    }
}

/// An entry on its way through Raft, with the outcome callbacks of the batches it carries.
struct InFlight {
    /// Submitted (its commit awaited by [`complete`]), or refused before it was.
    entry: Result<Pending, ProposeError>,
    done: Vec<Done>,
    /// Frees its place in the window once its outcome is reported.
    _slot: OwnedSemaphorePermit,
}

fn propose_error(e: ReplicaError) -> ProposeError {
    match e {
        ReplicaError::NotLeader { leader } => ProposeError::NotLeader { leader },
        e => ProposeError::Failed(e.to_string()),
    }
}

/// Proposes the queued batches in order, with up to `in_flight` entries between submission
/// and commit at once (`ReplicaConfig::max_entries_in_flight`): each entry carries every
/// batch queued while the window was full (up to `max_bytes`). Entries take their places in
/// the Raft log in this order ([`ReplicatedTopic::submit`]), and [`complete`] reports their
/// outcomes in the same order, each only once its entry committed (or failed).
async fn propose(
    replica: Arc<ReplicatedTopic<RealFs>>,
    mut queued: mpsc::Receiver<Proposal>,
    max_bytes: usize,
    in_flight: usize,
) {
    let in_flight = in_flight.max(1);
    let window = Arc::new(Semaphore::new(in_flight));
    let (flights, submitted) = mpsc::channel(in_flight);
    let completer = tokio::spawn(complete(submitted));
    while let Some(first) = queued.recv().await {
        // Wait for a place in the window; what queues meanwhile joins this entry.
        let slot = match Arc::clone(&window).acquire_owned().await {
            Ok(slot) => slot,
            Err(_) => {
                (first.done)(Err(ProposeError::Failed("the replica stopped".into())));
                break;
            }
        };
        let mut bytes: usize = first.messages.iter().map(bytes::Bytes::len).sum::<usize>()
            + indexed_len(&first.headers);
        let mut messages = first.messages;
        let mut headers = first.headers;
        let mut done = vec![first.done];
        while bytes < max_bytes && messages.len() < MAX_ENTRY_MESSAGES / 2 {
            let Ok(more) = queued.try_recv() else { break };
            bytes += more.messages.iter().map(bytes::Bytes::len).sum::<usize>()
                + indexed_len(&more.headers);
            // The merged batch's headers index into the merged messages.
            let base = u32::try_from(messages.len()).unwrap_or(u32::MAX);
            headers.extend(more.headers.into_iter().map(|h| IndexedHeaders {
                index: h.index.saturating_add(base),
                headers: h.headers,
            }));
            messages.extend(more.messages);
            done.push(more.done);
        }
        let headers = if headers.is_empty() {
            bytes::Bytes::new()
        } else {
            Frame::EventHeaders(EventHeaders { entries: headers }).to_bytes()
        };
        let entry = replica
            .submit_with_headers(messages, headers)
            .await
            .map_err(propose_error);
        let flight = InFlight {
            entry,
            done,
            _slot: slot,
        };
        if let Err(mpsc::error::SendError(f)) = flights.send(flight).await {
            for d in f.done {
                d(Err(ProposeError::Failed("the replica stopped".into())));
            }
            break;
        }
    }
    drop(flights);
    let _ = completer.await;
}

/// The encoded bytes of a batch's headers (none: 0), as its entry carries them.
fn indexed_len(headers: &[IndexedHeaders]) -> usize {
    if headers.is_empty() {
        0
    } else {
        starling_proto::indexed_headers_len(headers)
    }
}

/// Reports each submitted entry's outcome to its batches, in submission order.
async fn complete(mut submitted: mpsc::Receiver<InFlight>) {
    while let Some(flight) = submitted.recv().await {
        let outcome = match flight.entry {
            Ok(pending) => pending.committed().await.map(|_| ()).map_err(propose_error),
            Err(e) => Err(e),
        };
        for d in flight.done {
            d(outcome.clone());
        }
    }
}

/// Hands every committed entry from index `next` on to the topic task, in order.
async fn read(
    replica: Arc<ReplicatedTopic<RealFs>>,
    mut next: u64,
    out: mpsc::Sender<Committed>,
    stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        let applied = replica.applied_id();
        let r = Arc::clone(&replica);
        let read = tokio::task::spawn_blocking(move || r.read_committed(next, READ_ENTRIES)).await;
        let entries = match read {
            Ok(Ok(entries)) => entries,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, next, "replicated topic: reading the committed log failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
            Err(_) => return,
        };
        let full = entries.len() >= READ_ENTRIES;
        for entry in entries {
            next = next.max(entry.index + 1);
            if out.send(entry).await.is_err() {
                return;
            }
        }
        // Nothing (else) to read up to what was applied before the read: entries with no
        // messages (a leader's blank entry, a membership change) are passed over, told to the
        // task as one entry without messages at the last of them, with its term (a new
        // leader's task learns so that it delivered everything its predecessors committed:
        // its de-duplication window is whole, `pubsub::topic::dedup`).
        if !full && let Some((a, term)) = applied {
            if a >= next {
                let passed = Committed {
                    index: a,
                    term,
                    messages: Vec::new(),
                    headers: bytes::Bytes::new(),
                };
                if out.send(passed).await.is_err() {
                    return;
                }
            }
            next = next.max(a + 1);
        }
        if !full
            && replica
                .wait_applied(next, Duration::from_millis(500))
                .await
                .is_err()
        {
            // A timeout, or the Raft stopped (then this task ends too).
            if replica.status().stopped.is_some() {
                return;
            }
        }
    }
}

/// Keeps the leaders map and the metrics current with the replica's state (`policies`: the
/// topic's replica count now, for the under-replicated judgement of [`super::health`]).
async fn watch_status(
    replica: Arc<ReplicatedTopic<RealFs>>,
    topic: Arc<str>,
    metrics: ReplicaMetrics,
    stopped: watch::Receiver<bool>,
    leaders: Arc<Leaders>,
    policies: Arc<Policies>,
) {
    let labels = [&*topic];
    let mut leader = None;
    let mut health = Health::default();
    let mut tick = tokio::time::interval(WATCH_EVERY);
    while !*stopped.borrow() {
        tick.tick().await;
        let s = replica.status();
        if s.stopped.is_some() {
            break;
        }
        if s.leader != leader {
            if s.leader.is_some() {
                metrics.leader_changes.inc();
            }
            tracing::info!(topic = %topic, leader = ?s.leader, term = s.term, "replicated topic: leader");
            leader = s.leader;
            leaders.set(&topic, leader);
        }
        let applied = s.applied.map_or(0, |a| a + 1);
        metrics
            .applied_index
            .with_label_values(&labels)
            .set(i64::try_from(applied).unwrap_or(i64::MAX));
        let lag = s.last_log.map_or(0, |l| l + 1).saturating_sub(applied);
        metrics
            .apply_lag
            .with_label_values(&labels)
            .set(i64::try_from(lag).unwrap_or(i64::MAX));
        metrics
            .is_leader
            .with_label_values(&labels)
            .set(i64::from(s.is_leader));
        let replicas = policies.replicas_now(&topic) as usize;
        let verdict = health.observe(&s, replicas, std::time::Instant::now());
        metrics
            .under_replicated
            .with_label_values(&labels)
            .set(i64::from(verdict.under_replicated));
        metrics
            .leaderless
            .with_label_values(&labels)
            .set(i64::from(verdict.leaderless));
    }
    leaders.set(&topic, None);
    for m in [
        &metrics.applied_index,
        &metrics.apply_lag,
        &metrics.is_leader,
        &metrics.under_replicated,
        &metrics.leaderless,
    ] {
        let _ = m.remove_label_values(&labels);
    }
}

/// Creates the topic from its first replica (see the module doc), retrying until every
/// replica has answered.
async fn create(
    replica: Arc<ReplicatedTopic<RealFs>>,
    members: BTreeMap<NodeId, Node>,
    stopped: watch::Receiver<bool>,
) {
    while !*stopped.borrow() {
        match replica.create(members.clone()).await {
            Ok(Created::Bootstrapped) => {
                tracing::info!(members = ?members.keys().collect::<Vec<_>>(), "replicated topic: created");
                return;
            }
            Ok(Created::Exists) => return,
            Err(e) => {
                tracing::debug!(error = %e, "replicated topic: not created yet; retrying");
                tokio::time::sleep(CREATE_RETRY).await;
            }
        }
    }
}
