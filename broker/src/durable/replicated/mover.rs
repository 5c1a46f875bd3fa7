//! The mover: keeps one replicated topic's replica set equal to its placement, the first
//! `durable_replicas` members of its rendezvous order over the current member list, through
//! openraft's membership change (`starling_replica::moves`). One mover runs beside every
//! replica open here; only the one on the Raft leader changes anything.
//!
//! On every membership change of the cluster, and every [`CHECK_EVERY`] (so a move cut
//! short by a leader change or a failed step goes on under the next leader: each leader
//! compares the desired set with the membership it sees, nothing else is remembered), the
//! leader takes the next step of [`plan`]:
//!
//! 1. a membership change not committed yet: wait (openraft refuses a second one);
//! 2. members of the desired set not in the membership join as **learners** (they get the
//!    log, or a snapshot when it was purged; they do not vote). The first member of the
//!    desired set joins after the others hold the log: it is the one that would create the
//!    topic (`ReplicatedTopic::create`) if it found every other replica of the set blank;
//! 3. once every new learner is caught up (within [`CAUGHT_UP_LAG`] entries of the leader's
//!    log) and at least a quorum of the desired set is, the voters are **replaced** through a
//!    joint configuration (openraft commits the joint one, then the new one); the voters
//!    that leave stay learners, so they receive the entry that demoted them. A new set whose
//!    caught-up members are fewer than its quorum is never entered, so no change leaves the
//!    topic with fewer caught-up voters than a quorum;
//! 4. learners outside the desired set are **dropped** once they have held the entry that
//!    demoted them for [`DROP_AFTER`] (the heartbeats in between tell them it committed, so
//!    they can see themselves out, below), or after [`LEARNER_GRACE`], for one that is down.
//!
//! One move at a time per topic (the steps are sequential here, and openraft refuses a change
//! while another is uncommitted); at most `max_concurrent_replica_moves` moves at a time on
//! this broker (the number of topics grows with clients; each move may send a snapshot): a
//! move past it waits for a permit, counted as `deferred`. A move that does not finish
//! within [`MOVE_TIMEOUT`], or whose step fails, is counted `failed` and tried again after
//! [`RETRY_AFTER`]. A move whose desired set changes before it ends (another membership
//! change while its last learners are still being dropped) goes on towards the new set,
//! counted `retargeted`. `starling_replica_moves_total{outcome}` counts `started`,
//! `retargeted`, `completed`, `failed` and `deferred` on the broker whose replica led the move.
//!
//! On a replica that is not the leader, the mover watches for its own removal: once this
//! replica is not a voter of a committed membership (a learner the leader is about to drop)
//! and not in the desired set as this broker sees it, for [`REMOVE_GRACE`], it tells the
//! topic task, which closes the replica and deletes its files (`removal`). A learner's copy
//! counts towards no commit and no election, so deleting it cannot lose an acknowledged
//! entry; a voter, or a replica whose membership is not committed, is never deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use starling_replica::{MembershipView, Node, NodeId, ReplicatedTopic, StepError};
use starling_storage::RealFs;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;

/// How often a mover compares the desired set with the membership.
pub const CHECK_EVERY: Duration = Duration::from_millis(250);
/// A learner within this many entries of the leader's last index is caught up.
pub const CAUGHT_UP_LAG: u64 = 64;
/// How long a leaving learner holds the entry that demoted it before it is dropped.
pub const DROP_AFTER: Duration = Duration::from_secs(1);
/// A learner outside the desired set that has not received its demotion in this time (it is
/// down) is dropped anyway.
pub const LEARNER_GRACE: Duration = Duration::from_secs(10);
/// How long a replica must see itself removed before it deletes its files.
pub const REMOVE_GRACE: Duration = Duration::from_secs(1);
/// The most one move may take before it is counted failed and started again.
pub const MOVE_TIMEOUT: Duration = Duration::from_secs(120);
/// The most one step (one openraft call) may take.
pub const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// After a failed move or step, the wait before the next attempt.
pub const RETRY_AFTER: Duration = Duration::from_secs(1);

/// `starling_replica_moves_total{outcome}`: a move began (this leader found the membership
/// different from the desired set and took a permit).
pub const STARTED: &str = "started";
/// The committed membership reached the desired set.
pub const COMPLETED: &str = "completed";
/// A step failed or the move timed out (or this replica stopped leading before it ended); it
/// is tried again.
pub const FAILED: &str = "failed";
/// No permit was free (`max_concurrent_replica_moves`): the move waits.
pub const DEFERRED: &str = "deferred";
/// A move under way found a new desired set and goes there instead (one move, two targets:
/// it ends with one `completed`).
pub const RETARGETED: &str = "retargeted";
/// Every outcome, for pre-creating the series.
pub const OUTCOMES: [&str; 5] = [STARTED, RETARGETED, COMPLETED, FAILED, DEFERRED];

/// The next step towards a desired replica set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// The committed membership is the desired set.
    Done,
    /// Nothing to do yet.
    Wait(&'static str),
    /// Add these as learners.
    AddLearners(BTreeSet<NodeId>),
    /// Make the desired set the voters (joint consensus).
    ReplaceVoters(BTreeSet<NodeId>),
    /// Remove these learners.
    DropLearners(BTreeSet<NodeId>),
}

/// A majority of a set of `n` voters.
fn quorum(n: usize) -> usize {
    n / 2 + 1
}

/// The next step from `view` (the leader's) towards `desired` (in placement order); only the
/// learners in `droppable` may be dropped (the mover's timing, see the module doc).
pub fn plan(view: &MembershipView, desired: &[NodeId], droppable: &BTreeSet<NodeId>) -> Step {
    let want: BTreeSet<NodeId> = desired.iter().copied().collect();
    if !view.committed {
        return Step::Wait("a membership change is not committed yet");
    }
    let known: BTreeSet<NodeId> = view.voters.union(&view.learners).copied().collect();
    let mut missing: BTreeSet<NodeId> = want.difference(&known).copied().collect();
    if !missing.is_empty() {
        if let Some(first) = desired.first()
            && missing.len() > 1
        {
            missing.remove(first);
        } else if let Some(first) = desired.first()
            && missing.contains(first)
        {
            // The first member joins last: every other new member must hold the log first.
            let others_blank = want
                .iter()
                .filter(|id| *id != first && view.learners.contains(id))
                .any(|id| !view.caught_up(*id, CAUGHT_UP_LAG));
            if others_blank {
                return Step::Wait("new learners are catching up");
            }
        }
        return Step::AddLearners(missing);
    }
    if view.joint || view.voters != want {
        if want
            .iter()
            .any(|id| !view.voters.contains(id) && !view.caught_up(*id, CAUGHT_UP_LAG))
        {
            return Step::Wait("new learners are catching up");
        }
        let caught = want
            .iter()
            .filter(|id| view.caught_up(**id, CAUGHT_UP_LAG))
            .count();
        if caught < quorum(want.len()) {
            return Step::Wait("fewer caught-up replicas in the new set than its quorum");
        }
        return Step::ReplaceVoters(want);
    }
    let extra: BTreeSet<NodeId> = view
        .learners
        .difference(&want)
        .copied()
        .filter(|id| droppable.contains(id))
        .collect();
    if !extra.is_empty() {
        return Step::DropLearners(extra);
    }
    if view.learners.is_subset(&want) {
        Step::Done
    } else {
        Step::Wait("leaving learners have not received their demotion")
    }
}

/// Whether this (non-leader) replica is out of its topic: not a voter of a committed
/// membership, and not in the desired set (`None`: too few members to say).
pub fn removed(view: &MembershipView, desired: Option<&[NodeId]>) -> bool {
    !view.is_leader
        && view.committed
        && !view.voters.contains(&view.id)
        && desired.is_some_and(|d| !d.contains(&view.id))
}

/// What a mover needs.
pub struct Mover {
    /// The replica.
    pub replica: Arc<ReplicatedTopic<RealFs>>,
    /// The topic.
    pub topic: Arc<str>,
    /// The desired replica set in placement order as this broker sees the member list now
    /// (`None`: fewer members than `durable_replicas`).
    pub desired: Desired,
    /// The broker's move permits (`max_concurrent_replica_moves`).
    pub permits: Arc<Semaphore>,
    /// `starling_replica_moves_total`, by outcome.
    pub moves: prometheus::IntCounterVec,
    /// The cluster's membership changes (`None`: only the periodic check).
    pub changes: Option<watch::Receiver<u64>>,
    /// Set when the topic task closes the replica.
    pub stopped: watch::Receiver<bool>,
    /// Set by the mover when this replica is out of the topic.
    pub removed: watch::Sender<bool>,
}

/// The desired replica set of a topic, asked afresh at every check.
pub type Desired = Box<dyn Fn() -> Option<Vec<NodeId>> + Send + Sync>;

/// A move in progress on this leader.
struct Moving {
    target: Vec<NodeId>,
    since: Instant,
    _permit: OwnedSemaphorePermit,
}

impl Mover {
    fn count(&self, outcome: &str) {
        self.moves.with_label_values(&[outcome]).inc();
    }

    /// Runs until the replica stops or is removed. A move under way when the replica stops is
    /// counted `failed`, so every `started` ends in one `completed` or one `failed`.
    pub async fn run(mut self) {
        if self.steer().await {
            self.count(FAILED);
            tracing::info!(topic = %self.topic, "replica move: the replica stopped before the move ended");
        }
    }

    /// The mover's loop; returns whether a move was under way when it ended.
    async fn steer(&mut self) -> bool {
        let mut tick = tokio::time::interval(CHECK_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut moving: Option<Moving> = None;
        let mut deferred = false;
        let mut retry_at: Option<Instant> = None;
        let mut leaving_since: BTreeMap<NodeId, Instant> = BTreeMap::new();
        let mut holding_since: BTreeMap<NodeId, Instant> = BTreeMap::new();
        let mut removed_since: Option<Instant> = None;
        let mut changes = self.changes.take();
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                r = async { match changes.as_mut() {
                    Some(c) => c.changed().await,
                    None => std::future::pending().await,
                } } => if r.is_err() { changes = None },
                r = self.stopped.changed() => if r.is_err() { return moving.is_some() },
            }
            if *self.stopped.borrow() || self.replica.status().stopped.is_some() {
                return moving.is_some();
            }
            let view = self.replica.membership_view();
            let desired = (self.desired)();
            if !view.is_leader {
                if moving.take().is_some() {
                    self.count(FAILED);
                    tracing::info!(topic = %self.topic, "replica move: no longer the leader here; the next leader goes on");
                }
                deferred = false;
                leaving_since.clear();
                holding_since.clear();
                if removed(&view, desired.as_deref()) {
                    let since = *removed_since.get_or_insert_with(Instant::now);
                    if since.elapsed() >= REMOVE_GRACE {
                        tracing::info!(topic = %self.topic, replica = view.id, voters = ?view.voters, "replica move: this replica left the topic; removing it");
                        let _ = self.removed.send(true);
                        return false;
                    }
                } else {
                    removed_since = None;
                }
                continue;
            }
            removed_since = None;
            let Some(desired) = desired else { continue };
            if retry_at.is_some_and(|at| Instant::now() < at) {
                continue;
            }
            let now = Instant::now();
            let want: BTreeSet<NodeId> = desired.iter().copied().collect();
            leaving_since.retain(|id, _| view.learners.contains(id) && !want.contains(id));
            holding_since
                .retain(|id, _| leaving_since.contains_key(id) && view.holds_membership(*id));
            for id in view.learners.difference(&want) {
                leaving_since.entry(*id).or_insert(now);
                if view.holds_membership(*id) {
                    holding_since.entry(*id).or_insert(now);
                }
            }
            let droppable: BTreeSet<NodeId> = leaving_since
                .iter()
                .filter(|(id, at)| {
                    now.duration_since(**at) >= LEARNER_GRACE
                        || holding_since
                            .get(id)
                            .is_some_and(|h| now.duration_since(*h) >= DROP_AFTER)
                })
                .map(|(id, _)| *id)
                .collect();
            let step = plan(&view, &desired, &droppable);
            if step == Step::Done {
                if moving.take().is_some() {
                    self.count(COMPLETED);
                    tracing::info!(topic = %self.topic, voters = ?view.voters, "replica move: completed");
                }
                deferred = false;
                continue;
            }
            if moving.is_none() {
                match Arc::clone(&self.permits).try_acquire_owned() {
                    Ok(permit) => {
                        self.count(STARTED);
                        deferred = false;
                        tracing::info!(topic = %self.topic, from = ?view.voters, to = ?desired, "replica move: started");
                        moving = Some(Moving {
                            target: desired.clone(),
                            since: now,
                            _permit: permit,
                        });
                    }
                    Err(_) => {
                        if !deferred {
                            self.count(DEFERRED);
                            deferred = true;
                        }
                        continue;
                    }
                }
            }
            if let Some(m) = moving.as_mut() {
                if m.target != desired {
                    tracing::info!(topic = %self.topic, to = ?desired, "replica move: the desired set changed; moving there instead");
                    m.target = desired.clone();
                    self.count(RETARGETED);
                }
                if m.since.elapsed() >= MOVE_TIMEOUT {
                    tracing::warn!(topic = %self.topic, ?step, "replica move: timed out; trying again");
                    moving = None;
                    self.count(FAILED);
                    retry_at = Some(now + RETRY_AFTER);
                    continue;
                }
            }
            if let Err(e) = self.take(step).await {
                tracing::warn!(topic = %self.topic, error = %e, "replica move: a step failed; trying again");
                moving = None;
                self.count(FAILED);
                retry_at = Some(Instant::now() + RETRY_AFTER);
            }
        }
    }

    /// Takes one step (within [`STEP_TIMEOUT`]).
    async fn take(&self, step: Step) -> Result<(), MoveError> {
        let call = async {
            match step {
                Step::Done | Step::Wait(_) => Ok(()),
                Step::AddLearners(ids) => {
                    tracing::info!(topic = %self.topic, learners = ?ids, "replica move: adding learners");
                    let nodes = ids
                        .into_iter()
                        .map(|id| (id, Node::new(format!("{id:016x}"))))
                        .collect();
                    self.replica.add_learners(nodes).await
                }
                Step::ReplaceVoters(voters) => {
                    tracing::info!(topic = %self.topic, ?voters, "replica move: replacing the voters");
                    self.replica.replace_voters(voters).await
                }
                Step::DropLearners(ids) => {
                    tracing::info!(topic = %self.topic, learners = ?ids, "replica move: dropping learners");
                    self.replica.drop_learners(ids).await
                }
            }
        };
        match tokio::time::timeout(STEP_TIMEOUT, call).await {
            Ok(Ok(())) => Ok(()),
            // A change still being committed (by this leader or its predecessor): wait.
            Ok(Err(StepError::InProgress)) => Ok(()),
            Ok(Err(e)) => Err(MoveError::Step(e)),
            Err(_) => Err(MoveError::Timeout(STEP_TIMEOUT)),
        }
    }
}

/// Why a step of a move failed.
#[derive(Debug, thiserror::Error)]
pub enum MoveError {
    /// openraft refused or failed the change (not the leader any more, stopped, ...).
    #[error(transparent)]
    Step(#[from] StepError),
    /// The step did not finish in time (its change may still commit).
    #[error("the step did not finish within {0:?}")]
    Timeout(Duration),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(voters: &[u64], learners: &[u64], matched: &[(u64, u64)]) -> MembershipView {
        MembershipView {
            id: 1,
            is_leader: true,
            voters: voters.iter().copied().collect(),
            learners: learners.iter().copied().collect(),
            joint: false,
            index: Some(10),
            committed: true,
            last_log: Some(100),
            matched: matched.iter().map(|&(id, m)| (id, Some(m))).collect(),
        }
    }

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn the_desired_set_reached_is_done() {
        let v = view(&[1, 2, 3], &[], &[(2, 100), (3, 100)]);
        assert_eq!(plan(&v, &[2, 1, 3], &BTreeSet::new()), Step::Done);
    }

    #[test]
    fn an_uncommitted_change_is_waited_for() {
        let mut v = view(&[1, 2, 3], &[], &[]);
        v.committed = false;
        assert!(matches!(
            plan(&v, &[1, 2, 4], &BTreeSet::new()),
            Step::Wait(_)
        ));
    }

    #[test]
    fn new_members_join_as_learners_the_first_of_the_set_last() {
        let v = view(&[1, 2, 3], &[], &[(2, 100), (3, 100)]);
        // 4 is first of the new set: 5 joins first.
        assert_eq!(
            plan(&v, &[4, 5, 1], &BTreeSet::new()),
            Step::AddLearners(set(&[5]))
        );
        // 5 is a learner still behind: 4 waits.
        let v = view(&[1, 2, 3], &[5], &[(2, 100), (3, 100), (5, 0)]);
        assert!(matches!(
            plan(&v, &[4, 5, 1], &BTreeSet::new()),
            Step::Wait(_)
        ));
        // 5 caught up: 4 joins.
        let v = view(&[1, 2, 3], &[5], &[(2, 100), (3, 100), (5, 99)]);
        assert_eq!(
            plan(&v, &[4, 5, 1], &BTreeSet::new()),
            Step::AddLearners(set(&[4]))
        );
        // A first member that is the only new one joins at once.
        let v = view(&[1, 2, 3], &[], &[(2, 100), (3, 100)]);
        assert_eq!(
            plan(&v, &[4, 1, 2], &BTreeSet::new()),
            Step::AddLearners(set(&[4]))
        );
    }

    #[test]
    fn voters_are_replaced_only_once_the_learners_caught_up() {
        let behind = view(&[1, 2, 3], &[4], &[(2, 100), (3, 100), (4, 10)]);
        assert!(matches!(
            plan(&behind, &[4, 1, 2], &BTreeSet::new()),
            Step::Wait(_)
        ));
        let caught = view(&[1, 2, 3], &[4], &[(2, 100), (3, 100), (4, 90)]);
        assert_eq!(
            plan(&caught, &[4, 1, 2], &BTreeSet::new()),
            Step::ReplaceVoters(set(&[1, 2, 4]))
        );
    }

    #[test]
    fn a_new_set_without_a_caught_up_quorum_is_never_entered() {
        // 2 and 3 down (far behind): of the new set {1, 2, 4} only 1 and 4 are caught up:
        // a quorum, so it may go on; of {2, 3, 4} only 4 is: it waits.
        let v = view(&[1, 2, 3], &[4], &[(2, 0), (3, 0), (4, 100)]);
        assert_eq!(
            plan(&v, &[4, 1, 2], &BTreeSet::new()),
            Step::ReplaceVoters(set(&[1, 2, 4]))
        );
        assert!(matches!(
            plan(&v, &[4, 2, 3], &BTreeSet::new()),
            Step::Wait(_)
        ));
    }

    #[test]
    fn a_joint_membership_is_finished() {
        let mut v = view(&[1, 2, 3, 4], &[], &[(2, 100), (3, 100), (4, 100)]);
        v.joint = true;
        assert_eq!(
            plan(&v, &[1, 2, 4], &BTreeSet::new()),
            Step::ReplaceVoters(set(&[1, 2, 4]))
        );
    }

    #[test]
    fn leaving_learners_are_dropped_only_when_droppable() {
        let v = view(&[1, 2, 4], &[3, 5], &[(2, 100), (4, 100), (3, 10), (5, 2)]);
        // 3 holds the demoting entry (index 10), 5 does not.
        assert!(v.holds_membership(3) && !v.holds_membership(5) && v.holds_membership(1));
        assert!(matches!(
            plan(&v, &[1, 2, 4], &BTreeSet::new()),
            Step::Wait(_)
        ));
        assert_eq!(
            plan(&v, &[1, 2, 4], &set(&[3])),
            Step::DropLearners(set(&[3]))
        );
        // A learner of the desired set is never dropped.
        let v = view(&[1, 2, 4], &[], &[(2, 100), (4, 100)]);
        assert_eq!(plan(&v, &[1, 2, 4], &set(&[4])), Step::Done);
    }

    #[test]
    fn only_a_non_voter_of_a_committed_membership_outside_the_set_is_removed() {
        let mut v = view(&[2, 3, 4], &[1], &[]);
        v.is_leader = false;
        assert!(removed(&v, Some(&[2, 3, 4])));
        // Still wanted here (the member list here says so): kept.
        assert!(!removed(&v, Some(&[1, 2, 3])));
        // Too few members to say: kept.
        assert!(!removed(&v, None));
        // Not committed: kept.
        v.committed = false;
        assert!(!removed(&v, Some(&[2, 3, 4])));
        // A voter: kept.
        let mut v = view(&[1, 2, 3], &[], &[]);
        v.is_leader = false;
        assert!(!removed(&v, Some(&[2, 3, 4])));
        // A blank replica (no membership yet): kept.
        let mut v = view(&[], &[], &[]);
        v.is_leader = false;
        v.index = None;
        v.committed = false;
        assert!(!removed(&v, Some(&[2, 3, 4])));
    }
}
