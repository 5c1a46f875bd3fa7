//! Whether the replicas open on this broker are in sync with their topics' leaders
//! ([`ReplicaSync`]), which the broker's readiness waits for (`crate::health`). A rolling
//! restart (the StatefulSet's, one pod at a time) moves on to the next broker only once the
//! one it restarted is Ready (and stayed so for `minReadySeconds`): with this gate, that
//! broker's replicas have caught up by then, so every replicated topic keeps a caught-up
//! majority when the next broker stops.
//!
//! Per replica, a [`Tracker`] turns the replica's state ([`Observation`]) into a [`Verdict`]
//! (pure: the clock is passed in):
//! - the leader is in sync (it holds what it committed);
//! - a replica that holds no Raft state and has heard from no leader (a topic being created,
//!   a member outside the topic's Raft membership, a volume that was lost and no leader has
//!   reached yet) holds nothing a roll needs: it does not hold readiness, so the brokers of a
//!   topic that cannot be created yet (a replica missing) stay Ready;
//! - a replica that holds state but has heard from no leader since it opened waits for one
//!   (`NoLeader`); after a restart the leader reaches it within a heartbeat or two, and after
//!   a full restart the replicas elect one among themselves, which needs no readiness (the
//!   peer links reach pods that are not Ready, and the broker opens the replicas it finds on
//!   its volume at start, see `crate::broker`);
//! - a replica that has heard from a leader is in sync when it applies each commit index a
//!   leader's append carried here (`TopicStatus::leader_commit`) within [`MAX_LAG`] of first
//!   seeing it: the newest one is checked against the applied index at each observation,
//!   and a replica that took longer than that, or is still below it after that long, is
//!   catching up. (Under load the leader's commit moves on between any two appends, so
//!   "applied equals the newest commit seen" would flap.)
//! - a replica whose Raft stopped (a fatal storage error) is not in sync.
//!
//! [`run`] observes every open replica every [`EVERY`] and keeps the verdicts, which
//! `/readyz` (through [`ReadinessGate`]) and `/replicas` read. The topics the broker found
//! on its volume at start ([`ReplicaSync::expect`]) hold readiness until their replica is
//! open, for at most [`OPEN_WITHIN`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use starling_replica::{NodeId, TopicStatus};
use tokio::sync::watch;
use tokio::time::Instant;

use super::topic::Open;
use crate::durable::policy::Policies;
use crate::health::ReadinessGate;

/// How long a follower may take to apply a commit index it learned and still count as in
/// sync.
pub const MAX_LAG: Duration = Duration::from_secs(1);
/// How often [`run`] observes the replicas.
pub const EVERY: Duration = Duration::from_millis(100);
/// How long a topic found on the volume at start may take to open its replica before it no
/// longer holds readiness (it failed to open, e.g. the cluster has fewer members than
/// `durable_replicas`; the topic task logged why).
pub const OPEN_WITHIN: Duration = Duration::from_secs(30);

/// What the sync decision reads of a replica's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observation {
    /// This replica leads the topic.
    pub is_leader: bool,
    /// The last applied index.
    pub applied: Option<u64>,
    /// The newest commit index a leader's append carried here since the replica opened.
    pub leader_commit: Option<u64>,
    /// The replica holds Raft state (a log entry, or a term above 0).
    pub holds_state: bool,
    /// The replica's Raft stopped.
    pub stopped: bool,
}

impl Observation {
    /// What `status` says.
    pub fn of(status: &TopicStatus) -> Observation {
        Observation {
            is_leader: status.is_leader,
            applied: status.applied,
            leader_commit: status.leader_commit,
            holds_state: status.last_log.is_some() || status.term > 0,
            stopped: status.stopped.is_some(),
        }
    }
}

/// Where one replica stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Verdict {
    /// The leader, or a follower applying what the leader commits within [`MAX_LAG`].
    InSync,
    /// No Raft state and no leader heard from: nothing to catch up.
    Blank,
    /// Holds state, but no leader has reached it since it opened.
    NoLeader,
    /// Behind the leader's commit index (`target`) by more than [`MAX_LAG`].
    CatchingUp {
        /// Its applied index.
        applied: Option<u64>,
        /// The newest commit index a leader's append carried here.
        target: u64,
    },
    /// Its Raft stopped.
    Stopped,
}

impl Verdict {
    /// Whether this replica holds the broker's readiness.
    pub fn holds_readiness(self) -> bool {
        matches!(
            self,
            Verdict::NoLeader | Verdict::CatchingUp { .. } | Verdict::Stopped
        )
    }
}

/// One replica's sync state across observations (see the module doc).
#[derive(Debug, Default)]
pub struct Tracker {
    in_sync: bool,
    /// A commit index to apply, and when it was first seen.
    checkpoint: Option<(u64, Instant)>,
}

impl Tracker {
    /// The verdict on `o`, observed at `now`.
    pub fn observe(&mut self, o: &Observation, now: Instant) -> Verdict {
        if o.stopped {
            *self = Tracker::default();
            return Verdict::Stopped;
        }
        if o.is_leader {
            self.in_sync = true;
            self.checkpoint = None;
            return Verdict::InSync;
        }
        let Some(target) = o.leader_commit else {
            // A former leader (deposed, no new leader's append yet) holds what it committed.
            return match (self.in_sync, o.holds_state) {
                (true, _) => Verdict::InSync,
                (false, true) => Verdict::NoLeader,
                (false, false) => Verdict::Blank,
            };
        };
        let applied_past = |index: u64| o.applied.is_some_and(|a| a >= index);
        match self.checkpoint {
            Some((index, since)) if !applied_past(index) => {
                if now.saturating_duration_since(since) > MAX_LAG {
                    self.in_sync = false;
                }
            }
            Some((_, since)) => {
                self.in_sync =
                    now.saturating_duration_since(since) <= MAX_LAG || applied_past(target);
                self.checkpoint = Some((target, now));
            }
            None => {
                self.in_sync = self.in_sync || applied_past(target);
                self.checkpoint = Some((target, now));
            }
        }
        if self.in_sync {
            Verdict::InSync
        } else {
            Verdict::CatchingUp {
                applied: o.applied,
                target,
            }
        }
    }
}

/// One open replica as `/replicas` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TopicSync {
    /// The topic.
    pub topic: String,
    /// This broker's replica id.
    pub replica: NodeId,
    /// The leader as this replica knows it.
    pub leader: Option<NodeId>,
    /// Whether this replica leads the topic.
    pub is_leader: bool,
    /// The current term.
    pub term: u64,
    /// The voters.
    pub voters: BTreeSet<NodeId>,
    /// The last applied index.
    pub applied: Option<u64>,
    /// The newest commit index a leader's append carried here.
    pub leader_commit: Option<u64>,
    /// Where it stands.
    pub sync: Verdict,
    /// The name of the topics document's policy that applies to the topic (`None`: none
    /// does; the knobs apply).
    pub policy: Option<String>,
    /// The replica count the topics document in force here (or `durable_replicas`) gives
    /// the topic.
    pub configured_replicas: u32,
    /// The voters of the topic's Raft membership as this replica knows it: the count the
    /// topic has now.
    pub current_replicas: usize,
}

impl TopicSync {
    /// `topic`'s replica in `status`, judged `sync`.
    pub fn of(topic: &str, status: &TopicStatus, sync: Verdict, policy: &Policies) -> TopicSync {
        let configured = policy.configured(topic);
        TopicSync {
            policy: configured.policy,
            configured_replicas: configured.replicas,
            current_replicas: status.voters.len(),
            topic: topic.to_string(),
            replica: status.id,
            leader: status.leader,
            is_leader: status.is_leader,
            term: status.term,
            voters: status.voters.clone(),
            applied: status.applied,
            leader_commit: status.leader_commit,
            sync,
        }
    }
}

#[derive(Default)]
struct Inner {
    topics: BTreeMap<String, TopicSync>,
    /// Topics found on the volume at start whose replica is not open yet, with the time
    /// they stop holding readiness.
    expected: BTreeMap<String, Instant>,
}

/// The latest verdicts on this broker's replicas (see the module doc).
#[derive(Default)]
pub struct ReplicaSync {
    inner: parking_lot::RwLock<Inner>,
}

impl ReplicaSync {
    /// An empty state: nothing holds readiness.
    pub fn new() -> Arc<ReplicaSync> {
        Arc::default()
    }

    /// Readiness also waits until each of `topics` (found on the volume at `now`) has its
    /// replica open, for at most [`OPEN_WITHIN`].
    pub fn expect(&self, topics: impl IntoIterator<Item = String>, now: Instant) {
        let mut inner = self.inner.write();
        for t in topics {
            inner.expected.insert(t, now + OPEN_WITHIN);
        }
    }

    /// Replaces the verdicts with `topics` (every replica open now), observed at `now`.
    pub fn update(&self, topics: BTreeMap<String, TopicSync>, now: Instant) {
        let mut inner = self.inner.write();
        inner.expected.retain(|t, until| {
            if topics.contains_key(t) {
                return false;
            }
            let waiting = now < *until;
            if !waiting {
                tracing::warn!(topic = %t, "replicated topic found on the volume did not open its replica in time; readiness no longer waits for it");
            }
            waiting
        });
        inner.topics = topics;
    }

    /// Every open replica's verdict, by topic.
    pub fn topics(&self) -> Vec<TopicSync> {
        self.inner.read().topics.values().cloned().collect()
    }

    /// Why readiness must wait, or `None`: the first replica that holds it, or a topic found
    /// on the volume whose replica is not open yet.
    pub fn why_not_ready(&self) -> Option<String> {
        let inner = self.inner.read();
        if let Some(t) = inner.topics.values().find(|t| t.sync.holds_readiness()) {
            return Some(match t.sync {
                Verdict::NoLeader => format!("replica of `{}`: waiting for a leader", t.topic),
                Verdict::CatchingUp { applied, target } => format!(
                    "replica of `{}`: catching up (applied {}, leader's commit {target})",
                    t.topic,
                    applied.map_or_else(|| "none".to_string(), |a| a.to_string())
                ),
                _ => format!("replica of `{}`: stopped", t.topic),
            });
        }
        inner
            .expected
            .keys()
            .next()
            .map(|t| format!("replica of `{t}` found on the volume: not open yet"))
    }
}

impl ReadinessGate for ReplicaSync {
    fn blocker(&self) -> Option<String> {
        self.why_not_ready()
    }
}

/// Observes every replica in `open` every [`EVERY`] into `sync`, until `stop` turns true.
/// Its trackers follow the open replicas, which the replica registry bounds (`max_topics`).
pub async fn run(
    open: Arc<Open>,
    sync: Arc<ReplicaSync>,
    policies: Arc<Policies>,
    mut stop: watch::Receiver<bool>,
) {
    let mut trackers: HashMap<Arc<str>, Tracker> = HashMap::new();
    let mut tick = tokio::time::interval(EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
        let replicas: Vec<_> = open
            .lock()
            .iter()
            .map(|(t, r)| (Arc::clone(t), Arc::clone(r)))
            .collect();
        trackers.retain(|t, _| replicas.iter().any(|(open, _)| open == t));
        let now = Instant::now();
        let mut topics = BTreeMap::new();
        for (topic, replica) in replicas {
            let status = replica.status();
            let verdict = trackers
                .entry(Arc::clone(&topic))
                .or_default()
                .observe(&Observation::of(&status), now);
            let report = TopicSync::of(&topic, &status, verdict, &policies);
            topics.insert(topic.to_string(), report);
        }
        sync.update(topics, now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn follower(applied: Option<u64>, leader_commit: Option<u64>) -> Observation {
        Observation {
            is_leader: false,
            applied,
            leader_commit,
            holds_state: true,
            stopped: false,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn the_leader_is_in_sync() {
        let mut t = Tracker::default();
        let o = Observation {
            is_leader: true,
            ..follower(Some(3), None)
        };
        assert_eq!(t.observe(&o, Instant::now()), Verdict::InSync);
    }

    #[test]
    fn a_blank_replica_no_leader_reached_holds_nothing() {
        let mut t = Tracker::default();
        let o = Observation {
            holds_state: false,
            ..follower(None, None)
        };
        let v = t.observe(&o, Instant::now());
        assert_eq!(v, Verdict::Blank);
        assert!(!v.holds_readiness());
    }

    #[test]
    fn a_replica_with_state_waits_for_a_leader() {
        let mut t = Tracker::default();
        let v = t.observe(&follower(Some(10), None), Instant::now());
        assert_eq!(v, Verdict::NoLeader);
        assert!(v.holds_readiness());
    }

    #[test]
    fn a_restarted_follower_is_catching_up_until_it_applied_the_leaders_commit() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        // Back with entries up to 10; the leader's append says 500 are committed.
        let v = t.observe(&follower(Some(10), Some(500)), t0);
        assert_eq!(
            v,
            Verdict::CatchingUp {
                applied: Some(10),
                target: 500
            }
        );
        // Still far behind after 3 s, while the leader commits more.
        let v = t.observe(&follower(Some(300), Some(520)), t0 + ms(3000));
        assert!(v.holds_readiness(), "{v:?}");
        // It reached 500 only now, long after first seeing it: not in sync yet, unless it
        // also applied the newest commit.
        let v = t.observe(&follower(Some(505), Some(560)), t0 + ms(6000));
        assert!(v.holds_readiness(), "{v:?}");
        // It applies the commit it saw last within MAX_LAG: in sync.
        let v = t.observe(&follower(Some(560), Some(570)), t0 + ms(6300));
        assert_eq!(v, Verdict::InSync);
    }

    #[test]
    fn a_follower_that_applied_the_newest_commit_is_in_sync_at_once() {
        let mut t = Tracker::default();
        let v = t.observe(&follower(Some(500), Some(500)), Instant::now());
        assert_eq!(v, Verdict::InSync);
    }

    #[test]
    fn a_follower_behind_within_max_lag_under_load_stays_in_sync() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        assert_eq!(
            t.observe(&follower(Some(100), Some(100)), t0),
            Verdict::InSync
        );
        // The leader's commit always a little ahead of what this replica applied, as under
        // steady load: every observation sees applied < the newest commit.
        let mut applied = 100;
        for step in 1..50u64 {
            let commit = applied + 5;
            let v = t.observe(&follower(Some(applied), Some(commit)), t0 + ms(step * 100));
            assert_eq!(v, Verdict::InSync, "step {step}");
            applied = commit;
        }
    }

    #[test]
    fn a_follower_that_stops_applying_falls_out_of_sync_after_max_lag() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        assert_eq!(
            t.observe(&follower(Some(100), Some(100)), t0),
            Verdict::InSync
        );
        assert_eq!(
            t.observe(&follower(Some(100), Some(120)), t0 + ms(100)),
            Verdict::InSync
        );
        // 120 not applied within MAX_LAG of first being seen.
        assert_eq!(
            t.observe(&follower(Some(110), Some(140)), t0 + ms(900)),
            Verdict::InSync
        );
        let v = t.observe(&follower(Some(110), Some(160)), t0 + ms(1200));
        assert_eq!(
            v,
            Verdict::CatchingUp {
                applied: Some(110),
                target: 160
            }
        );
    }

    #[test]
    fn a_deposed_leader_stays_in_sync_until_the_new_leader_reaches_it() {
        let t0 = Instant::now();
        let mut t = Tracker::default();
        let leader = Observation {
            is_leader: true,
            ..follower(Some(50), None)
        };
        assert_eq!(t.observe(&leader, t0), Verdict::InSync);
        assert_eq!(
            t.observe(&follower(Some(50), None), t0 + ms(100)),
            Verdict::InSync
        );
    }

    #[test]
    fn a_stopped_replica_holds_readiness() {
        let mut t = Tracker::default();
        let o = Observation {
            stopped: true,
            ..follower(Some(5), Some(5))
        };
        let v = t.observe(&o, Instant::now());
        assert_eq!(v, Verdict::Stopped);
        assert!(v.holds_readiness());
    }

    fn topic(name: &str, sync: Verdict) -> TopicSync {
        TopicSync {
            topic: name.into(),
            replica: 1,
            leader: Some(2),
            is_leader: false,
            term: 1,
            voters: BTreeSet::from([1, 2, 3]),
            applied: Some(1),
            leader_commit: Some(1),
            sync,
            policy: None,
            configured_replicas: 3,
            current_replicas: 3,
        }
    }

    #[test]
    fn readiness_waits_for_every_replica_and_for_the_topics_found_on_the_volume() {
        let t0 = Instant::now();
        let s = ReplicaSync::default();
        assert_eq!(s.why_not_ready(), None, "nothing open, nothing expected");
        s.expect(["a".to_string()], t0);
        assert!(s.why_not_ready().is_some_and(|w| w.contains("`a`")));
        // `a` opens, catching up; `b` is in sync.
        let behind = Verdict::CatchingUp {
            applied: Some(1),
            target: 9,
        };
        s.update(
            BTreeMap::from([
                ("a".to_string(), topic("a", behind)),
                ("b".to_string(), topic("b", Verdict::InSync)),
            ]),
            t0 + ms(500),
        );
        assert!(s.why_not_ready().is_some_and(|w| w.contains("catching up")));
        s.update(
            BTreeMap::from([
                ("a".to_string(), topic("a", Verdict::InSync)),
                ("b".to_string(), topic("b", Verdict::Blank)),
            ]),
            t0 + ms(900),
        );
        assert_eq!(s.why_not_ready(), None);
        assert_eq!(s.topics().len(), 2);
    }

    #[test]
    fn a_topic_found_on_the_volume_that_never_opens_stops_holding_readiness() {
        let t0 = Instant::now();
        let s = ReplicaSync::default();
        s.expect(["gone".to_string()], t0);
        s.update(BTreeMap::new(), t0 + OPEN_WITHIN - ms(1));
        assert!(s.why_not_ready().is_some());
        s.update(BTreeMap::new(), t0 + OPEN_WITHIN);
        assert_eq!(s.why_not_ready(), None);
    }
}
