//! Status tests: conditions from observed StatefulSets in every rollout state.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{StatefulSetSpec, StatefulSetStatus};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use starling_config::{Profile, Tier};

use super::*;
use crate::crd::BrokerClusterSpec;
use crate::crd::conditions::{ConditionType, find};
use crate::validate::fixtures::{cluster, try_spec};

fn at(secs: i64) -> Time {
    Time(Timestamp::from_second(1_700_000_000 + secs).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// A StatefulSet with `replicas` desired, `ready`/`updated` pods, the given template hash, and
/// whether its controller has observed the latest generation.
fn sts(
    replicas: i32,
    pods: i32,
    ready: i32,
    updated: i32,
    hash: &str,
    observed: bool,
) -> StatefulSet {
    StatefulSet {
        metadata: ObjectMeta {
            generation: Some(4),
            ..ObjectMeta::default()
        },
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
        status: Some(StatefulSetStatus {
            observed_generation: Some(if observed { 4 } else { 3 }),
            replicas: pods,
            ready_replicas: Some(ready),
            updated_replicas: Some(updated),
            current_revision: Some("r1".into()),
            update_revision: Some(if updated == pods { "r1" } else { "r2" }.into()),
            ..StatefulSetStatus::default()
        }),
    }
}

fn compute_with(
    v: &ValidatedCluster,
    s: Option<&StatefulSet>,
    paused: bool,
    previous: Option<&BrokerClusterStatus>,
    apply_error: Option<&str>,
    now: Time,
) -> BrokerClusterStatus {
    compute(&StatusInput {
        names: &v.names,
        namespace: "messaging",
        generation: Some(7),
        paused,
        desired: Ok(v),
        sts: s,
        previous,
        apply_error: apply_error.map(|e| (Reason::ApplyFailed, e.to_string())),
        members: None,
        placement: None,
        volumes: None,
        users_table: None,
        roll: None,
        topic_replicas: None,
        now,
    })
}

fn reason(status: &BrokerClusterStatus, t: ConditionType) -> (String, String) {
    find(Some(status), t)
        .map(|c| (c.status.clone(), c.reason.clone()))
        .unwrap_or_default()
}

fn r(status: &str, reason: Reason) -> (String, String) {
    (status.to_string(), reason.as_str().to_string())
}

#[test]
fn ready_only_when_every_replica_is_ready_with_the_current_hash() {
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let h = v.config_hash.clone();
    let cases = [
        (
            None,
            r("False", Reason::NotCreated),
            r("True", Reason::Creating),
        ),
        (
            Some(sts(3, 3, 3, 3, &h, true)),
            r("True", Reason::AllReplicasReady),
            r("False", Reason::Stable),
        ),
        (
            Some(sts(3, 3, 2, 3, &h, true)),
            r("False", Reason::ReplicasNotReady),
            r("False", Reason::Stable),
        ),
        (
            Some(sts(3, 3, 3, 3, "old", true)),
            r("False", Reason::RolloutInProgress),
            r("True", Reason::RollingOut),
        ),
        (
            Some(sts(3, 3, 3, 1, &h, true)),
            r("False", Reason::RolloutInProgress),
            r("True", Reason::RollingOut),
        ),
        (
            Some(sts(3, 3, 3, 3, &h, false)),
            r("False", Reason::RolloutInProgress),
            r("True", Reason::RollingOut),
        ),
        (
            Some(sts(3, 2, 2, 2, &h, true)),
            r("False", Reason::ReplicasNotReady),
            r("True", Reason::Scaling),
        ),
    ];
    for (s, ready, progressing) in cases {
        let status = compute_with(&v, s.as_ref(), false, None, None, at(0));
        assert_eq!(reason(&status, ConditionType::Ready), ready, "{s:?}");
        assert_eq!(
            reason(&status, ConditionType::Progressing),
            progressing,
            "{s:?}"
        );
        assert_eq!(
            reason(&status, ConditionType::Degraded),
            r("False", Reason::AsExpected)
        );
    }
}

#[test]
fn counters_selector_endpoints_and_rendered_values() {
    let v = cluster(Profile::Latency, Tier::Medium, |_| {});
    let s = sts(3, 3, 2, 3, &v.config_hash, true);
    let status = compute_with(&v, Some(&s), false, None, None, at(0));
    assert_eq!(status.replicas, 3);
    assert_eq!(status.ready_replicas, 2);
    assert_eq!(status.ready.as_deref(), Some("2/3"));
    assert_eq!(status.observed_generation, Some(7));
    assert_eq!(status.tier, Some(Tier::Medium));
    assert_eq!(status.profile, Some(Profile::Latency));
    assert_eq!(status.config_hash, Some(v.config_hash.clone()));
    assert_eq!(status.selector, Some(v.names.selector_string()));
    let ep = status.endpoints.unwrap_or_default();
    assert_eq!(
        (ep.host.as_str(), ep.quic_port, ep.http_port),
        ("events.messaging.svc", 7400, 9400)
    );
    assert_eq!(status.conditions.len(), 7);
    let disk = status.conditions.iter().find(|c| c.type_ == "DiskFull");
    assert_eq!(disk.map(|c| c.reason.as_str()), Some("NoDurableTopics"));
    let users = status
        .conditions
        .iter()
        .find(|c| c.type_ == "UsersTableHealthy");
    assert_eq!(
        users.map(|c| (c.status.as_str(), c.reason.as_str())),
        Some(("Unknown", "UsersTableUnknown")),
        "authentication on, nothing read yet"
    );
    assert!(
        status
            .conditions
            .iter()
            .all(|c| c.observed_generation == Some(7))
    );
}

#[test]
fn paused_reports_status_without_judging_against_the_new_spec() {
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let old = sts(3, 3, 3, 3, "old-hash", true);
    let status = compute_with(&v, Some(&old), true, None, None, at(0));
    assert_eq!(
        reason(&status, ConditionType::Ready),
        r("True", Reason::AllReplicasReady)
    );
    assert_eq!(
        reason(&status, ConditionType::Progressing),
        r("False", Reason::Paused)
    );
    let msg = find(Some(&status), ConditionType::Progressing).map(|c| c.message.clone());
    assert!(
        msg.unwrap_or_default()
            .contains("applied when spec.paused is false")
    );
    assert_eq!(
        status.config_hash.as_deref(),
        Some("old-hash"),
        "reports what runs"
    );
}

#[test]
fn refused_spec_is_degraded_and_keeps_the_last_rendered_values() {
    let err = match try_spec(BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    }) {
        Err(e) => e,
        Ok(_) => panic!("replicas 0 must be refused"),
    };
    let names = Names::new("events");
    let previous = BrokerClusterStatus {
        tier: Some(Tier::Small),
        profile: Some(Profile::Balanced),
        effective_tier: Some(Tier::Medium),
        ..BrokerClusterStatus::default()
    };
    let s = sts(1, 1, 1, 1, "h1", true);
    let status = compute(&StatusInput {
        names: &names,
        namespace: "messaging",
        generation: Some(2),
        paused: false,
        desired: Err(&err),
        sts: Some(&s),
        previous: Some(&previous),
        apply_error: None,
        members: None,
        placement: None,
        volumes: None,
        users_table: None,
        roll: None,
        topic_replicas: None,
        now: at(0),
    });
    assert_eq!(
        reason(&status, ConditionType::Degraded),
        r("True", Reason::InvalidSpec)
    );
    assert_eq!(
        reason(&status, ConditionType::Ready),
        r("False", Reason::SpecRejected)
    );
    let msg = find(Some(&status), ConditionType::Degraded).map(|c| c.message.clone());
    assert!(
        msg.unwrap_or_default()
            .contains("replicas must be at least 1")
    );
    assert_eq!(status.tier, Some(Tier::Small));
    assert_eq!(
        status.effective_tier,
        Some(Tier::Medium),
        "owned by the autoscaler"
    );
    assert_eq!(status.config_hash.as_deref(), Some("h1"));
}

#[test]
fn apply_failures_are_degraded() {
    let v = cluster(Profile::Balanced, Tier::Small, |_| {});
    let status = compute_with(
        &v,
        None,
        false,
        None,
        Some("apply StatefulSet events: forbidden"),
        at(0),
    );
    assert_eq!(
        reason(&status, ConditionType::Degraded),
        r("True", Reason::ApplyFailed)
    );
}

#[test]
fn transition_times_survive_unchanged_statuses() {
    let v = cluster(Profile::Balanced, Tier::Small, |_| {});
    let ready = sts(1, 1, 1, 1, &v.config_hash, true);
    let first = compute_with(&v, Some(&ready), false, None, None, at(0));
    let again = compute_with(&v, Some(&ready), false, Some(&first), None, at(60));
    assert_eq!(
        first, again,
        "an unchanged status is equal, so it is not rewritten"
    );
    let not_ready = sts(1, 1, 0, 1, &v.config_hash, true);
    let later = compute_with(&v, Some(&not_ready), false, Some(&again), None, at(120));
    let t = |s: &BrokerClusterStatus, c| find(Some(s), c).map(|c| c.last_transition_time.clone());
    assert_eq!(t(&later, ConditionType::Ready), Some(at(120)));
    assert_eq!(t(&later, ConditionType::Degraded), Some(at(0)));
}

#[test]
fn every_reason_belongs_to_one_condition_with_a_fixed_status() {
    for c in ConditionType::ALL {
        let reasons: Vec<&Reason> = Reason::ALL.iter().filter(|r| r.condition() == c).collect();
        assert!(reasons.iter().any(|r| r.status() == "True"), "{c:?}");
        assert!(reasons.iter().any(|r| r.status() == "False"), "{c:?}");
    }
    for r in Reason::ALL {
        assert!(!r.doc().is_empty());
        assert!(r.as_str().chars().all(|c| c.is_ascii_alphanumeric()));
    }
}

#[test]
fn members_are_recorded_and_a_lagging_member_list_is_scaling() {
    use crate::members::MembersPlan;
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    // Every pod is ready at 3 but the members are still 2: not Ready yet, Scaling.
    let ready = sts(3, 3, 3, 3, &v.config_hash, true);
    let plan = MembersPlan {
        statefulset_replicas: 3,
        members: 2,
        members_changed_at: at(10).0,
        wait: Some(std::time::Duration::from_secs(5)),
        held: None,
    };
    let input = |members, previous| StatusInput {
        names: &v.names,
        namespace: "messaging",
        generation: Some(7),
        paused: false,
        desired: Ok(&v),
        sts: Some(&ready),
        previous,
        apply_error: None,
        members,
        placement: None,
        volumes: None,
        users_table: None,
        roll: None,
        topic_replicas: None,
        now: at(20),
    };
    let status = compute(&input(Some(&plan), None));
    assert_eq!(status.members, Some(2));
    assert_eq!(status.members_changed_at, Some(at(10)));
    assert_eq!(
        reason(&status, ConditionType::Progressing),
        r("True", Reason::Scaling)
    );
    assert_eq!(
        reason(&status, ConditionType::Ready),
        r("False", Reason::ReplicasNotReady)
    );
    // Nothing applied (no plan): the previous values are kept.
    let kept = compute(&input(None, Some(&status)));
    assert_eq!(kept.members, Some(2));
    assert_eq!(kept.members_changed_at, Some(at(10)));
    // Members caught up: Ready.
    let done = MembersPlan {
        members: 3,
        wait: None,
        ..plan.clone()
    };
    let status = compute(&input(Some(&done), Some(&status)));
    assert_eq!(
        reason(&status, ConditionType::Ready),
        r("True", Reason::AllReplicasReady)
    );
}

#[test]
fn ready_waits_until_every_broker_is_available() {
    // Every broker ready and updated, but the last one restarted less than minReadySeconds
    // ago: not Ready yet, and the message says why.
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let mut s = sts(3, 3, 3, 3, &v.config_hash, true);
    if let Some(st) = s.status.as_mut() {
        st.available_replicas = Some(2);
    }
    assert_eq!(
        rollout(Some(&s), 3, Some(&v.config_hash)),
        Rollout::NotReady
    );
    let status = compute_with(&v, Some(&s), false, None, None, at(0));
    let ready = find(Some(&status), ConditionType::Ready)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
        .unwrap_or_default();
    assert_eq!(
        (ready.0.as_str(), ready.1.as_str()),
        ("False", "ReplicasNotReady")
    );
    assert!(ready.2.contains("hand-off grace"), "{}", ready.2);
    if let Some(st) = s.status.as_mut() {
        st.available_replicas = Some(3);
    }
    assert_eq!(rollout(Some(&s), 3, Some(&v.config_hash)), Rollout::Ready);
}

#[test]
fn auth_mode_none_is_reported_in_its_own_condition() {
    let required = cluster(Profile::Balanced, Tier::Small, |_| {});
    let status = compute_with(&required, None, false, None, None, at(0));
    assert_eq!(
        reason(&status, ConditionType::AuthenticationDisabled),
        r("False", Reason::AuthRequired)
    );
    let none = try_spec(BrokerClusterSpec {
        auth: Some(crate::crd::AuthSpec {
            mode: starling_config::AuthMode::None,
        }),
        ..BrokerClusterSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let status = compute_with(&none, None, false, Some(&status), None, at(5));
    assert_eq!(
        reason(&status, ConditionType::AuthenticationDisabled),
        r("True", Reason::AuthModeNone)
    );
    // A refused spec keeps the condition as it was.
    let refused = try_spec(BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    })
    .err()
    .unwrap_or_else(|| panic!("replicas 0 is refused"));
    let kept = compute(&StatusInput {
        names: &none.names,
        namespace: "messaging",
        generation: Some(8),
        paused: false,
        desired: Err(&refused),
        sts: None,
        previous: Some(&status),
        apply_error: None,
        members: None,
        placement: None,
        volumes: None,
        users_table: None,
        roll: None,
        topic_replicas: None,
        now: at(9),
    });
    assert_eq!(
        reason(&kept, ConditionType::AuthenticationDisabled),
        r("True", Reason::AuthModeNone)
    );
}

#[test]
fn storage_reports_the_claim_template_and_retention_policy_the_statefulset_has() {
    use crate::crd::{ClaimRetention, ClaimRetentionPolicy, StorageSpec, StorageStatus};
    let policy = ClaimRetentionPolicy {
        when_deleted: ClaimRetention::Delete,
        when_scaled: ClaimRetention::Retain,
    };
    let v = crate::validate::fixtures::spec_cluster(BrokerClusterSpec {
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            storage_class_name: Some("fast".into()),
            persistent_volume_claim_retention_policy: policy,
        }),
        ..BrokerClusterSpec::default()
    });
    let mut rendered = crate::build::render(&v).statefulset;
    let expected = StorageStatus {
        size: "10Gi".into(),
        storage_class_name: Some("fast".into()),
        claim_template: "data".into(),
        persistent_volume_claim_retention_policy: policy,
    };
    let status = compute_with(&v, Some(&rendered), false, None, None, at(0));
    assert_eq!(status.storage.as_ref(), Some(&expected));
    assert_eq!(
        status.reconciler_fields().storage.as_ref(),
        Some(&expected),
        "the reconciler's field manager owns status.storage"
    );
    let json = serde_json::to_value(&status).unwrap_or_default();
    assert_eq!(
        json["storage"],
        serde_json::json!({"size": "10Gi", "storageClassName": "fast", "claimTemplate": "data",
                           "persistentVolumeClaimRetentionPolicy":
                               {"whenDeleted": "Delete", "whenScaled": "Retain"}})
    );
    // A StatefulSet without the policy (rendered by an older operator) retains, as Kubernetes does.
    if let Some(spec) = rendered.spec.as_mut() {
        spec.persistent_volume_claim_retention_policy = None;
    }
    assert_eq!(
        storage(Some(&rendered)).map(|s| s.persistent_volume_claim_retention_policy),
        Some(ClaimRetentionPolicy::default())
    );
    // No StatefulSet, or one without a claim template: no storage.
    assert_eq!(
        compute_with(&v, None, false, None, None, at(0)).storage,
        None
    );
    let plain = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let plain_sts = crate::build::render(&plain).statefulset;
    assert_eq!(
        compute_with(&plain, Some(&plain_sts), false, None, None, at(0)).storage,
        None
    );
}

/// `ReplicationDegraded` in the computed status: written for every accepted spec, from the
/// member count and the placement handed in, and kept as it was for a refused spec.
#[test]
fn replication_degraded_follows_the_members_and_the_placement() {
    use crate::members::MembersPlan;
    use crate::status::replication::{Observation, Placement};
    let v = cluster(Profile::Balanced, Tier::Medium, |v| {
        v.replicas = 3;
        v.config.durable_replicas = 3;
        v.config.durable_topics = vec!["orders.*".into()];
    });
    let ready = sts(3, 3, 3, 3, &v.config_hash, true);
    let plan = |members| MembersPlan {
        statefulset_replicas: 3,
        members,
        members_changed_at: at(10).0,
        wait: None,
        held: None,
    };
    let shared: Observation = Ok(Placement {
        nodes: BTreeMap::from([
            (
                "n1".to_string(),
                vec!["events-0".to_string(), "events-1".to_string()],
            ),
            ("n2".to_string(), vec!["events-2".to_string()]),
        ]),
    });
    let apart: Observation = Ok(Placement {
        nodes: BTreeMap::from([
            ("n1".to_string(), vec!["events-0".to_string()]),
            ("n2".to_string(), vec!["events-1".to_string()]),
            ("n3".to_string(), vec!["events-2".to_string()]),
        ]),
    });
    let with = |members: &MembersPlan, placement, previous| {
        compute(&StatusInput {
            names: &v.names,
            namespace: "messaging",
            generation: Some(7),
            paused: false,
            desired: Ok(&v),
            sts: Some(&ready),
            previous,
            apply_error: None,
            members: Some(members),
            placement: Some(placement),
            volumes: None,
            users_table: None,
            roll: None,
            topic_replicas: None,
            now: at(20),
        })
    };
    let two = plan(2);
    let three = plan(3);
    let scaling = with(&two, &apart, None);
    assert_eq!(
        reason(&scaling, ConditionType::ReplicationDegraded),
        r("True", Reason::TooFewBrokers)
    );
    let shares = with(&three, &shared, Some(&scaling));
    assert_eq!(
        reason(&shares, ConditionType::ReplicationDegraded),
        r("True", Reason::BrokersShareNode)
    );
    let msg = find(Some(&shares), ConditionType::ReplicationDegraded)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(msg.contains("n1: events-0, events-1"), "{msg}");
    let fine = with(&three, &apart, Some(&shares));
    assert_eq!(
        reason(&fine, ConditionType::ReplicationDegraded),
        r("False", Reason::ReplicasApart)
    );

    // One copy: not replicated, whatever the placement.
    let single = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let status = compute_with(&single, Some(&ready), false, None, None, at(0));
    assert_eq!(
        reason(&status, ConditionType::ReplicationDegraded),
        r("False", Reason::NotReplicated)
    );

    // A refused spec keeps the condition as it was.
    let refused = try_spec(BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    })
    .err()
    .unwrap_or_else(|| panic!("replicas 0 is refused"));
    let kept = compute(&StatusInput {
        names: &v.names,
        namespace: "messaging",
        generation: Some(8),
        paused: false,
        desired: Err(&refused),
        sts: None,
        previous: Some(&shares),
        apply_error: None,
        members: None,
        placement: None,
        volumes: None,
        users_table: None,
        roll: None,
        topic_replicas: None,
        now: at(30),
    });
    assert_eq!(
        reason(&kept, ConditionType::ReplicationDegraded),
        r("True", Reason::BrokersShareNode)
    );
}

#[test]
fn disk_full_follows_the_brokers_volume_answers() {
    use crate::status::volumes::{BrokerVolume, Observation, VolumeReport};
    let v = cluster(Profile::Balanced, Tier::Medium, |v| {
        v.replicas = 2;
        v.config.durable_topics = vec!["orders.*".into()];
    });
    let ready = sts(2, 2, 2, 2, &v.config_hash, true);
    let answer = |pod: &str, free: u64, full_logs: u64| BrokerVolume {
        pod: pod.into(),
        answer: Ok(VolumeReport {
            free_bytes: Some(free),
            total_bytes: Some(1 << 30),
            full_logs,
            full: full_logs > 0,
        }),
    };
    let with = |volumes: Option<&Observation>, previous| {
        compute(&StatusInput {
            names: &v.names,
            namespace: "messaging",
            generation: Some(7),
            paused: false,
            desired: Ok(&v),
            sts: Some(&ready),
            previous,
            apply_error: None,
            members: None,
            placement: None,
            volumes,
            users_table: None,
            roll: None,
            topic_replicas: None,
            now: at(20),
        })
    };
    let unread = with(None, None);
    assert_eq!(
        reason(&unread, ConditionType::DiskFull),
        r("Unknown", Reason::VolumesUnknown)
    );
    let full: Observation = Ok(vec![
        answer("events-0", 1 << 20, 0),
        answer("events-1", 0, 1),
    ]);
    let status = with(Some(&full), Some(&unread));
    assert_eq!(
        reason(&status, ConditionType::DiskFull),
        r("True", Reason::VolumeFull)
    );
    let msg = find(Some(&status), ConditionType::DiskFull)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        msg.starts_with("events-1: 1 durable log refuses appends"),
        "{msg}"
    );
    // Space returned: False again.
    let space: Observation = Ok(vec![
        answer("events-0", 1 << 20, 0),
        answer("events-1", 5 << 20, 0),
    ]);
    let back = with(Some(&space), Some(&status));
    assert_eq!(
        reason(&back, ConditionType::DiskFull),
        r("False", Reason::VolumesHaveSpace)
    );
}

#[test]
fn a_held_roll_shows_what_it_waits_for_in_progressing() {
    use crate::roll::report::SyncState;
    use crate::roll::{Roll, Step, Wait};
    let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
    let rolling = sts(3, 3, 3, 1, &v.config_hash, true);
    let waiting = Roll {
        partition: Some(2),
        from: 2,
        updated: 1,
        replicas: 3,
        step: Step::Wait(Wait::Replica {
            pod: "events-0".into(),
            topic: "orders.a".into(),
            state: SyncState::NoLeader,
        }),
    };
    let with = |roll: Option<&Roll>| {
        compute(&StatusInput {
            names: &v.names,
            namespace: "messaging",
            generation: Some(7),
            paused: false,
            desired: Ok(&v),
            sts: Some(&rolling),
            previous: None,
            apply_error: None,
            members: None,
            placement: None,
            volumes: None,
            users_table: None,
            roll,
            topic_replicas: None,
            now: at(20),
        })
    };
    let status = with(Some(&waiting));
    assert_eq!(
        reason(&status, ConditionType::Progressing),
        r("True", Reason::RollWaitingForReplicas)
    );
    let message = find(Some(&status), ConditionType::Progressing)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("events-0") && message.contains("orders.a"),
        "{message}"
    );
    // A roll that moves on (a restart let through) keeps the rollout's own reason.
    let moving = Roll {
        step: Step::Restart {
            pod: "events-1".into(),
        },
        partition: Some(1),
        ..waiting.clone()
    };
    for roll in [Some(&moving), None] {
        assert_eq!(
            reason(&with(roll), ConditionType::Progressing),
            r("True", Reason::RollingOut)
        );
    }
    // Nothing rolling: a wait does not turn a stable cluster into a progressing one.
    let ready = sts(3, 3, 3, 3, &v.config_hash, true);
    let status = compute(&StatusInput {
        sts: Some(&ready),
        roll: Some(&waiting),
        topic_replicas: None,
        names: &v.names,
        namespace: "messaging",
        generation: Some(7),
        paused: false,
        desired: Ok(&v),
        previous: None,
        apply_error: None,
        members: None,
        placement: None,
        volumes: None,
        users_table: None,
        now: at(20),
    });
    assert_eq!(
        reason(&status, ConditionType::Progressing),
        r("False", Reason::Stable)
    );
}

#[test]
fn a_held_scale_down_shows_what_it_waits_for_in_progressing() {
    use crate::members::leaving::{Hold, MOVE_POLL};
    use crate::members::{Held, MembersPlan};
    let v = cluster(Profile::Balanced, Tier::Medium, |v| v.replicas = 3);
    // The StatefulSet still runs 5 pods, the members are 3.
    let five = sts(5, 5, 5, 5, &v.config_hash, true);
    let held = |overdue| MembersPlan {
        statefulset_replicas: 5,
        members: 3,
        members_changed_at: at(10).0,
        wait: Some(MOVE_POLL),
        held: Some(Held {
            hold: Hold::Unknown {
                pod: "events-4".into(),
                why: "connection refused".into(),
            },
            from: 5,
            to: 3,
            overdue,
        }),
    };
    let with = |plan: &MembersPlan| {
        compute(&StatusInput {
            names: &v.names,
            namespace: "messaging",
            generation: Some(7),
            paused: false,
            desired: Ok(&v),
            sts: Some(&five),
            previous: None,
            apply_error: None,
            members: Some(plan),
            placement: None,
            volumes: None,
            users_table: None,
            roll: None,
            topic_replicas: None,
            now: at(20),
        })
    };
    let waiting = with(&held(false));
    assert_eq!(
        reason(&waiting, ConditionType::Progressing),
        r("True", Reason::ScaleDownWaitingForReplicas)
    );
    let msg = find(Some(&waiting), ConditionType::Progressing)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        msg.contains("from 5 to 3")
            && msg.contains("events-4")
            && msg.contains("connection refused"),
        "{msg}"
    );
    assert_eq!(
        reason(&with(&held(true)), ConditionType::Progressing),
        r("False", Reason::ScaleDownStalled)
    );
    // Not held: the plain Scaling reason.
    let free = MembersPlan {
        held: None,
        wait: None,
        ..held(false)
    };
    assert_eq!(
        reason(&with(&free), ConditionType::Progressing),
        r("True", Reason::Scaling)
    );
}

/// A BrokerTopic's replica count makes `ReplicationDegraded` judge the placement of a cluster
/// whose own knobs keep one copy.
#[test]
fn a_replicated_broker_topic_is_judged_like_durable_replicas() {
    use crate::status::replication::{Observation, Placement};
    let v = cluster(Profile::Balanced, Tier::Medium, |v| v.replicas = 3);
    assert_eq!(v.replication(), None);
    let ready = sts(3, 3, 3, 3, &v.config_hash, true);
    let shared: Observation = Ok(Placement {
        nodes: BTreeMap::from([(
            "n1".to_string(),
            vec![
                "events-0".to_string(),
                "events-1".to_string(),
                "events-2".to_string(),
            ],
        )]),
    });
    let with = |topic_replicas| {
        compute(&StatusInput {
            names: &v.names,
            namespace: "messaging",
            generation: Some(7),
            paused: false,
            desired: Ok(&v),
            sts: Some(&ready),
            previous: None,
            apply_error: None,
            members: None,
            placement: Some(&shared),
            volumes: None,
            users_table: None,
            roll: None,
            topic_replicas,
            now: at(20),
        })
    };
    assert_eq!(
        reason(&with(None), ConditionType::ReplicationDegraded),
        r("False", Reason::NotReplicated)
    );
    let degraded = with(Some(3));
    assert_eq!(
        reason(&degraded, ConditionType::ReplicationDegraded),
        r("True", Reason::BrokersShareNode)
    );
    let msg = find(Some(&degraded), ConditionType::ReplicationDegraded)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(msg.contains("n1: events-0, events-1, events-2"), "{msg}");
    assert_eq!(
        reason(&with(Some(5)), ConditionType::ReplicationDegraded),
        r("True", Reason::TooFewBrokers)
    );
}
