//! The held-roll decision: nothing to roll, the start, one restart at a time, and every wait.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::report::{ReplicaReport, SyncState};
use super::*;
use crate::crd::conditions::Reason;

const NEW: &str = "rev-new";
const OLD: &str = "rev-old";
const TEMPLATE: &str = "tmpl-2";
const GRACE: Duration = Duration::from_secs(10);

fn now() -> Timestamp {
    Timestamp::from_second(1_000_000).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn ago(secs: i64) -> Timestamp {
    Timestamp::from_second(1_000_000 - secs).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn live(partition: i32) -> LiveSet {
    LiveSet {
        name: "events".into(),
        template_hash: Some(TEMPLATE.into()),
        partition,
        generation: 4,
        observed_generation: 4,
        update_revision: Some(NEW.into()),
    }
}

/// A pod Ready for a minute on `revision`.
fn pod(ordinal: i32, revision: &str) -> PodView {
    PodView {
        name: format!("events-{ordinal}"),
        ordinal,
        revision: Some(revision.into()),
        ready_since: Some(ago(60)),
        terminating: false,
    }
}

fn in_sync(pod: &str) -> BrokerReplicas {
    BrokerReplicas {
        pod: pod.into(),
        answer: Ok(vec![
            ReplicaReport::new("orders.a", SyncState::InSync),
            ReplicaReport::new("orders.b", SyncState::Blank),
        ]),
    }
}

fn all_in_sync() -> Vec<BrokerReplicas> {
    (0..3).map(|o| in_sync(&format!("events-{o}"))).collect()
}

fn decide_with(live: Option<&LiveSet>, pods: &[PodView], reports: &[BrokerReplicas]) -> Roll {
    decide(&RollInput {
        replicated: true,
        replicas: 3,
        template_hash: TEMPLATE,
        live,
        pods: Ok(pods),
        reports,
        min_ready: GRACE,
        now: now(),
    })
}

#[test]
fn an_unreplicated_cluster_gets_no_partition_whatever_it_observes() {
    let l = live(2);
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, NEW)];
    for (live, listed) in [(None, Err("forbidden")), (Some(&l), Ok(&pods[..]))] {
        let roll = decide(&RollInput {
            replicated: false,
            replicas: 3,
            template_hash: "another",
            live,
            pods: listed,
            reports: &[],
            min_ready: GRACE,
            now: now(),
        });
        assert_eq!(roll.partition, None);
        assert_eq!(roll.step, Step::Unreplicated);
        assert!(!roll.held());
        assert_eq!(roll.progress(), None);
    }
}

#[test]
fn nothing_to_roll_keeps_the_partition_at_zero() {
    let pods = [pod(0, NEW), pod(1, NEW), pod(2, NEW)];
    let roll = decide_with(Some(&live(0)), &pods, &[]);
    assert_eq!((roll.partition, &roll.step), (Some(0), &Step::Steady));
    assert_eq!(roll.updated, 3);
    assert!(!roll.held());
    // No StatefulSet yet: created at partition 0.
    let roll = decide_with(None, &[], &[]);
    assert_eq!((roll.partition, roll.step), (Some(0), Step::Steady));
}

#[test]
fn a_template_change_starts_with_every_pod_held() {
    let mut l = live(0);
    l.template_hash = Some("tmpl-1".into());
    let pods = [pod(0, NEW), pod(1, NEW), pod(2, NEW)];
    let roll = decide_with(Some(&l), &pods, &all_in_sync());
    assert_eq!((roll.partition, &roll.step), (Some(3), &Step::Start));
    assert!(roll.held());
    // A StatefulSet written before the annotation existed (an operator upgrade) also starts
    // held, and a change in the middle of a roll starts over.
    l.template_hash = None;
    assert_eq!(decide_with(Some(&l), &pods, &[]).partition, Some(3));
    let mut mid = live(1);
    mid.template_hash = Some("tmpl-1".into());
    assert_eq!(decide_with(Some(&mid), &pods, &[]).partition, Some(3));
}

#[test]
fn the_highest_old_pod_restarts_first_when_everything_is_in_sync() {
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, OLD)];
    let roll = decide_with(Some(&live(3)), &pods, &all_in_sync());
    assert_eq!(roll.partition, Some(2));
    assert_eq!(
        roll.step,
        Step::Restart {
            pod: "events-2".into()
        }
    );
    assert_eq!((roll.from, roll.updated), (3, 0));
    assert!(roll.held());
    // Then the next one, once events-2 is back on the new revision and settled.
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, NEW)];
    let roll = decide_with(Some(&live(2)), &pods, &all_in_sync());
    assert_eq!(roll.partition, Some(1));
    assert_eq!(
        roll.step,
        Step::Restart {
            pod: "events-1".into()
        }
    );
    // A pod below the partition already on the new revision is passed over: only old pods
    // restart, one at a time.
    let pods = [pod(0, OLD), pod(1, NEW), pod(2, NEW)];
    let roll = decide_with(Some(&live(2)), &pods, &all_in_sync());
    assert_eq!(roll.partition, Some(0));
    assert_eq!(
        roll.step,
        Step::Restart {
            pod: "events-0".into()
        }
    );
}

#[test]
fn the_partition_returns_to_zero_when_every_pod_is_updated() {
    let pods = [pod(0, NEW), pod(1, NEW), pod(2, NEW)];
    let roll = decide_with(Some(&live(1)), &pods, &[]);
    assert_eq!((roll.partition, &roll.step), (Some(0), &Step::Finished));
    assert!(!roll.held());
}

#[test]
fn a_lagging_replica_on_another_pod_holds_the_roll() {
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, NEW)];
    let mut reports = all_in_sync();
    reports[0].answer = Ok(vec![ReplicaReport::new(
        "orders.a",
        SyncState::CatchingUp {
            applied: Some(40),
            target: 90,
        },
    )]);
    let roll = decide_with(Some(&live(2)), &pods, &reports);
    assert_eq!(roll.partition, Some(2), "held where it is");
    let wait = Wait::Replica {
        pod: "events-0".into(),
        topic: "orders.a".into(),
        state: SyncState::CatchingUp {
            applied: Some(40),
            target: 90,
        },
    };
    assert_eq!(roll.step, Step::Wait(wait.clone()));
    assert!(roll.held());
    let (reason, message) = roll.progress().unwrap_or((Reason::Stable, String::new()));
    assert_eq!(reason, Reason::RollWaitingForReplicas);
    assert_eq!(
        message,
        "1/3 brokers updated, roll held by the operator at partition 2: the replica of topic \
         orders.a on events-0 is catching up; restarting another broker could take the topic \
         below quorum"
    );
    // Leaderless and stopped replicas hold it too.
    for state in [SyncState::NoLeader, SyncState::Stopped] {
        reports[0].answer = Ok(vec![ReplicaReport::new("orders.a", state)]);
        let roll = decide_with(Some(&live(2)), &pods, &reports);
        assert_eq!(roll.partition, Some(2));
        assert!(
            matches!(&roll.step, Step::Wait(Wait::Replica { state: s, .. }) if *s == state),
            "{:?}",
            roll.step
        );
    }
}

#[test]
fn the_restarted_pod_must_be_updated_ready_and_settled_first() {
    // The controller has not replaced events-2 yet.
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, OLD)];
    let roll = decide_with(Some(&live(2)), &pods, &all_in_sync());
    assert_eq!(roll.partition, Some(2));
    assert_eq!(
        roll.step,
        Step::Wait(Wait::NotRestarted {
            pod: "events-2".into()
        })
    );
    assert_eq!(roll.progress().map(|p| p.0), Some(Reason::RollingOut));
    // Replaced, not Ready yet.
    let mut restarted = pod(2, NEW);
    restarted.ready_since = None;
    let pods = [pod(0, OLD), pod(1, OLD), restarted.clone()];
    assert_eq!(
        decide_with(Some(&live(2)), &pods, &all_in_sync()).step,
        Step::Wait(Wait::NotReady {
            pod: "events-2".into()
        })
    );
    // Ready for 4 s of the 10 s grace.
    restarted.ready_since = Some(ago(4));
    let pods = [pod(0, OLD), pod(1, OLD), restarted.clone()];
    assert_eq!(
        decide_with(Some(&live(2)), &pods, &all_in_sync()).step,
        Step::Wait(Wait::Settling {
            pod: "events-2".into(),
            left: Duration::from_secs(6)
        })
    );
    // Gone (being recreated), or terminating.
    let pods = [pod(0, OLD), pod(1, OLD)];
    assert_eq!(
        decide_with(Some(&live(2)), &pods, &all_in_sync()).step,
        Step::Wait(Wait::Missing {
            pod: "events-2".into()
        })
    );
    let mut leaving = pod(2, NEW);
    leaving.terminating = true;
    let pods = [pod(0, OLD), pod(1, OLD), leaving];
    assert_eq!(
        decide_with(Some(&live(2)), &pods, &all_in_sync()).step,
        Step::Wait(Wait::Terminating {
            pod: "events-2".into()
        })
    );
}

#[test]
fn an_unreachable_broker_holds_the_roll_and_is_never_skipped() {
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, NEW)];
    let mut reports = all_in_sync();
    reports[0].answer = Err("no answer within 2s".into());
    let roll = decide_with(Some(&live(2)), &pods, &reports);
    assert_eq!(roll.partition, Some(2));
    assert_eq!(
        roll.step,
        Step::Wait(Wait::Unreachable {
            pod: "events-0".into(),
            why: "no answer within 2s".into()
        })
    );
    assert_eq!(
        roll.progress().map(|p| p.0),
        Some(Reason::RollWaitingForReplicas)
    );
    // Not read at all (no pod IP, no HTTP client): the same.
    let roll = decide_with(Some(&live(2)), &pods, &all_in_sync()[1..]);
    assert_eq!(
        roll.step,
        Step::Wait(Wait::Unreachable {
            pod: "events-0".into(),
            why: "not read".into()
        })
    );
    // Pods that cannot be listed.
    let roll = decide(&RollInput {
        replicated: true,
        replicas: 3,
        template_hash: TEMPLATE,
        live: Some(&live(2)),
        pods: Err("pods is forbidden"),
        reports: &[],
        min_ready: GRACE,
        now: now(),
    });
    assert_eq!(roll.partition, Some(2));
    assert_eq!(
        roll.step,
        Step::Wait(Wait::PodsUnknown("pods is forbidden".into()))
    );
}

#[test]
fn another_unready_pod_holds_the_roll_but_the_one_to_restart_does_not() {
    // events-0 is not Ready: nothing restarts.
    let mut unready = pod(0, OLD);
    unready.ready_since = None;
    let pods = [unready, pod(1, OLD), pod(2, NEW)];
    let roll = decide_with(Some(&live(2)), &pods, &all_in_sync());
    assert_eq!(roll.partition, Some(2));
    assert_eq!(
        roll.step,
        Step::Wait(Wait::NotReady {
            pod: "events-0".into()
        })
    );
    // events-1, the next to restart, is unready and behind (say, crash-looping on the old
    // template): its replicas are the ones its restart takes away, so it is replaced.
    let mut next = pod(1, OLD);
    next.ready_since = None;
    let pods = [pod(0, OLD), next, pod(2, NEW)];
    let mut reports = all_in_sync();
    reports[1].answer = Err("connection refused".into());
    let roll = decide_with(Some(&live(2)), &pods, &reports);
    assert_eq!(roll.partition, Some(1));
    assert_eq!(
        roll.step,
        Step::Restart {
            pod: "events-1".into()
        }
    );
}

#[test]
fn a_controller_behind_the_spec_holds_the_partition() {
    let mut l = live(2);
    l.observed_generation = 3;
    let pods = [pod(0, OLD), pod(1, OLD), pod(2, OLD)];
    let roll = decide_with(Some(&l), &pods, &all_in_sync());
    assert_eq!(
        (roll.partition, &roll.step),
        (Some(2), &Step::Wait(Wait::Controller))
    );
    assert!(roll.held());
    assert_eq!(roll.progress(), None, "the rollout's own message stands");
    // Before the first status: every old-revision pod would look updated against a stale
    // revision, so nothing is decided, and the partition does not drop to 0.
    l.update_revision = None;
    l.observed_generation = 4;
    assert_eq!(decide_with(Some(&l), &pods, &[]).partition, Some(2));
}
