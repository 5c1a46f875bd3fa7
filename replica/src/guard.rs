//! The vote guard of a replica that starts with an empty volume ([`VoteGuard`]).
//!
//! Raft assumes a voter never forgets its log or its vote. A replica that lost its volume
//! and re-joins under the same id has forgotten both: if it voted in an election at once,
//! a candidate missing committed entries could win with its vote (say, three replicas, an
//! entry acknowledged by the old leader and this replica, the old leader down: the third
//! replica and the emptied one would elect a leader without the entry). So a replica that
//! opens blank takes no part in elections (it starts none, and drops vote requests, as a
//! lost message) until it has applied everything the leader had committed when it first
//! heard from it: from then on its log holds every entry that could have counted its vote
//! or its acknowledgement before the loss. Replication, snapshots and acknowledgements of
//! new entries (which it fsyncs) are not held back.
//!
//! Replicas that are blank because the topic is being created are not guarded: the replica
//! that bootstraps it ([`crate::ReplicatedTopic::initialize`]) and the other founding
//! replicas ([`crate::ReplicatedTopic::founding`]) lift the guard.
//!
//! The guard sees every leader's append, so it also keeps, guarded or not, the newest commit
//! index an append carried here ([`VoteGuard::leader_commit`], in
//! [`crate::TopicStatus::leader_commit`]): openraft tells a follower its own applied index but
//! not the leader's commit index, and the broker compares the two to tell a replica in sync
//! from one still catching up (its readiness).

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::types::Raft;

#[derive(Debug, Default)]
struct State {
    active: bool,
    /// The leader's commit index at first contact (`Some(None)`: it had committed nothing).
    target: Option<Option<u64>>,
}

/// See the module doc.
#[derive(Debug, Default)]
pub struct VoteGuard {
    state: Mutex<State>,
    /// The newest `leader_commit` seen, plus one (0: none seen since the replica opened).
    leader_commit: AtomicU64,
}

impl VoteGuard {
    /// A guard, active or not.
    pub fn new(active: bool) -> VoteGuard {
        VoteGuard {
            state: Mutex::new(State {
                active,
                target: None,
            }),
            leader_commit: AtomicU64::new(0),
        }
    }

    /// Whether the guard still holds.
    pub fn is_active(&self) -> bool {
        self.state.lock().active
    }

    /// Lifts the guard and lets `raft` start elections.
    pub fn lift(&self, raft: &Raft) {
        let mut s = self.state.lock();
        if s.active {
            s.active = false;
            raft.runtime_config().elect(true);
        }
    }

    /// Notes a leader's append carrying `leader_commit`; the first one sets the target.
    pub fn saw_leader(&self, leader_commit: Option<u64>) {
        if let Some(c) = leader_commit {
            // Commit indexes only grow; an older leader's smaller one changes nothing.
            self.leader_commit
                .fetch_max(c.saturating_add(1), Ordering::AcqRel);
        }
        let mut s = self.state.lock();
        if s.active && s.target.is_none() {
            s.target = Some(leader_commit);
        }
    }

    /// The newest commit index a leader's append carried to this replica since it opened
    /// (`None`: no leader's append with a commit index reached it yet).
    pub fn leader_commit(&self) -> Option<u64> {
        self.leader_commit.load(Ordering::Acquire).checked_sub(1)
    }

    /// Whether a vote request may reach `raft`: the guard is lifted, or lifts now because
    /// the replica applied up to its target.
    pub fn allows_vote(&self, raft: &Raft) -> bool {
        let target = {
            let s = self.state.lock();
            if !s.active {
                return true;
            }
            s.target
        };
        let Some(target) = target else {
            return false;
        };
        let applied = raft.metrics().borrow().last_applied.map(|l| l.index);
        let caught_up = match target {
            None => true,
            Some(t) => applied.is_some_and(|a| a >= t),
        };
        if caught_up {
            self.lift(raft);
        }
        caught_up
    }
}
