//! Event planning tests.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSetSpec;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use starling_config::{Profile, Tier};

use super::*;
use crate::crd::BrokerClusterSpec;
use crate::validate::fixtures::{cluster, try_spec};

fn observed(replicas: i32, hash: &str) -> StatefulSet {
    StatefulSet {
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    annotations: Some(BTreeMap::from([(
                        CONFIG_HASH_ANNOTATION.to_string(),
                        hash.to_string(),
                    )])),
                    ..ObjectMeta::default()
                }),
                spec: None,
            },
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

fn reasons(events: &[Planned]) -> Vec<&'static str> {
    events.iter().map(|e| e.reason).collect()
}

#[test]
fn create_rollout_and_scale() {
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    assert_eq!(reasons(&for_apply(None, &v)), vec!["Created"]);
    assert!(for_apply(Some(&observed(3, &v.config_hash)), &v).is_empty());
    assert_eq!(
        reasons(&for_apply(Some(&observed(3, "old")), &v)),
        vec!["ConfigRollout"]
    );
    let scaled = for_apply(Some(&observed(5, &v.config_hash)), &v);
    assert_eq!(reasons(&scaled), vec!["Scaled"]);
    assert_eq!(scaled[0].note, "scaled brokers from 5 to 3");
    assert_eq!(
        reasons(&for_apply(Some(&observed(1, "old")), &v)),
        vec!["ConfigRollout", "Scaled"]
    );
    assert!(for_apply(None, &v).iter().all(|e| !e.warning));
}

#[test]
fn a_rejection_is_announced_once() {
    let err = match try_spec(BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    }) {
        Err(e) => e,
        Ok(_) => panic!("must be refused"),
    };
    let first = for_rejection(None, &err);
    assert_eq!(
        first.as_ref().map(|e| (e.warning, e.reason)),
        Some((true, "SpecRejected"))
    );
    let status = BrokerClusterStatus {
        conditions: vec![Condition {
            type_: "Degraded".into(),
            status: "True".into(),
            reason: err.reason().as_str().into(),
            message: err.message(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }],
        ..BrokerClusterStatus::default()
    };
    assert!(for_rejection(Some(&status), &err).is_none());
}

#[test]
fn notes_are_cut_to_the_api_limit() {
    let long = "é".repeat(2000);
    let cut = truncate(&long, MAX_NOTE_BYTES);
    assert!(cut.len() <= MAX_NOTE_BYTES && cut.ends_with("..."));
    assert_eq!(truncate("short", MAX_NOTE_BYTES), "short");
    let ev = Planned {
        warning: true,
        reason: "ReconcileFailed",
        action: "Reconcile",
        note: long,
    }
    .to_event();
    assert!(ev.note.map(|n| n.len()).unwrap_or(0) <= MAX_NOTE_BYTES);
    assert_eq!(ev.type_, EventType::Warning);
}

#[test]
fn every_emitted_reason_is_documented() {
    let documented: Vec<&str> = EVENT_REASONS.iter().map(|(r, _, _)| *r).collect();
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let mut emitted = reasons(&for_apply(None, &v));
    emitted.extend(reasons(&for_apply(Some(&observed(1, "old")), &v)));
    emitted.push(for_error(&crate::error::Error::MissingObjectField("x")).reason);
    for r in emitted {
        assert!(documented.contains(&r), "{r}");
    }
    assert!(documented.contains(&"SpecRejected"));
}

#[test]
fn tier_changes_to_different_tiers_are_separate_event_series() {
    use starling_config::Tier;
    let up = for_tier_change(Tier::Medium, "tier small→medium: x");
    let down = for_tier_change(Tier::Small, "tier medium→small: y");
    assert_eq!((up.reason, down.reason), ("TierChanged", "TierChanged"));
    assert_ne!(
        up.action, down.action,
        "the recorder keys series by reason and action"
    );
    assert_eq!(up.to_event().note.as_deref(), Some("tier small→medium: x"));
    assert!(!up.warning);
}

#[test]
fn auth_mode_none_warns_once() {
    let required = cluster(Profile::Balanced, Tier::Small, |_| {});
    assert_eq!(for_auth_mode(None, &required), None);
    let none = try_spec(BrokerClusterSpec {
        auth: Some(crate::crd::AuthSpec {
            mode: starling_config::AuthMode::None,
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let warning = for_auth_mode(None, &none).unwrap_or_else(|| panic!("no warning"));
    assert!(warning.warning);
    assert_eq!(warning.reason, "AuthenticationDisabled");
    assert!(
        EVENT_REASONS
            .iter()
            .any(|(r, t, _)| *r == warning.reason && *t == "Warning")
    );
    let reported = BrokerClusterStatus {
        conditions: vec![Condition {
            type_: "AuthenticationDisabled".into(),
            status: "True".into(),
            reason: "AuthModeNone".into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }],
        ..BrokerClusterStatus::default()
    };
    assert_eq!(for_auth_mode(Some(&reported), &none), None);
}

#[test]
fn a_held_roll_reports_each_restart_and_each_new_blocker_once() {
    use crate::roll::report::SyncState;
    use crate::roll::{Roll, Step, Wait};
    let restart = Roll {
        partition: Some(1),
        from: 2,
        updated: 1,
        replicas: 3,
        step: Step::Restart {
            pod: "events-1".into(),
        },
    };
    let planned = for_roll(None, &restart);
    assert_eq!(planned.as_ref().map(|p| p.reason), Some("RollingBroker"));
    assert_eq!(
        planned.map(|p| p.note),
        Some(
            "every replica in sync: letting the StatefulSet restart events-1 (partition 2 to 1; \
             1/3 brokers updated)"
                .to_string()
        )
    );
    let waiting = Roll {
        partition: Some(2),
        from: 2,
        step: Step::Wait(Wait::Replica {
            pod: "events-0".into(),
            topic: "orders.a".into(),
            state: SyncState::Stopped,
        }),
        ..restart.clone()
    };
    let planned = for_roll(None, &waiting);
    assert_eq!(
        planned.as_ref().map(|p| (p.reason, p.warning)),
        Some(("RollWaitingForReplicas", false))
    );
    let note = planned.map(|p| p.note).unwrap_or_default();
    assert!(
        note.contains("events-0") && note.contains("orders.a"),
        "{note}"
    );
    // Already reported in the stored Progressing condition: not again.
    let stored = BrokerClusterStatus {
        conditions: vec![Condition {
            type_: "Progressing".into(),
            status: "True".into(),
            reason: "RollWaitingForReplicas".into(),
            message: note,
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }],
        ..BrokerClusterStatus::default()
    };
    assert_eq!(for_roll(Some(&stored), &waiting), None);
    // Waits for a pod, and steady decisions, emit nothing.
    let pod_wait = Roll {
        step: Step::Wait(Wait::NotReady {
            pod: "events-2".into(),
        }),
        ..waiting.clone()
    };
    assert_eq!(for_roll(None, &pod_wait), None);
    let steady = Roll {
        step: Step::Steady,
        partition: Some(0),
        ..waiting
    };
    assert_eq!(for_roll(None, &steady), None);
}

#[test]
fn a_held_scale_down_reports_each_new_blocker_and_its_stall_once() {
    use crate::members::leaving::Hold;
    use crate::members::{Held, MembersPlan};
    use crate::roll::report::SyncState;
    let held = |topics: usize, overdue: bool| MembersPlan {
        statefulset_replicas: 5,
        members: 3,
        members_changed_at: Timestamp::UNIX_EPOCH,
        wait: Some(crate::members::leaving::MOVE_POLL),
        held: Some(Held {
            hold: Hold::Replicas {
                pod: "events-4".into(),
                topics,
                first: "orders.a".into(),
                state: SyncState::InSync,
            },
            from: 5,
            to: 3,
            overdue,
        }),
    };
    let stored = |reason: &str, message: &str| BrokerClusterStatus {
        conditions: vec![Condition {
            type_: "Progressing".into(),
            status: "True".into(),
            reason: reason.into(),
            message: message.into(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
        }],
        ..BrokerClusterStatus::default()
    };
    let waiting = held(2, false);
    let planned = for_scale_down(None, &waiting).unwrap_or_else(|| panic!("an event"));
    assert_eq!(
        (planned.reason, planned.warning, planned.action),
        ("ScaleDownWaitingForReplicas", false, "Scale")
    );
    assert!(
        planned.note.contains("events-4") && planned.note.contains("2 replicated topic(s)"),
        "{}",
        planned.note
    );
    // The same wait already in the stored condition: not again; one topic fewer: again.
    let same = stored("ScaleDownWaitingForReplicas", &planned.note);
    assert_eq!(for_scale_down(Some(&same), &waiting), None);
    assert!(for_scale_down(Some(&same), &held(1, false)).is_some());
    // Past the bound: one warning, not repeated while the reason stays.
    let stalled =
        for_scale_down(Some(&same), &held(1, true)).unwrap_or_else(|| panic!("a warning"));
    assert_eq!(
        (stalled.reason, stalled.warning),
        ("ScaleDownStalled", true)
    );
    let already = stored("ScaleDownStalled", "an older message");
    assert_eq!(for_scale_down(Some(&already), &held(1, true)), None);
    // Not held: nothing.
    let free = MembersPlan {
        held: None,
        wait: None,
        ..held(1, false)
    };
    assert_eq!(for_scale_down(None, &free), None);
    let documented: Vec<&str> = EVENT_REASONS.iter().map(|(r, _, _)| *r).collect();
    for r in [planned.reason, stalled.reason] {
        assert!(documented.contains(&r), "{r}");
    }
}
