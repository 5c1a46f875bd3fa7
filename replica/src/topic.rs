//! The API a broker's topic task uses ([`ReplicatedTopic`]): open one replica of a topic,
//! publish batches that resolve only once committed, read the committed log, see the
//! leader, term and membership, and change the replica set.
//!
//! `publish` resolves `Ok` only after the entry is in the Raft logs of a quorum of voters,
//! each fsynced before it reported the entry flushed, and applied here (for one replica:
//! fsynced by that one). A replica that is not the leader, or a leader deposed before the
//! entry committed, answers [`ReplicaError::NotLeader`] and acknowledges nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::error::{ClientWriteError, RaftError};
use openraft::raft::ClientWriteResult;
use openraft::{ChangeMembers, ServerState};
use starling_storage::{Fs, Position};

use crate::batch::Batch;
use crate::codec;
use crate::committed::Committed;
use crate::config::ReplicaConfig;
use crate::entry_codec;
use crate::error::ReplicaError;
use crate::guard::VoteGuard;
use crate::log_store::{LogStore, position};
use crate::network::{NetworkFactory, Transport};
use crate::rpc::{Rpc, RpcReply, RpcServer};
use crate::state_machine::StateMachine;
use crate::types::{Node, NodeId, Raft, TypeConfig};

/// Encoded bytes kept free in a stored entry for the entry's own fields.
const ENTRY_OVERHEAD: usize = 1024;

/// What one replica knows of its topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicStatus {
    /// This replica.
    pub id: NodeId,
    /// The leader as this replica knows it.
    pub leader: Option<NodeId>,
    /// The current term.
    pub term: u64,
    /// Whether this replica is the leader.
    pub is_leader: bool,
    /// The voters of the current membership.
    pub voters: BTreeSet<NodeId>,
    /// The learners (replicas being caught up before they vote).
    pub learners: BTreeSet<NodeId>,
    /// The last applied index: the high-water mark readers see up to.
    pub applied: Option<u64>,
    /// The last index in this replica's Raft log (applied or not).
    pub last_log: Option<u64>,
    /// The newest commit index a leader's append carried to this replica since it opened
    /// (`None` on a replica no leader has reached yet, and on a leader that never followed):
    /// a follower whose `applied` is behind it is still catching up.
    pub leader_commit: Option<u64>,
    /// Why this replica's Raft stopped, if it did (a fatal storage error): it then takes no
    /// part in the topic until reopened.
    pub stopped: Option<String>,
    /// On the leader, each replica's last log index known to be in its Raft log (the leader
    /// included; `None` for a replica nothing is known to have reached yet): openraft's
    /// replication progress. Empty on any other replica.
    pub matched: BTreeMap<NodeId, Option<u64>>,
}

/// One replica of a replicated topic.
pub struct ReplicatedTopic<F: Fs> {
    id: NodeId,
    pub(crate) raft: Raft,
    committed: StateMachine<F>,
    server: RpcServer,
    guard: Arc<VoteGuard>,
    max_record: usize,
    transport: Arc<dyn Transport>,
    max_frame: usize,
}

/// A batch handed to Raft ([`ReplicatedTopic::submit`]), not yet known to be committed.
pub struct Pending {
    rx: tokio::sync::oneshot::Receiver<ClientWriteResult<TypeConfig>>,
}

impl Pending {
    /// Resolves with the batch's position in the committed log once its entry is committed
    /// and applied here, or [`ReplicaError::NotLeader`] when this replica was not (or stopped
    /// being) the leader before the entry committed: then nothing is acknowledged.
    pub async fn committed(self) -> Result<Position, ReplicaError> {
        match self.rx.await {
            Ok(Ok(written)) => Ok(position(written.log_id.index)),
            Ok(Err(e)) => Err(write_error(RaftError::APIError(e))),
            Err(_) => Err(ReplicaError::Stopped(
                "the Raft stopped before the entry committed".into(),
            )),
        }
    }
}

/// What [`ReplicatedTopic::create`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Created {
    /// This replica bootstrapped the topic and told the others they are founding voters.
    Bootstrapped,
    /// This replica or another one already holds the topic's state: nothing to bootstrap
    /// (a blank replica here is caught up by the leader).
    Exists,
}

fn stopped(e: impl std::fmt::Display) -> ReplicaError {
    ReplicaError::Stopped(e.to_string())
}

fn write_error(e: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> ReplicaError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => ReplicaError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            ReplicaError::Membership(e.to_string())
        }
        RaftError::Fatal(f) => stopped(f),
    }
}

impl<F: Fs> ReplicatedTopic<F> {
    /// Opens replica `id` of `topic` with its data under `dir` (through `fs`), talking to
    /// its peers over `transport`. The directory holds `raft/` (the Raft log and
    /// `raft-meta.json`) and `committed/` (the committed log). An empty directory is a new
    /// replica: it waits to be bootstrapped ([`ReplicatedTopic::initialize`]) or to be
    /// caught up by a leader that has it in its membership (a re-joined replica whose
    /// volume was lost, under the same id).
    pub async fn open(
        topic: &str,
        id: NodeId,
        fs: F,
        dir: &Path,
        config: ReplicaConfig,
        transport: Arc<dyn Transport>,
    ) -> Result<ReplicatedTopic<F>, ReplicaError> {
        let raft_config = Arc::new(config.raft_config(topic)?);
        let storage = |e: &dyn std::fmt::Display| ReplicaError::Storage(e.to_string());
        let log = LogStore::open(fs.clone(), &dir.join("raft"), config.raft_log_config())
            .map_err(|e| storage(&e))?;
        let blank = log.is_blank();
        let committed = StateMachine::open(
            fs,
            &dir.join("committed"),
            config.committed_log_config(),
            config.max_snapshot_bytes,
        )
        .map_err(|e| storage(&e))?;
        let network = NetworkFactory::new(
            id,
            Arc::clone(&transport),
            config.max_frame_bytes,
            config.heartbeat,
        );
        let raft = Raft::new(id, raft_config, network, log, committed.clone())
            .await
            .map_err(stopped)?;
        let guard = Arc::new(VoteGuard::new(blank));
        if blank {
            raft.runtime_config().elect(false);
        }
        let server = RpcServer::new(
            raft.clone(),
            Arc::clone(&guard),
            config.max_frame_bytes,
            config.max_snapshot_bytes,
        );
        Ok(ReplicatedTopic {
            id,
            raft,
            committed,
            server,
            guard,
            max_record: config.max_record_bytes as usize,
            transport,
            max_frame: config.max_frame_bytes,
        })
    }

    /// Makes the committed log's retention follow `source` from its next apply on (see
    /// `state_machine`, "Retention"): a retention changed while the replica is open.
    pub fn follow_retention(&self, source: Arc<dyn starling_storage::RetentionSource>) {
        self.committed.follow_retention(source);
    }

    /// Bootstraps a new topic with `members` as its voters. Call it once, on one replica,
    /// when the topic is created; the others learn the membership from it (and call
    /// [`ReplicatedTopic::founding`]).
    pub async fn initialize(&self, members: BTreeMap<NodeId, Node>) -> Result<(), ReplicaError> {
        self.guard.lift(&self.raft);
        self.raft
            .initialize(members)
            .await
            .map_err(|e| ReplicaError::Membership(e.to_string()))
    }

    /// Creates the topic with `members` as its voters if it is new, from the replica that
    /// should bootstrap it (the broker's: the first of the topic's placement order). New
    /// means that neither this replica nor any other member holds Raft state of the topic
    /// ([`Rpc::Probe`]): every other member must answer, so a replica whose volume was lost
    /// never bootstraps a second history beside the one its peers hold (it is caught up
    /// instead). After bootstrapping, the others are told they are founding voters
    /// ([`Rpc::Found`], best effort: one not told lifts its guard once caught up).
    pub async fn create(&self, members: BTreeMap<NodeId, Node>) -> Result<Created, ReplicaError> {
        if crate::rpc::holds_state(&self.raft) {
            return Ok(Created::Exists);
        }
        let others: Vec<NodeId> = members.keys().copied().filter(|m| *m != self.id).collect();
        for peer in &others {
            match self.call(*peer, &Rpc::Probe).await? {
                RpcReply::Probe(false) => {}
                RpcReply::Probe(true) => return Ok(Created::Exists),
                _ => return Err(ReplicaError::Membership("probe: unexpected reply".into())),
            }
        }
        self.guard.lift(&self.raft);
        match self.raft.initialize(members).await {
            Ok(()) => {}
            // The Raft core holds a log or a vote already: it publishes its metrics after its
            // own state changes, so `holds_state` above can still read them from before (a
            // second `create` right after the first). The topic exists.
            Err(openraft::error::RaftError::APIError(
                openraft::error::InitializeError::NotAllowed(_),
            )) => return Ok(Created::Exists),
            Err(e) => return Err(ReplicaError::Membership(e.to_string())),
        }
        for peer in &others {
            let _ = self.call(*peer, &Rpc::Found).await;
        }
        Ok(Created::Bootstrapped)
    }

    async fn call(&self, peer: NodeId, rpc: &Rpc) -> Result<RpcReply, ReplicaError> {
        let frame = codec::encode_frame(rpc, self.max_frame)?;
        let reply = self
            .transport
            .call(self.id, peer, frame)
            .await
            .map_err(|e| ReplicaError::Unreachable(e.to_string()))?;
        Ok(codec::decode_frame(&reply, self.max_frame)?)
    }

    /// Declares this replica one of the topic's founding voters, blank because the topic is
    /// new (not because its volume was lost): it votes from the start. See [`crate::guard`].
    pub fn founding(&self) {
        self.guard.lift(&self.raft);
    }

    /// This replica's id.
    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Whether this replica started blank and is still catching up before it votes.
    pub fn is_catching_up(&self) -> bool {
        self.guard.is_active()
    }

    /// Publishes one batch of messages; resolves with its position in the committed log once
    /// it is committed (see the module doc), or [`ReplicaError::NotLeader`].
    pub async fn publish<M: Into<bytes::Bytes>>(
        &self,
        messages: impl IntoIterator<Item = M>,
    ) -> Result<Position, ReplicaError> {
        self.submit(messages).await?.committed().await
    }

    /// Hands one batch of messages to Raft and returns as soon as it is queued for the log,
    /// before it commits: [`Pending::committed`] resolves like [`ReplicatedTopic::publish`].
    /// Batches submitted one after another (by one task, each `submit` awaited before the
    /// next) take consecutive places in the log, in that order, so a proposer can keep
    /// several entries in flight and still complete them in order. The messages are not
    /// copied until the entry is encoded into the Raft log (a `Bytes` each, or a `Vec<u8>`).
    pub async fn submit<M: Into<bytes::Bytes>>(
        &self,
        messages: impl IntoIterator<Item = M>,
    ) -> Result<Pending, ReplicaError> {
        self.submit_with_headers(messages, bytes::Bytes::new())
            .await
    }

    /// [`ReplicatedTopic::submit`] of messages with their `headers` (kept and returned as
    /// they are, [`Batch::headers`]; empty for none).
    pub async fn submit_with_headers<M: Into<bytes::Bytes>>(
        &self,
        messages: impl IntoIterator<Item = M>,
        headers: bytes::Bytes,
    ) -> Result<Pending, ReplicaError> {
        let batch = Batch::with_headers(messages, headers);
        let messages = &batch.messages;
        let max = self.max_record.saturating_sub(ENTRY_OVERHEAD);
        let len = entry_codec::batch_len(&batch);
        if len > max {
            return Err(ReplicaError::TooLarge { len, max });
        }
        // A peer that reads only JSON gets the entry as JSON (base64 payloads, 4 bytes per 3):
        // that must fit a stored entry too.
        let base64 = |n: usize| n.div_ceil(3).saturating_mul(4).saturating_add(3);
        let json = messages
            .iter()
            .map(|m| base64(m.len()))
            .fold(64usize, usize::saturating_add)
            .saturating_add(base64(batch.headers.len()) + 16);
        if json > max {
            return Err(ReplicaError::TooLarge { len: json, max });
        }
        let rx = self.raft.client_write_ff(batch).await.map_err(stopped)?;
        Ok(Pending { rx })
    }

    /// Up to `max` committed publishes from index `from` on (the oldest retained if `from`
    /// is older): only what this replica has applied, the high-water mark.
    pub fn read_committed(&self, from: u64, max: usize) -> Result<Vec<Committed>, ReplicaError> {
        self.committed
            .read(from, max)
            .map_err(|e| ReplicaError::Storage(e.to_string()))
    }

    /// The headers of the committed publishes applied here at or after `since_ms`, with when
    /// each was applied, at most `max` (see [`StateMachine::headers_since`]).
    pub fn headers_since(
        &self,
        since_ms: u64,
        max: usize,
    ) -> Result<Vec<(u64, bytes::Bytes)>, ReplicaError> {
        self.committed
            .headers_since(since_ms, max)
            .map_err(|e| ReplicaError::Storage(e.to_string()))
    }

    /// What this replica knows of the topic now.
    pub fn status(&self) -> TopicStatus {
        let m = self.raft.metrics().borrow().clone();
        let membership = m.membership_config.membership();
        TopicStatus {
            id: self.id,
            leader: m.current_leader,
            term: m.current_term,
            is_leader: m.state == ServerState::Leader,
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            applied: m.last_applied.map(|l| l.index),
            last_log: m.last_log_index,
            leader_commit: self.guard.leader_commit(),
            stopped: m.running_state.as_ref().err().map(ToString::to_string),
            matched: m
                .replication
                .iter()
                .flatten()
                .map(|(id, log)| (*id, log.as_ref().map(|l| l.index)))
                .collect(),
        }
    }

    /// The term this replica leads in, if it is the leader (cheap: no copy of the metrics).
    pub fn leader_term(&self) -> Option<u64> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        (m.state == ServerState::Leader).then_some(m.current_term)
    }

    /// The index and term of the last entry this replica applied (its high-water mark), if
    /// any.
    pub fn applied_id(&self) -> Option<(u64, u64)> {
        let metrics = self.raft.metrics();
        let m = metrics.borrow();
        m.last_applied.map(|l| (l.index, l.leader_id.term))
    }

    /// Waits until this replica has applied index `index`, up to `timeout`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), ReplicaError> {
        self.raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "wait_applied")
            .await
            .map(|_| ())
            .map_err(stopped)
    }

    /// Adds replica `id` at `node`: as a learner until it has caught up with the leader's
    /// log (through replication, or a snapshot if the log was purged), then as a voter.
    /// Call on the leader.
    pub async fn add_replica(&self, id: NodeId, node: Node) -> Result<(), ReplicaError> {
        self.raft
            .add_learner(id, node, true)
            .await
            .map_err(write_error)?;
        self.raft
            .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
            .await
            .map_err(write_error)?;
        Ok(())
    }

    /// Removes replica `id` from the topic (it stops receiving the log). Call on the leader.
    pub async fn remove_replica(&self, id: NodeId) -> Result<(), ReplicaError> {
        self.raft
            .change_membership(ChangeMembers::RemoveVoters(BTreeSet::from([id])), false)
            .await
            .map_err(write_error)?;
        Ok(())
    }

    /// The receiving side of this replica's RPCs: what the broker's peer link (or
    /// [`crate::SimNet`]) hands each request frame to.
    pub fn server(&self) -> RpcServer {
        self.server.clone()
    }

    /// Stops this replica's Raft (its files stay).
    pub async fn shutdown(&self) -> Result<(), ReplicaError> {
        self.raft.shutdown().await.map_err(stopped)
    }
}
