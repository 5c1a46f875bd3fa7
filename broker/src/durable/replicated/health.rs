//! Whether a replicated topic is **under-replicated** or **leaderless**, as its replica here
//! sees it: judged from the replica's status ([`TopicStatus`]) sample by sample, for the
//! gauges `starling_replica_under_replicated` and `starling_replica_leaderless` that the status
//! watcher (`topic.rs`, `watch_status`) sets and the chart's alerts read. Pure: the time is
//! passed in.
//!
//! - **Leaderless**: this replica knows no leader.
//! - **Under-replicated** (judged on the leader only; every other replica reports 0): the
//!   topic's membership has fewer voters than `durable_replicas`, or a voter has not caught up
//!   within [`CATCH_UP`]: at every checkpoint, [`CATCH_UP`] apart, the leader notes its last
//!   log index, and each voter must reach the index noted at the previous checkpoint (openraft's
//!   replication progress, [`TopicStatus::matched`]). A follower that keeps up under load lags
//!   by the entries in flight, never by [`CATCH_UP`]; one that is down, cut off or too slow
//!   falls behind a target it cannot reach and stays counted until it does. A follower that
//!   goes down while the topic is idle holds everything there is, so it is not counted until
//!   the next append (its link shows in `starling_cluster_peer_up`).

use std::time::{Duration, Instant};

use starling_replica::TopicStatus;

/// How long a voter may take to reach what the leader's log held.
pub const CATCH_UP: Duration = Duration::from_secs(10);

/// What one sample says of the topic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Leader here, and a voter is missing or behind.
    pub under_replicated: bool,
    /// No leader known here.
    pub leaderless: bool,
}

/// The judgement across samples: the checkpoints of the leader's log.
#[derive(Debug, Clone, Default)]
pub struct Health {
    /// When the current checkpoint was taken and the leader's last log index then.
    checkpoint: Option<(Instant, Option<u64>)>,
    /// The index every voter must have reached: the previous checkpoint's.
    target: Option<Option<u64>>,
}

impl Health {
    /// Judges one sample of the replica's status at `now`; `replicas` is `durable_replicas`.
    pub fn observe(&mut self, s: &TopicStatus, replicas: usize, now: Instant) -> Verdict {
        let leaderless = s.leader.is_none();
        if !s.is_leader {
            *self = Health::default();
            return Verdict {
                under_replicated: false,
                leaderless,
            };
        }
        match self.checkpoint {
            None => self.checkpoint = Some((now, s.last_log)),
            Some((at, noted)) if now.saturating_duration_since(at) >= CATCH_UP => {
                self.target = Some(noted);
                self.checkpoint = Some((now, s.last_log));
            }
            Some(_) => {}
        }
        let behind = self.target.is_some_and(|target| {
            s.voters.iter().filter(|v| **v != s.id).any(|v| {
                let reached = s.matched.get(v).copied().flatten();
                reached < target
            })
        });
        Verdict {
            under_replicated: s.voters.len() < replicas || behind,
            leaderless,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use super::*;

    /// The status of replica 1 of {1, 2, 3}, leading with `last` as its last log index, the
    /// followers at `f2` and `f3`.
    fn leading(last: u64, f2: Option<u64>, f3: Option<u64>) -> TopicStatus {
        TopicStatus {
            id: 1,
            leader: Some(1),
            term: 2,
            is_leader: true,
            voters: BTreeSet::from([1, 2, 3]),
            learners: BTreeSet::new(),
            applied: Some(last),
            last_log: Some(last),
            leader_commit: Some(last),
            stopped: None,
            matched: BTreeMap::from([(1, Some(last)), (2, f2), (3, f3)]),
        }
    }

    #[test]
    fn followers_that_keep_up_under_load_are_in_sync() {
        let t0 = Instant::now();
        let mut h = Health::default();
        // The log grows 100 entries a second; each follower trails by the 5 in flight.
        for tick in 0..300u64 {
            let last = 10 + tick * 10;
            let v = h.observe(
                &leading(last, Some(last - 5), Some(last - 5)),
                3,
                t0 + Duration::from_millis(tick * 100),
            );
            assert_eq!(v, Verdict::default(), "tick {tick}");
        }
    }

    #[test]
    fn a_follower_that_stops_is_under_replicated_after_the_catch_up_and_clears_when_back() {
        let t0 = Instant::now();
        let mut h = Health::default();
        let mut under = |last, f3, secs| {
            h.observe(
                &leading(last, Some(last), f3),
                3,
                t0 + Duration::from_secs(secs),
            )
            .under_replicated
        };
        assert!(!under(100, Some(100), 0));
        // Follower 3 stops at 100 while the log moves on.
        assert!(!under(200, Some(100), 5));
        // First checkpoint after CATCH_UP: the target is 100, which 3 holds.
        assert!(!under(300, Some(100), 10));
        // Second: the target is 300, which 3 never reached.
        assert!(under(400, Some(100), 20));
        assert!(under(410, Some(299), 25));
        // Back and caught up past the target: in sync at once.
        assert!(!under(420, Some(400), 26));
    }

    #[test]
    fn an_unreachable_voter_or_a_missing_one_is_under_replicated() {
        let t0 = Instant::now();
        let mut h = Health::default();
        // Follower 2 never answered (nothing known of it), even on an idle topic: the new
        // leader's own entry is what it must reach.
        assert!(
            !h.observe(&leading(7, None, Some(7)), 3, t0)
                .under_replicated
        );
        let v = h.observe(&leading(7, None, Some(7)), 3, t0 + CATCH_UP);
        assert!(v.under_replicated && !v.leaderless);
        // A membership of two voters where three are configured.
        let mut two = leading(7, Some(7), Some(7));
        two.voters.remove(&3);
        assert!(Health::default().observe(&two, 3, t0).under_replicated);
        assert!(!Health::default().observe(&two, 1, t0).under_replicated);
    }

    #[test]
    fn followers_report_nothing_and_a_replica_without_a_leader_is_leaderless() {
        let t0 = Instant::now();
        let mut h = Health::default();
        let mut follower = leading(50, None, None);
        follower.id = 2;
        follower.is_leader = false;
        follower.matched.clear();
        for s in 0..30 {
            let v = h.observe(&follower, 3, t0 + Duration::from_secs(s));
            assert_eq!(v, Verdict::default());
        }
        follower.leader = None;
        let v = h.observe(&follower, 3, t0 + Duration::from_secs(31));
        assert_eq!(
            v,
            Verdict {
                under_replicated: false,
                leaderless: true
            }
        );
        // Losing the leadership forgets the checkpoints: a new term starts afresh.
        let mut h = Health::default();
        assert!(!h.observe(&leading(1, None, None), 3, t0).under_replicated);
        assert!(
            h.observe(&leading(1, None, None), 3, t0 + CATCH_UP)
                .under_replicated
        );
        h.observe(&follower, 3, t0 + CATCH_UP);
        assert!(
            !h.observe(&leading(1, None, None), 3, t0 + CATCH_UP * 2)
                .under_replicated
        );
    }
}
