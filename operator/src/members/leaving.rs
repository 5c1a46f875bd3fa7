//! Whether the brokers a scale-down removes still hold replicas of replicated topics, so the
//! StatefulSet must not shrink yet ([`super::plan_members`]). Pure: the controller lists the
//! pods and reads each leaving broker's `GET /replicas` (as the held roll reads them,
//! [`crate::roll`]), and [`judge`] decides.
//!
//! Once the member list no longer names a broker, each replicated topic's leader moves the
//! topic's Raft group off it (`docs/replication.md`, "Replica sets follow the membership"),
//! and the leaving broker deletes its replica once it is out of a committed membership; its
//! `GET /replicas` then no longer lists the topic. A leaving broker is **clear** when its pod
//! exists, is not being deleted, answers `GET /replicas` with no replica that holds state (a
//! blank one holds nothing: no Raft state, no leader's append, as for the roll), and is Ready.
//! Anything else holds the scale-down: a replica still listed (the move is under way, or did
//! not start), a pod that does not answer or does not exist, or one that lists nothing but is
//! not Ready (a broker that just restarted lists its replicas only once it opened them, and
//! holds readiness until then).
//! Unknown is not safe: deleting a broker whose replicas did not move can take a topic below
//! its quorum, and its volume with them.

use std::fmt;
use std::time::Duration;

use crate::roll::report::SyncState;
use crate::roll::{BrokerReplicas, PodView};

/// How soon a reconcile looks again while a scale-down waits for replica moves: the moves
/// trigger no watch.
pub const MOVE_POLL: Duration = Duration::from_secs(5);

/// How long after the member change a scale-down may wait for replica moves before the
/// status says it is stalled (`ScaleDownStalled`). It keeps waiting after that: stopping the
/// brokers would lose the quorum of the topics they still hold. A move that fails is retried
/// by the broker every second, and a single move is given up after 120 s; ten minutes covers
/// a snapshot of a large topic to a new member several times over.
pub const MOVE_BOUND: Duration = Duration::from_secs(600);

/// Why a leaving broker that lists no replica but is not Ready holds the scale-down.
const NOT_READY: &str =
    "the pod is not Ready; a broker that just started lists its replicas once it opened them";

/// Why a leaving broker holds the scale-down.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// It still holds replicas of replicated topics.
    Replicas {
        /// The pod.
        pod: String,
        /// How many of its replicas hold state.
        topics: usize,
        /// One of those topics (the first the broker listed).
        first: String,
        /// Where that replica stands.
        state: SyncState,
    },
    /// Its replicas could not be read: no pod, not Ready, being deleted, or no answer.
    Unknown {
        /// The pod.
        pod: String,
        /// Why.
        why: String,
    },
}

impl Hold {
    /// The pod that holds the scale-down.
    pub fn pod(&self) -> &str {
        match self {
            Hold::Replicas { pod, .. } | Hold::Unknown { pod, .. } => pod,
        }
    }
}

impl fmt::Display for Hold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Hold::Replicas {
                pod,
                topics,
                first,
                state,
            } => write!(
                f,
                "{pod} still holds replicas of {topics} replicated topic(s) (e.g. {first}, {}); \
                 their leaders are moving them to the remaining members",
                state.name()
            ),
            Hold::Unknown { pod, why } => write!(
                f,
                "the replicas of {pod} cannot be read ({why}); it is stopped only once it \
                 reports none"
            ),
        }
    }
}

/// What the leaving brokers hold.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Leaving {
    /// No durable topic is replicated, or no broker is leaving: nothing was read, and the
    /// StatefulSet follows the members after the hand-off grace alone.
    #[default]
    NotReplicated,
    /// Every leaving broker reports no replica that holds state.
    Clear,
    /// A leaving broker holds the scale-down (the first, lowest ordinal).
    Held(Hold),
}

/// The verdict over the leaving brokers `leaving` (pod names, lowest ordinal first): the
/// listed pods of the StatefulSet (or why they could not be listed) and the brokers'
/// `GET /replicas` answers (a pod without an answer was not read).
pub fn judge(
    leaving: &[String],
    pods: Result<&[PodView], &str>,
    reports: &[BrokerReplicas],
) -> Leaving {
    let pods = match pods {
        Ok(p) => p,
        Err(why) => {
            return match leaving.first() {
                Some(pod) => Leaving::Held(Hold::Unknown {
                    pod: pod.clone(),
                    why: format!("the broker pods could not be listed: {why}"),
                }),
                None => Leaving::Clear,
            };
        }
    };
    for name in leaving {
        let unknown = |why: &str| {
            Leaving::Held(Hold::Unknown {
                pod: name.clone(),
                why: why.to_string(),
            })
        };
        let Some(pod) = pods.iter().find(|p| p.name == *name) else {
            return unknown("the pod does not exist");
        };
        if pod.terminating {
            return unknown("the pod is being deleted");
        }
        let Some(report) = reports.iter().find(|r| r.pod == *name) else {
            return unknown("not read");
        };
        let replicas = match &report.answer {
            Ok(r) => r,
            Err(why) => return unknown(why),
        };
        let mut holding = replicas.iter().filter(|r| r.sync != SyncState::Blank);
        if let Some(first) = holding.next() {
            return Leaving::Held(Hold::Replicas {
                pod: name.clone(),
                topics: 1 + holding.count(),
                first: first.topic.clone(),
                state: first.sync,
            });
        }
        // Nothing listed, but not Ready: a broker that just started lists the replicas it
        // found on its volume only once it opened them (and holds readiness until then).
        if pod.ready_since.is_none() {
            return unknown(NOT_READY);
        }
    }
    Leaving::Clear
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;

    use super::*;
    use crate::roll::report::ReplicaReport;

    fn pod(name: &str, ready: bool, terminating: bool) -> PodView {
        PodView {
            name: name.to_string(),
            ordinal: name
                .rsplit('-')
                .next()
                .and_then(|o| o.parse().ok())
                .unwrap_or(0),
            revision: None,
            ready_since: ready.then_some(Timestamp::UNIX_EPOCH),
            terminating,
        }
    }

    fn answer(pod: &str, replicas: &[(&str, SyncState)]) -> BrokerReplicas {
        BrokerReplicas {
            pod: pod.to_string(),
            answer: Ok(replicas
                .iter()
                .map(|(t, s)| ReplicaReport::new(*t, *s))
                .collect()),
        }
    }

    fn leaving() -> Vec<String> {
        vec!["events-3".to_string(), "events-4".to_string()]
    }

    #[test]
    fn the_documented_bound_is_the_bound() {
        let minutes = format!("{} minutes", MOVE_BOUND.as_secs() / 60);
        assert!(
            crate::crd::conditions::Reason::ScaleDownStalled
                .doc()
                .contains(&minutes)
        );
        let event = crate::events::EVENT_REASONS
            .iter()
            .find(|(r, _, _)| *r == "ScaleDownStalled")
            .map(|(_, _, doc)| *doc)
            .unwrap_or_default();
        assert!(event.contains(&minutes), "{event}");
    }

    #[test]
    fn leaving_brokers_with_no_replica_left_are_clear() {
        let pods = [pod("events-3", true, false), pod("events-4", true, false)];
        let reports = [
            answer("events-3", &[]),
            // A blank replica holds no state: nothing to move.
            answer("events-4", &[("orders.a", SyncState::Blank)]),
        ];
        assert_eq!(judge(&leaving(), Ok(&pods), &reports), Leaving::Clear);
        assert_eq!(judge(&[], Ok(&[]), &[]), Leaving::Clear);
    }

    #[test]
    fn a_replica_still_listed_holds_and_counts_its_topics() {
        let pods = [pod("events-3", true, false), pod("events-4", true, false)];
        let reports = [
            answer("events-3", &[]),
            answer(
                "events-4",
                &[
                    ("orders.a", SyncState::InSync),
                    ("orders.b", SyncState::Blank),
                    ("orders.c", SyncState::NoLeader),
                ],
            ),
        ];
        let got = judge(&leaving(), Ok(&pods), &reports);
        assert_eq!(
            got,
            Leaving::Held(Hold::Replicas {
                pod: "events-4".into(),
                topics: 2,
                first: "orders.a".into(),
                state: SyncState::InSync,
            })
        );
        let Leaving::Held(hold) = got else {
            panic!("held")
        };
        assert_eq!(hold.pod(), "events-4");
        let text = hold.to_string();
        assert!(text.contains("events-4 still holds replicas of 2 replicated topic(s)"));
        assert!(text.contains("orders.a, in sync"), "{text}");
    }

    #[test]
    fn unknown_is_not_safe() {
        let ready = [pod("events-3", true, false), pod("events-4", true, false)];
        let clear = [answer("events-3", &[]), answer("events-4", &[])];
        let why = |got: Leaving| match got {
            Leaving::Held(Hold::Unknown { pod, why }) => format!("{pod}: {why}"),
            other => format!("{other:?}"),
        };
        // No answer at all, and an answer that is an error.
        assert_eq!(
            why(judge(&leaving(), Ok(&ready), &clear[..1])),
            "events-4: not read"
        );
        let refused = [
            clear[0].clone(),
            BrokerReplicas {
                pod: "events-4".into(),
                answer: Err("connection refused".into()),
            },
        ];
        assert_eq!(
            why(judge(&leaving(), Ok(&ready), &refused)),
            "events-4: connection refused"
        );
        // A pod that is missing, not Ready, or being deleted.
        assert_eq!(
            why(judge(&leaving(), Ok(&ready[..1]), &clear)),
            "events-4: the pod does not exist"
        );
        let unready = [pod("events-3", false, false), ready[1].clone()];
        assert_eq!(
            why(judge(&leaving(), Ok(&unready), &clear)),
            format!("events-3: {NOT_READY}")
        );
        // Not Ready because of a replica it lists: the replica is what is shown.
        let listed = [answer("events-3", &[("orders.a", SyncState::NoLeader)])];
        assert!(matches!(
            judge(&leaving(), Ok(&unready), &listed),
            Leaving::Held(Hold::Replicas {
                topics: 1,
                state: SyncState::NoLeader,
                ..
            })
        ));
        let deleting = [ready[0].clone(), pod("events-4", true, true)];
        assert_eq!(
            why(judge(&leaving(), Ok(&deleting), &clear)),
            "events-4: the pod is being deleted"
        );
        // Pods that could not be listed.
        assert_eq!(
            why(judge(&leaving(), Err("forbidden"), &clear)),
            "events-3: the broker pods could not be listed: forbidden"
        );
    }
}
