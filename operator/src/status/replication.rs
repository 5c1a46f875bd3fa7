//! The `ReplicationDegraded` condition: whether the cluster can keep its durable topics'
//! replicas apart, computed from the validated spec and the accepted BrokerTopics, the member
//! count and where the broker pods run. Pure: the controller lists the pods (only when some
//! durable topic is replicated, by `durable_replicas` or by a BrokerTopic) and hands their
//! nodes in as a [`Placement`]. The nodes come from the pods' `spec.nodeName`: the operator
//! needs no access to Node objects (cluster-scoped) for this.
//!
//! With N copies of a topic (N > 1: `durable_replicas`, or the most a BrokerTopic asks for)
//! its replicas are the first N members of its placement order (`docs/durability.md`, "R3 and
//! R5 in the broker"), so:
//! - fewer than N brokers: no durable topic opens, and every publish to one is refused
//!   (`Unavailable`) until there are N (`TooFewBrokers`);
//! - two brokers on one node: a topic may have replicas on both, and a lost node (with its
//!   volumes) takes them together, as many copies as brokers it held (`BrokersShareNode`). The
//!   pod template only prefers distinct nodes (`crate::build::pod`), so a small cluster still
//!   schedules; this condition is where it shows.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use crate::crd::conditions::Reason;
use crate::pods::{Owner, owned_by};

/// Where the cluster's broker pods run: every pod the StatefulSet controls that is scheduled
/// (`spec.nodeName` set) and not being deleted, with its node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Placement {
    /// Node name → the broker pods on it, each list sorted.
    pub nodes: BTreeMap<String, Vec<String>>,
}

/// What the controller saw of the brokers' placement: the placement, or why the pods could not
/// be listed.
pub type Observation = Result<Placement, String>;

impl Placement {
    /// The placement of the pods of `pods` that `sts` controls ([`owned_by`]): labels alone
    /// prove nothing, so a stranger's pod with the broker labels is not counted. A StatefulSet
    /// without a name or UID (not created yet) controls no pod.
    pub fn of(pods: &[Pod], sts: &StatefulSet) -> Placement {
        let mut nodes: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let Some(owner) = Owner::of(sts) else {
            return Placement { nodes };
        };
        for pod in pods {
            if pod.metadata.deletion_timestamp.is_some() || !owned_by(pod, &owner) {
                continue;
            }
            let Some(node) = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_deref())
                .filter(|n| !n.is_empty())
            else {
                continue;
            };
            nodes
                .entry(node.to_string())
                .or_default()
                .push(pod.name_any());
        }
        for list in nodes.values_mut() {
            list.sort();
        }
        Placement { nodes }
    }

    /// Broker pods that are scheduled.
    pub fn scheduled(&self) -> usize {
        self.nodes.values().map(Vec::len).sum()
    }

    /// The nodes that hold more than one broker, with their pods.
    pub fn shared(&self) -> Vec<(&str, &[String])> {
        self.nodes
            .iter()
            .filter(|(_, pods)| pods.len() > 1)
            .map(|(node, pods)| (node.as_str(), pods.as_slice()))
            .collect()
    }
}

/// The `ReplicationDegraded` reason and message.
///
/// `replicas`: the most copies a durable topic keeps, when more than one
/// (`ValidatedCluster::replication`, an accepted BrokerTopic's `replicas`), else `None`. `brokers`: the brokers in the member list,
/// at most the desired count. `placement`: what the controller saw of the pods, `None` when it
/// did not look.
pub fn condition(
    replicas: Option<u32>,
    brokers: i32,
    placement: Option<&Observation>,
) -> (Reason, String) {
    let Some(n) = replicas else {
        return (
            Reason::NotReplicated,
            "durable topics have one copy (durable_replicas is 1 and no BrokerTopic asks for more, or no topic is durable)"
                .to_string(),
        );
    };
    if i64::from(brokers) < i64::from(n) {
        return (
            Reason::TooFewBrokers,
            format!(
                "durable topics keep {n} copies (durable_replicas or a BrokerTopic's replicas) \
                 but the cluster has {brokers} broker(s): no such topic opens and every publish \
                 to one is refused (Unavailable) until there are {n}"
            ),
        );
    }
    match placement {
        None => (
            Reason::PlacementUnknown,
            "the broker pods' nodes have not been read yet".to_string(),
        ),
        Some(Err(why)) => (
            Reason::PlacementUnknown,
            format!("the broker pods could not be listed: {why}"),
        ),
        Some(Ok(p)) => {
            let shared = p.shared();
            if shared.is_empty() {
                return (
                    Reason::ReplicasApart,
                    format!(
                        "{n} replicas of each durable topic on {brokers} brokers; the {} scheduled \
                         broker(s) are on distinct nodes",
                        p.scheduled()
                    ),
                );
            }
            let list: Vec<String> = shared
                .iter()
                .map(|(node, pods)| format!("{node}: {}", pods.join(", ")))
                .collect();
            (
                Reason::BrokersShareNode,
                format!(
                    "brokers share a node ({}): a topic with replicas on two of them loses both \
                     of its {n} copies there when that node is lost with its volumes; add nodes \
                     (the pods prefer distinct nodes and zones) or set \
                     podTemplate.affinity.podAntiAffinity",
                    list.join("; ")
                ),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::PodSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
    use k8s_openapi::jiff::Timestamp;

    use super::*;

    fn sts() -> StatefulSet {
        StatefulSet {
            metadata: ObjectMeta {
                name: Some("events".into()),
                uid: Some("sts-uid".into()),
                ..ObjectMeta::default()
            },
            spec: Some(StatefulSetSpec {
                replicas: Some(3),
                ..StatefulSetSpec::default()
            }),
            status: None,
        }
    }

    fn pod(name: &str, owner_uid: &str, node: Option<&str>) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                owner_references: Some(vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "StatefulSet".into(),
                    name: "events".into(),
                    uid: owner_uid.into(),
                    controller: Some(true),
                    ..OwnerReference::default()
                }]),
                ..ObjectMeta::default()
            },
            spec: Some(PodSpec {
                node_name: node.map(Into::into),
                ..PodSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn the_placement_counts_the_statefulsets_scheduled_pods_only() {
        let mut deleting = pod("events-2", "sts-uid", Some("n3"));
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::UNIX_EPOCH));
        let pods = vec![
            pod("events-1", "sts-uid", Some("n1")),
            pod("events-0", "sts-uid", Some("n1")),
            pod("events-2", "sts-uid", None),
            deleting,
            // Another controller's pod with a broker's name, and an ordinal past replicas.
            pod("events-2", "other-uid", Some("n2")),
            pod("events-3", "sts-uid", Some("n2")),
        ];
        let p = Placement::of(&pods, &sts());
        assert_eq!(
            p.nodes,
            BTreeMap::from([(
                "n1".to_string(),
                vec!["events-0".to_string(), "events-1".to_string()]
            )])
        );
        assert_eq!(p.scheduled(), 2);
        assert_eq!(
            p.shared(),
            vec![("n1", &["events-0".to_string(), "events-1".to_string()][..])]
        );
        let mut unnamed = sts();
        unnamed.metadata.uid = None;
        assert_eq!(Placement::of(&pods, &unnamed), Placement::default());
    }

    #[test]
    fn each_reason_in_turn() {
        let apart = Placement::of(
            &[
                pod("events-0", "sts-uid", Some("n1")),
                pod("events-1", "sts-uid", Some("n2")),
                pod("events-2", "sts-uid", Some("n3")),
            ],
            &sts(),
        );
        let shared = Placement::of(
            &[
                pod("events-0", "sts-uid", Some("n1")),
                pod("events-1", "sts-uid", Some("n1")),
                pod("events-2", "sts-uid", Some("n2")),
            ],
            &sts(),
        );
        let ok = Ok(apart);
        let (reason, _) = condition(None, 3, Some(&ok));
        assert_eq!(reason, Reason::NotReplicated);
        let (reason, message) = condition(Some(3), 2, Some(&ok));
        assert_eq!(reason, Reason::TooFewBrokers);
        assert!(
            message.contains("keep 3 copies") && message.contains("2 broker(s)"),
            "{message}"
        );
        let (reason, message) = condition(Some(3), 3, Some(&ok));
        assert_eq!(reason, Reason::ReplicasApart, "{message}");
        let (reason, message) = condition(Some(3), 3, Some(&Ok(shared)));
        assert_eq!(reason, Reason::BrokersShareNode);
        assert!(message.contains("n1: events-0, events-1"), "{message}");
        let (reason, message) = condition(Some(3), 3, Some(&Err("forbidden".into())));
        assert_eq!(reason, Reason::PlacementUnknown);
        assert!(message.contains("forbidden"), "{message}");
        assert_eq!(condition(Some(5), 5, None).0, Reason::PlacementUnknown);
        for r in [
            Reason::NotReplicated,
            Reason::ReplicasApart,
            Reason::TooFewBrokers,
            Reason::BrokersShareNode,
            Reason::PlacementUnknown,
        ] {
            assert_eq!(
                r.condition(),
                crate::crd::conditions::ConditionType::ReplicationDegraded
            );
        }
        assert_eq!(Reason::TooFewBrokers.status(), "True");
        assert_eq!(Reason::BrokersShareNode.status(), "True");
        assert_eq!(Reason::ReplicasApart.status(), "False");
        assert_eq!(Reason::PlacementUnknown.status(), "Unknown");
    }
}
