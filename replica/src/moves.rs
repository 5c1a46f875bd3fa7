//! Moving a topic's replica set through openraft's membership change, step by step, for a
//! caller that decides the steps (the broker's mover): what the replica sees of the
//! membership ([`MembershipView`]), and the three steps a move is made of, each one call
//! into openraft that returns without waiting for anything but its own commit:
//!
//! - [`ReplicatedTopic::add_learners`]: the new replicas join as learners (they get the log,
//!   or a snapshot if the log was purged, and do not vote);
//! - [`ReplicatedTopic::replace_voters`]: joint consensus from the old voters to the new ones
//!   (openraft commits the joint configuration, then the new one); voters that leave stay as
//!   learners, so they receive the entry that removed them and can see it committed;
//! - [`ReplicatedTopic::drop_learners`]: learners outside the set are removed.
//!
//! No election, commit or membership logic is written here: each step is refused by openraft
//! while a previous change is not committed (`InProgress`), and only the leader can make one.

use std::collections::{BTreeMap, BTreeSet};

use openraft::ChangeMembers;
use openraft::error::{ChangeMembershipError, ClientWriteError, RaftError};
use starling_storage::Fs;

use crate::topic::ReplicatedTopic;
use crate::types::{Node, NodeId};

/// Why a step of a move was not taken.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StepError {
    /// A previous membership change is not committed yet: try again later.
    #[error("a membership change is in progress")]
    InProgress,
    /// This replica is not the leader (any more).
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader {
        /// The leader as this replica knows it.
        leader: Option<NodeId>,
    },
    /// openraft refused the change (a new voter that is not a learner, an empty set).
    #[error("membership change refused: {0}")]
    Refused(String),
    /// The replica's Raft stopped.
    #[error("replica stopped: {0}")]
    Stopped(String),
}

fn step_error(e: RaftError<NodeId, ClientWriteError<NodeId, Node>>) -> StepError {
    match e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => StepError::NotLeader {
            leader: f.leader_id,
        },
        RaftError::APIError(ClientWriteError::ChangeMembershipError(
            ChangeMembershipError::InProgress(_),
        )) => StepError::InProgress,
        RaftError::APIError(ClientWriteError::ChangeMembershipError(e)) => {
            StepError::Refused(e.to_string())
        }
        RaftError::Fatal(f) => StepError::Stopped(f.to_string()),
    }
}

/// The membership as one replica sees it, with the leader's replication progress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembershipView {
    /// This replica.
    pub id: NodeId,
    /// Whether this replica is the leader.
    pub is_leader: bool,
    /// Every voter of the effective membership (both halves of a joint one).
    pub voters: BTreeSet<NodeId>,
    /// Its learners.
    pub learners: BTreeSet<NodeId>,
    /// Whether the effective membership is a joint one (a change half done).
    pub joint: bool,
    /// The log index of the entry that set the effective membership (`None`: no membership
    /// yet, a blank replica).
    pub index: Option<u64>,
    /// Whether this replica has applied that entry: the membership is then committed (only
    /// committed entries are applied).
    pub committed: bool,
    /// The last index in this replica's log.
    pub last_log: Option<u64>,
    /// On the leader: the last index each other replica is known to hold.
    pub matched: BTreeMap<NodeId, Option<u64>>,
}

impl MembershipView {
    /// Whether `id` holds the log up to `lag` entries behind this (leader) replica's last
    /// index; this replica always does.
    pub fn caught_up(&self, id: NodeId, lag: u64) -> bool {
        if id == self.id {
            return true;
        }
        let Some(Some(matched)) = self.matched.get(&id) else {
            return false;
        };
        matched.saturating_add(lag) >= self.last_log.unwrap_or(0)
    }

    /// Whether `id` holds the entry that set the effective membership (a leaving replica
    /// that does has seen itself demoted to a learner).
    pub fn holds_membership(&self, id: NodeId) -> bool {
        if id == self.id {
            return true;
        }
        match (self.matched.get(&id), self.index) {
            (Some(Some(matched)), Some(index)) => *matched >= index,
            _ => false,
        }
    }
}

impl<F: Fs> ReplicatedTopic<F> {
    /// The membership as this replica sees it now.
    pub fn membership_view(&self) -> MembershipView {
        let m = self.raft.metrics().borrow().clone();
        let stored = &m.membership_config;
        let membership = stored.membership();
        let index = stored.log_id().as_ref().map(|l| l.index);
        MembershipView {
            id: self.id(),
            is_leader: m.state == openraft::ServerState::Leader,
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            joint: membership.get_joint_config().len() > 1,
            index,
            committed: index.is_some() && m.last_applied.map(|l| l.index) >= index,
            last_log: m.last_log_index,
            matched: m
                .replication
                .map(|r| {
                    r.into_iter()
                        .map(|(id, l)| (id, l.map(|l| l.index)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// On the leader: adds `nodes` as learners (one membership entry each), without waiting
    /// for them to catch up. A node already in the membership is left as it is.
    pub async fn add_learners(&self, nodes: BTreeMap<NodeId, Node>) -> Result<(), StepError> {
        for (id, node) in nodes {
            self.raft
                .change_membership(ChangeMembers::AddNodes(BTreeMap::from([(id, node)])), true)
                .await
                .map_err(step_error)?;
        }
        Ok(())
    }

    /// On the leader: makes `voters` the voters, through a joint configuration; the voters
    /// not in it stay as learners. Returns once the new configuration is committed. Every
    /// new voter must already be a learner.
    pub async fn replace_voters(&self, voters: BTreeSet<NodeId>) -> Result<(), StepError> {
        self.raft
            .change_membership(ChangeMembers::ReplaceAllVoters(voters), true)
            .await
            .map_err(step_error)?;
        Ok(())
    }

    /// On the leader: removes the learners `ids` from the membership (the leader stops
    /// sending them the log).
    pub async fn drop_learners(&self, ids: BTreeSet<NodeId>) -> Result<(), StepError> {
        self.raft
            .change_membership(ChangeMembers::RemoveNodes(ids), false)
            .await
            .map_err(step_error)?;
        Ok(())
    }
}
