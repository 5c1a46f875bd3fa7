//! A BrokerTopic's status: its `Ready` condition from the operator's verdict
//! ([`crate::validate::topics`]) and, for an accepted one, the replicated topics its policy
//! applies to as the brokers' `GET /replicas` report them ([`by_policy`]). Pure: the clock is
//! passed in.
//!
//! Per topic: the leader is the pod whose replica says it leads; the in-sync replicas are the
//! pods whose replica reports `in_sync`; the replicas are the voters of the topic's Raft
//! membership as the leader reports them (else the brokers that report a replica), beside the
//! count the brokers' topics document configures; the lag is how many log entries the furthest replica
//! has still to apply to reach the newest index reported (the leader's applied index, else
//! the newest commit a follower heard of). A broker whose answer could not be read adds
//! nothing, so its replica counts as not in sync. Which policy a topic belongs to is what the
//! brokers report (`policy`), else the shared matching rule over the document the operator
//! wrote ([`TopicsDocument::policy_for`]), so the status agrees with what the brokers apply.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use starling_config::topics::TopicsDocument;

use crate::crd::topic::{
    BrokerTopic, BrokerTopicStatus, MAX_LISTED_TOPICS, TopicReplicaStatus, topic_reasons,
};
use crate::roll::BrokerReplicas;

/// One topic's replicas across the brokers that answered.
#[derive(Default)]
struct Seen {
    leader: Option<String>,
    leader_applied: Option<u64>,
    in_sync: Vec<String>,
    replicas: u32,
    /// The voters the leader (else any replica) reports.
    voters: Option<u32>,
    /// The replica count the brokers' topics document gives the topic.
    configured: Option<u32>,
    /// (applied, newest commit heard of) of every replica.
    indexes: Vec<(Option<u64>, Option<u64>)>,
    policy: Option<String>,
}

/// Every replicated topic the brokers report, grouped by the name of the policy that applies
/// to it (topics no policy matches are left out), each group sorted by topic name.
pub fn by_policy(
    reports: &[BrokerReplicas],
    document: &TopicsDocument,
) -> BTreeMap<String, Vec<TopicReplicaStatus>> {
    let mut topics: BTreeMap<&str, Seen> = BTreeMap::new();
    for broker in reports {
        let Ok(replicas) = &broker.answer else {
            continue;
        };
        for r in replicas {
            let seen = topics.entry(r.topic.as_str()).or_default();
            seen.replicas = seen.replicas.saturating_add(1);
            if r.is_leader {
                seen.leader = Some(broker.pod.clone());
                seen.leader_applied = r.applied;
            }
            if r.is_leader || seen.voters.is_none() {
                seen.voters = r.current_replicas.or(seen.voters);
                seen.configured = r.configured_replicas.or(seen.configured);
            }
            if r.sync == crate::roll::report::SyncState::InSync {
                seen.in_sync.push(broker.pod.clone());
            }
            seen.indexes.push((r.applied, r.leader_commit));
            if seen.policy.is_none() || r.is_leader {
                seen.policy = r.policy.clone().or(seen.policy.take());
            }
        }
    }
    let mut out: BTreeMap<String, Vec<TopicReplicaStatus>> = BTreeMap::new();
    for (topic, mut seen) in topics {
        let policy = seen
            .policy
            .take()
            .or_else(|| document.policy_for(topic).map(|p| p.name.clone()));
        let Some(policy) = policy else {
            continue;
        };
        seen.in_sync.sort();
        out.entry(policy).or_default().push(TopicReplicaStatus {
            name: topic.to_string(),
            leader: seen.leader,
            in_sync: seen.in_sync,
            replicas: seen.voters.unwrap_or(seen.replicas),
            configured_replicas: seen.configured,
            lag: lag(seen.leader_applied, &seen.indexes),
        });
    }
    out
}

/// Entries the furthest replica has still to apply to reach the newest index reported; `None`
/// when no replica reports an index.
fn lag(leader_applied: Option<u64>, indexes: &[(Option<u64>, Option<u64>)]) -> Option<u64> {
    let newest = leader_applied.or_else(|| indexes.iter().filter_map(|(_, c)| *c).max())?;
    indexes
        .iter()
        .map(|(applied, _)| newest.saturating_sub(applied.unwrap_or(0)))
        .max()
}

/// The status to store for `topic`: `Ready` (true for `Accepted`) with `reason` and
/// `message`, the transition time kept while the condition's status stays the same, and,
/// when `topics` is given, at most [`MAX_LISTED_TOPICS`] of them with the count of all. An
/// accepted topic whose brokers were not read keeps the topics it reported before.
pub fn status_of(
    topic: &BrokerTopic,
    reason: &str,
    message: &str,
    topics: Option<&[TopicReplicaStatus]>,
    now: Time,
) -> BrokerTopicStatus {
    let ready = reason == topic_reasons::ACCEPTED;
    let status = if ready { "True" } else { "False" };
    let previous = topic.status.as_ref();
    let last_transition_time = previous
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .filter(|c| c.status == status)
        .map_or(now, |c| c.last_transition_time.clone());
    let (listed, count) = match (ready, topics) {
        (false, _) => (Vec::new(), None),
        (true, Some(all)) => (
            all.iter().take(MAX_LISTED_TOPICS).cloned().collect(),
            Some(u32::try_from(all.len()).unwrap_or(u32::MAX)),
        ),
        (true, None) => previous.map_or((Vec::new(), None), |s| (s.topics.clone(), s.topic_count)),
    };
    BrokerTopicStatus {
        observed_generation: topic.metadata.generation,
        conditions: vec![Condition {
            type_: "Ready".to_string(),
            status: status.to_string(),
            reason: reason.to_string(),
            message: message.to_string(),
            observed_generation: topic.metadata.generation,
            last_transition_time,
        }],
        topics: listed,
        topic_count: count,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::jiff::Timestamp;
    use starling_config::topics::TopicPolicy;

    use super::*;
    use crate::crd::topic::BrokerTopicSpec;
    use crate::roll::report::{ReplicaReport, SyncState};

    fn report(topic: &str, sync: SyncState, leader: bool, applied: u64) -> ReplicaReport {
        let mut r = ReplicaReport::new(topic, sync);
        r.is_leader = leader;
        r.applied = Some(applied);
        r.leader_commit = Some(applied.max(10));
        r
    }

    fn broker(pod: &str, answer: Result<Vec<ReplicaReport>, String>) -> BrokerReplicas {
        BrokerReplicas {
            pod: pod.into(),
            answer,
        }
    }

    fn document() -> TopicsDocument {
        TopicsDocument::new(vec![
            TopicPolicy::new("orders", "orders.*"),
            TopicPolicy::new("paid", "orders.paid"),
        ])
    }

    #[test]
    fn leader_in_sync_replicas_and_lag_per_topic_grouped_by_policy() {
        let catching_up = SyncState::CatchingUp {
            applied: Some(4),
            target: 10,
        };
        let reports = [
            broker(
                "events-0",
                Ok(vec![
                    report("orders.new", SyncState::InSync, true, 10),
                    report("orders.paid", SyncState::InSync, false, 10),
                    report("other", SyncState::InSync, true, 3),
                ]),
            ),
            broker(
                "events-1",
                Ok(vec![
                    report("orders.new", catching_up, false, 4),
                    report("orders.paid", SyncState::InSync, true, 12),
                ]),
            ),
            broker("events-2", Err("connection refused".into())),
        ];
        let got = by_policy(&reports, &document());
        assert_eq!(got.keys().collect::<Vec<_>>(), ["orders", "paid"]);
        assert_eq!(
            got["orders"],
            [TopicReplicaStatus {
                name: "orders.new".into(),
                leader: Some("events-0".into()),
                in_sync: vec!["events-0".into()],
                replicas: 2,
                configured_replicas: None,
                lag: Some(6),
            }]
        );
        assert_eq!(
            got["paid"],
            [TopicReplicaStatus {
                name: "orders.paid".into(),
                leader: Some("events-1".into()),
                in_sync: vec!["events-0".into(), "events-1".into()],
                replicas: 2,
                configured_replicas: None,
                lag: Some(2),
            }]
        );
    }

    #[test]
    fn the_policy_the_brokers_report_wins_over_the_document() {
        let mut r = report("orders.new", SyncState::InSync, true, 1);
        r.policy = Some("paid".into());
        r.current_replicas = Some(3);
        r.configured_replicas = Some(5);
        let got = by_policy(&[broker("events-0", Ok(vec![r]))], &document());
        assert_eq!(got.keys().collect::<Vec<_>>(), ["paid"]);
        // The leader's voters and the configured count, as the broker reports them.
        assert_eq!(
            (got["paid"][0].replicas, got["paid"][0].configured_replicas),
            (3, Some(5))
        );
        // Without indexes there is no lag.
        let bare = ReplicaReport::new("orders.x", SyncState::Blank);
        let got = by_policy(&[broker("events-0", Ok(vec![bare]))], &document());
        assert_eq!(got["orders"][0].lag, None);
        assert_eq!(got["orders"][0].leader, None);
    }

    fn topic() -> BrokerTopic {
        let mut t = BrokerTopic::new(
            "orders",
            BrokerTopicSpec {
                cluster_ref: "events".into(),
                topic: "orders.*".into(),
                replicas: Some(3),
                retention: None,
                fsync: None,
                max_message_bytes: None,
            },
        );
        t.metadata.generation = Some(2);
        t
    }

    #[test]
    fn the_status_lists_at_most_twenty_topics_and_counts_them_all() {
        let all: Vec<TopicReplicaStatus> = (0..25)
            .map(|i| TopicReplicaStatus {
                name: format!("orders.{i:02}"),
                ..TopicReplicaStatus::default()
            })
            .collect();
        let now = Time(Timestamp::UNIX_EPOCH);
        let s = status_of(
            &topic(),
            topic_reasons::ACCEPTED,
            "in",
            Some(&all),
            now.clone(),
        );
        assert_eq!(s.topics.len(), MAX_LISTED_TOPICS);
        assert_eq!(s.topic_count, Some(25));
        assert_eq!(s.observed_generation, Some(2));
        assert_eq!(s.conditions[0].status, "True");
        // Not read this time: the previous list stays; refused: none.
        let mut t = topic();
        t.status = Some(s.clone());
        let later = Time(Timestamp::now());
        let kept = status_of(&t, topic_reasons::ACCEPTED, "in", None, later.clone());
        assert_eq!(kept, s, "an unchanged status keeps its transition time");
        let refused = status_of(
            &t,
            topic_reasons::CONFLICT,
            "older",
            Some(&all),
            later.clone(),
        );
        assert!(refused.topics.is_empty() && refused.topic_count.is_none());
        assert_eq!(refused.conditions[0].status, "False");
        assert_eq!(refused.conditions[0].last_transition_time, later);
    }
}
