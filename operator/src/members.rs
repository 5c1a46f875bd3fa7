//! Cluster membership: which brokers are members (the list in the `<cluster>-members`
//! ConfigMap the brokers poll), and how a replica change is sequenced so that no broker
//! receives SIGTERM while it still owns cache keys or subscriptions, and no broker becomes a
//! member before it can serve. Pure: the clock is passed in.
//!
//! Membership and the StatefulSet size move in a fixed order (see [`plan_members`]):
//! - creation: both at the desired count;
//! - scale up: the StatefulSet first; members follow once the new pods are ready;
//! - scale down: members first; the StatefulSet follows after the hand-off grace, so leaving
//!   brokers hand their keys and subscriptions to the remaining ones before they are stopped,
//!   and, when durable topics are replicated, only once no leaving broker holds a replica
//!   ([`leaving`]): the topics' leaders move their Raft groups off the leaving brokers after
//!   the member change, and a broker stopped before that could take a topic below quorum.
//!
//! Every change of the broker count goes through [`plan_members`]: `spec.replicas`, a tier
//! change (whose shrinking half lowers the count once the new config is rolled) and the
//! autoscaler's tier choice.

pub mod leaving;

use std::fmt::Write;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::jiff::Timestamp;

use crate::crd::BrokerClusterStatus;
use crate::crd::conditions::Reason;
use crate::names::Names;
use leaving::{Hold, Leaving, MOVE_BOUND, MOVE_POLL};

/// Default hand-off grace between lowering the members and lowering the StatefulSet.
pub const DEFAULT_HANDOFF_GRACE: Duration = Duration::from_secs(15);

/// What the operator observes about the cluster's size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// `spec.replicas` of the StatefulSet, `None` when it does not exist yet.
    pub statefulset_replicas: Option<i32>,
    /// `status.readyReplicas` of the StatefulSet.
    pub ready_replicas: i32,
    /// The member count last written (`status.members`), `None` before the first.
    pub members: Option<i32>,
    /// When the member count last changed (`status.membersChangedAt`).
    pub members_changed_at: Option<Timestamp>,
    /// The current time.
    pub now: Timestamp,
    /// What the brokers a scale-down removes still hold ([`leaving::judge`]);
    /// [`Leaving::NotReplicated`] when nothing was read.
    pub leaving: Leaving,
}

impl Observed {
    /// What [`plan_members`] needs, read from the StatefulSet and the stored status.
    pub fn of(
        sts: Option<&StatefulSet>,
        status: Option<&BrokerClusterStatus>,
        now: Timestamp,
    ) -> Self {
        Observed {
            statefulset_replicas: sts.and_then(|s| s.spec.as_ref()).and_then(|s| s.replicas),
            ready_replicas: sts
                .and_then(|s| s.status.as_ref())
                .and_then(|s| s.ready_replicas)
                .unwrap_or(0),
            members: status.and_then(|s| s.members),
            members_changed_at: status
                .and_then(|s| s.members_changed_at.as_ref())
                .map(|t| t.0),
            now,
            leaving: Leaving::NotReplicated,
        }
    }

    /// The ordinals a scale-down to `desired` removes: from `desired` up to the StatefulSet's
    /// size (none when it is not larger).
    pub fn leaving_ordinals(&self, desired: i32) -> std::ops::Range<i32> {
        desired.max(0)..self.statefulset_replicas.unwrap_or(0).max(desired.max(0))
    }
}

/// A scale-down whose StatefulSet waits for the leaving brokers' replicas to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// What holds it.
    pub hold: Hold,
    /// The StatefulSet size it keeps.
    pub from: i32,
    /// The size it shrinks to once the replicas moved.
    pub to: i32,
    /// It has waited longer than [`MOVE_BOUND`] since the member change.
    pub overdue: bool,
}

impl Held {
    /// The `Progressing` reason: [`Reason::ScaleDownWaitingForReplicas`], or
    /// [`Reason::ScaleDownStalled`] past [`MOVE_BOUND`].
    pub fn reason(&self) -> Reason {
        if self.overdue {
            Reason::ScaleDownStalled
        } else {
            Reason::ScaleDownWaitingForReplicas
        }
    }

    /// The `Progressing` message (no clock in it: it changes only when the blocker does).
    pub fn message(&self) -> String {
        let mut out = format!(
            "scale-down from {} to {} brokers waits before stopping any: {}",
            self.from, self.to, self.hold
        );
        if self.overdue {
            let _ = write!(
                out,
                "; still not done {} min after the member change: the operator keeps waiting, \
                 since stopping the broker could take a topic below quorum (see \
                 docs/operations.md, \"A scale-down that waits for replica moves\")",
                MOVE_BOUND.as_secs() / 60
            );
        }
        out
    }
}

/// The next step of a membership change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MembersPlan {
    /// `spec.replicas` to apply to the StatefulSet.
    pub statefulset_replicas: i32,
    /// Member count to write to the members ConfigMap.
    pub members: i32,
    /// When the member count changed: `now` if this plan changes it, else the observed time.
    pub members_changed_at: Timestamp,
    /// `Some(delay)` while a later step waits on the clock (the hand-off grace of a scale
    /// down): look again after `delay`. A step waiting for pods to become ready is `None`:
    /// the StatefulSet's status change triggers the reconcile. While the leaving brokers'
    /// replicas hold the scale-down, [`MOVE_POLL`].
    pub wait: Option<Duration>,
    /// The StatefulSet keeps its size because a leaving broker holds replicas (or could not
    /// be read).
    pub held: Option<Held>,
}

/// Plans the StatefulSet size and member count for `desired` brokers.
///
/// - No StatefulSet yet (creation): both are `desired`.
/// - `desired` above the members (scale up): the StatefulSet goes to `desired` at once; the
///   members rise to `desired` only when at least `desired` pods are ready.
/// - `desired` below the members (scale down): the members drop to `desired` now; the
///   StatefulSet keeps its size.
/// - members at `desired` but the StatefulSet larger (the second half of a scale down): the
///   StatefulSet drops to `desired` once `grace` has passed since the member change and, when
///   the durable topics are replicated, no leaving broker holds a replica
///   (`observed.leaving`); until then it keeps its size and says why ([`MembersPlan::held`]),
///   looking again every [`MOVE_POLL`], without end ([`MOVE_BOUND`] only changes the reason).
///
/// An unknown member count with an existing StatefulSet (a cluster created before membership
/// was tracked) is taken to be the StatefulSet's size.
pub fn plan_members(desired: i32, observed: &Observed, grace: Duration) -> MembersPlan {
    let now = observed.now;
    let changed_at = observed.members_changed_at.unwrap_or(now);
    let Some(sts) = observed.statefulset_replicas else {
        return MembersPlan {
            statefulset_replicas: desired,
            members: desired,
            members_changed_at: if observed.members == Some(desired) {
                changed_at
            } else {
                now
            },
            wait: None,
            held: None,
        };
    };
    let members = observed.members.unwrap_or(sts);
    if desired > members {
        if observed.ready_replicas >= desired && sts >= desired {
            return MembersPlan {
                statefulset_replicas: desired,
                members: desired,
                members_changed_at: now,
                wait: None,
                held: None,
            };
        }
        return MembersPlan {
            statefulset_replicas: desired.max(sts),
            members,
            members_changed_at: changed_at,
            // Not a timer: the pods becoming ready change the StatefulSet's status, whose
            // watch triggers the next reconcile.
            wait: None,
            held: None,
        };
    }
    if desired < members {
        return MembersPlan {
            statefulset_replicas: sts.max(desired),
            members: desired,
            members_changed_at: now,
            wait: (sts > desired).then_some(grace),
            held: None,
        };
    }
    // Members are where they should be; the StatefulSet may still have to shrink.
    if sts > desired {
        let elapsed = now.duration_since(changed_at);
        let elapsed = Duration::try_from(elapsed).unwrap_or(Duration::ZERO);
        if elapsed < grace {
            return MembersPlan {
                statefulset_replicas: sts,
                members,
                members_changed_at: changed_at,
                wait: Some(grace - elapsed),
                held: None,
            };
        }
        let hold = match &observed.leaving {
            Leaving::NotReplicated | Leaving::Clear => None,
            Leaving::Held(hold) => Some(hold.clone()),
        };
        if let Some(hold) = hold {
            return MembersPlan {
                statefulset_replicas: sts,
                members,
                members_changed_at: changed_at,
                wait: Some(MOVE_POLL),
                held: Some(Held {
                    hold,
                    from: sts,
                    to: desired,
                    overdue: elapsed >= MOVE_BOUND,
                }),
            };
        }
    }
    MembersPlan {
        statefulset_replicas: desired,
        members,
        members_changed_at: changed_at,
        wait: None,
        held: None,
    }
}

/// The members ConfigMap's `members` value: one line per member, ordinal order,
/// `<pod-name> <pod-name>.<headless>.<namespace>.svc.<cluster-domain>:<quic-port>`, each line
/// ending in a newline.
pub fn members_text(names: &Names, namespace: &str, cluster_domain: &str, members: i32) -> String {
    let mut out = String::new();
    for ordinal in 0..members.max(0) {
        let _ = writeln!(
            out,
            "{} {}:{}",
            names.pod(ordinal),
            names.pod_host(ordinal, namespace, cluster_domain),
            starling_config::DEFAULT_QUIC_PORT
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRACE: Duration = Duration::from_secs(15);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    fn observed(
        sts: Option<i32>,
        ready: i32,
        members: Option<i32>,
        changed: i64,
        now: i64,
    ) -> Observed {
        Observed {
            statefulset_replicas: sts,
            ready_replicas: ready,
            members,
            members_changed_at: Some(at(changed)),
            now: at(now),
            leaving: Leaving::NotReplicated,
        }
    }

    fn plan(desired: i32, o: Observed) -> (i32, i32, Option<Duration>) {
        let p = plan_members(desired, &o, GRACE);
        (p.statefulset_replicas, p.members, p.wait)
    }

    #[test]
    fn creation_sets_both_at_once() {
        let o = Observed {
            statefulset_replicas: None,
            ready_replicas: 0,
            members: None,
            members_changed_at: None,
            now: at(5),
            leaving: Leaving::NotReplicated,
        };
        let p = plan_members(3, &o, GRACE);
        assert_eq!(
            p,
            MembersPlan {
                statefulset_replicas: 3,
                members: 3,
                members_changed_at: at(5),
                wait: None,
                held: None,
            }
        );
    }

    #[test]
    fn steady_state_changes_nothing() {
        let p = plan_members(3, &observed(Some(3), 3, Some(3), 0, 100), GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.wait), (3, 3, None));
        assert_eq!(p.members_changed_at, at(0), "the change time is kept");
    }

    #[test]
    fn scale_up_grows_the_statefulset_first_and_members_when_ready() {
        // 3 → 5: the StatefulSet grows at once, members wait for the new pods.
        assert_eq!(plan(5, observed(Some(3), 3, Some(3), 0, 100)), (5, 3, None));
        assert_eq!(plan(5, observed(Some(5), 4, Some(3), 0, 110)), (5, 3, None));
        let p = plan_members(5, &observed(Some(5), 5, Some(3), 0, 120), GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.wait), (5, 5, None));
        assert_eq!(p.members_changed_at, at(120));
    }

    #[test]
    fn ready_pods_of_the_old_size_do_not_count_before_the_statefulset_grows() {
        // readyReplicas can be 5 from an earlier size while spec.replicas is still 3.
        assert_eq!(plan(5, observed(Some(3), 5, Some(3), 0, 100)), (5, 3, None));
    }

    #[test]
    fn scale_down_lowers_members_first_then_the_statefulset_after_the_grace() {
        // 5 → 3: members drop now, the StatefulSet keeps 5 for the grace.
        let p = plan_members(3, &observed(Some(5), 5, Some(5), 0, 100), GRACE);
        assert_eq!(
            (p.statefulset_replicas, p.members, p.wait),
            (5, 3, Some(GRACE))
        );
        assert_eq!(p.members_changed_at, at(100));
        // 10 s later: still waiting, 5 s to go.
        assert_eq!(
            plan(3, observed(Some(5), 5, Some(3), 100, 110)),
            (5, 3, Some(Duration::from_secs(5)))
        );
        // After the grace: the StatefulSet shrinks.
        assert_eq!(
            plan(3, observed(Some(5), 5, Some(3), 100, 115)),
            (3, 3, None)
        );
        assert_eq!(
            plan(3, observed(Some(5), 5, Some(3), 100, 400)),
            (3, 3, None)
        );
    }

    #[test]
    fn scale_down_reversed_during_the_grace_keeps_the_pods() {
        // 5 → 3 (members 3, StatefulSet still 5), then back to 5: the pods are there and
        // ready, so the members return at once and nothing is stopped.
        let p = plan_members(5, &observed(Some(5), 5, Some(3), 100, 105), GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.wait), (5, 5, None));
    }

    #[test]
    fn a_scale_down_during_a_scale_up_never_shrinks_members_below_desired() {
        // 3 → 5 in flight (StatefulSet 5, members 3), then 4: members rise only when ready,
        // the StatefulSet stays 5 until members reach 4 and the grace passes.
        assert_eq!(plan(4, observed(Some(5), 3, Some(3), 0, 100)), (5, 3, None));
        let p = plan_members(4, &observed(Some(5), 5, Some(3), 0, 100), GRACE);
        assert_eq!((p.statefulset_replicas, p.members), (4, 4));
    }

    #[test]
    fn an_unknown_member_count_is_the_statefulset_size() {
        let o = Observed {
            statefulset_replicas: Some(3),
            ready_replicas: 3,
            members: None,
            members_changed_at: None,
            now: at(0),
            leaving: Leaving::NotReplicated,
        };
        let p = plan_members(3, &o, GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.wait), (3, 3, None));
        let p = plan_members(1, &o, GRACE);
        assert_eq!(
            (p.statefulset_replicas, p.members, p.wait),
            (3, 1, Some(GRACE))
        );
    }

    #[test]
    fn a_clock_going_backwards_waits_the_whole_grace() {
        assert_eq!(
            plan(3, observed(Some(5), 5, Some(3), 100, 90)),
            (5, 3, Some(GRACE))
        );
    }

    fn held_by(pod: &str, topics: usize) -> Leaving {
        Leaving::Held(Hold::Replicas {
            pod: pod.into(),
            topics,
            first: "orders.a".into(),
            state: crate::roll::report::SyncState::InSync,
        })
    }

    fn with_leaving(mut o: Observed, leaving: Leaving) -> Observed {
        o.leaving = leaving;
        o
    }

    #[test]
    fn the_statefulset_shrinks_only_once_no_leaving_broker_holds_a_replica() {
        // 5 → 3, members at 3 since t=100, the grace passed: events-4 still holds two topics.
        let o = with_leaving(
            observed(Some(5), 5, Some(3), 100, 120),
            held_by("events-4", 2),
        );
        let p = plan_members(3, &o, GRACE);
        assert_eq!(
            (p.statefulset_replicas, p.members, p.wait),
            (5, 3, Some(MOVE_POLL))
        );
        assert_eq!(p.members_changed_at, at(100), "the change time is kept");
        let held = p.held.unwrap_or_else(|| panic!("held"));
        assert_eq!((held.from, held.to, held.overdue), (5, 3, false));
        assert_eq!(held.reason(), Reason::ScaleDownWaitingForReplicas);
        assert!(
            held.message().contains(
                "from 5 to 3 brokers waits before stopping any: events-4 still holds replicas of 2"
            ),
            "{}",
            held.message()
        );
        // A broker that cannot be read holds it too.
        let unknown = Leaving::Held(Hold::Unknown {
            pod: "events-3".into(),
            why: "not read".into(),
        });
        let p = plan_members(3, &with_leaving(o.clone(), unknown), GRACE);
        assert_eq!((p.statefulset_replicas, p.wait), (5, Some(MOVE_POLL)));
        // Once every leaving broker reports none, the StatefulSet shrinks.
        let p = plan_members(3, &with_leaving(o, Leaving::Clear), GRACE);
        assert_eq!(
            (p.statefulset_replicas, p.members, p.wait, p.held),
            (3, 3, None, None)
        );
    }

    #[test]
    fn the_grace_still_comes_first_and_the_moves_do_not_hold_the_members() {
        // Within the grace: the grace's own wait, whatever the replicas say.
        let o = with_leaving(
            observed(Some(5), 5, Some(3), 100, 105),
            held_by("events-4", 1),
        );
        let p = plan_members(3, &o, GRACE);
        assert_eq!(
            (p.statefulset_replicas, p.wait, p.held),
            (5, Some(Duration::from_secs(10)), None)
        );
        // The first step of a scale-down lowers the members at once: the moves start from it.
        let o = with_leaving(
            observed(Some(5), 5, Some(5), 0, 100),
            held_by("events-4", 1),
        );
        let p = plan_members(3, &o, GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.held), (5, 3, None));
        // A scale-down reversed while held: the members come back, nothing is stopped.
        let o = with_leaving(
            observed(Some(5), 5, Some(3), 100, 200),
            held_by("events-4", 1),
        );
        let p = plan_members(5, &o, GRACE);
        assert_eq!((p.statefulset_replicas, p.members, p.held), (5, 5, None));
    }

    #[test]
    fn a_scale_down_held_past_the_bound_says_so_and_keeps_waiting() {
        let bound = i64::try_from(MOVE_BOUND.as_secs()).unwrap_or(i64::MAX);
        let o = with_leaving(
            observed(Some(5), 5, Some(3), 100, 100 + bound - 1),
            held_by("events-4", 1),
        );
        let p = plan_members(3, &o, GRACE);
        assert_eq!(p.held.map(|h| h.overdue), Some(false));
        let o = with_leaving(
            observed(Some(5), 5, Some(3), 100, 100 + bound),
            held_by("events-4", 1),
        );
        let p = plan_members(3, &o, GRACE);
        assert_eq!((p.statefulset_replicas, p.wait), (5, Some(MOVE_POLL)));
        let held = p.held.unwrap_or_else(|| panic!("held"));
        assert!(held.overdue);
        assert_eq!(held.reason(), Reason::ScaleDownStalled);
        assert!(
            held.message().contains("keeps waiting"),
            "{}",
            held.message()
        );
    }

    #[test]
    fn the_leaving_ordinals_are_those_past_the_desired_count() {
        let o = observed(Some(5), 5, Some(3), 0, 0);
        assert_eq!(o.leaving_ordinals(3), 3..5);
        assert!(o.leaving_ordinals(5).is_empty());
        assert!(o.leaving_ordinals(7).is_empty());
        assert!(observed(None, 0, None, 0, 0).leaving_ordinals(3).is_empty());
    }

    #[test]
    fn members_text_lists_every_ordinal_in_order() {
        let names = Names::new("events");
        let text = members_text(&names, "messaging", "cluster.local", 3);
        assert_eq!(
            text,
            "events-0 events-0.events-headless.messaging.svc.cluster.local:7400\n\
             events-1 events-1.events-headless.messaging.svc.cluster.local:7400\n\
             events-2 events-2.events-headless.messaging.svc.cluster.local:7400\n"
        );
        assert_eq!(members_text(&names, "m", "example.org", 0), "");
        assert!(members_text(&names, "m", "example.org", 1).contains(".m.svc.example.org:7400"));
    }
}
