//! The `BrokerTopic` custom resource (`starling.dev/v1alpha1`): one durable topic, or a
//! pattern of them, of one BrokerCluster and how its log is kept (replicas, retention, fsync,
//! largest message), with a status that says whether the operator accepted it and where each
//! replicated topic it covers stands (leader, in-sync replicas, lag).
//!
//! The operator turns every accepted BrokerTopic of a cluster into one
//! `starling_config::topics::TopicPolicy` of the cluster's topics document (the ConfigMap
//! `<cluster>-topics`, see `crate::apply::topics`); a topic no BrokerTopic names keeps the
//! cluster's `spec.durability` (the broker knobs). Admission checks what CEL can (the
//! pattern's shape, the replica count, the quantities and the duration); the operator checks
//! the rest with the shared `TopicPolicy::check` and reports it in the `Ready` condition
//! ([`topic_reasons`]).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Rule;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use starling_config::StorageFsync;
use starling_config::topics::ALLOWED_REPLICAS;

use super::cel::rule;
use super::quantity::QuantityValue;
use super::rules;
use super::user::PATTERN_REGEX;

/// Most topics one BrokerTopic's `status.topics` lists (`status.topicCount` counts them all).
pub const MAX_LISTED_TOPICS: usize = 20;
/// Most in-sync replicas one listed topic names (a topic has at most 5 replicas).
pub const MAX_LISTED_REPLICAS: usize = 5;

/// A durable topic, or a pattern of topics, of one BrokerCluster and how its log is kept.
// clippy mistakes the repeated `type_ = ...` of the printcolumn arguments for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "starling.dev",
    version = "v1alpha1",
    kind = "BrokerTopic",
    namespaced,
    shortname = "sbt",
    category = "starling",
    status = "BrokerTopicStatus",
    derive = "PartialEq",
    doc = "A durable topic (or a pattern of topics) of a Starling BrokerCluster: its replica count, retention, fsync policy and largest message. Topics no BrokerTopic names keep the cluster's spec.durability.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.clusterRef",
        description = "The BrokerCluster the topic belongs to"
    ),
    printcolumn(
        name = "Topic",
        type_ = "string",
        json_path = ".spec.topic",
        description = "The topic name or pattern"
    ),
    printcolumn(
        name = "Replicas",
        type_ = "integer",
        json_path = ".spec.replicas",
        description = "Copies of the log (unset: the cluster's durable_replicas)"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the policy is in the cluster's topics document"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BrokerTopicSpec {
    /// Name of the BrokerCluster, in the same namespace, whose topics this is. Cannot be
    /// changed.
    #[schemars(length(min = 1, max = super::MAX_NAME_LEN))]
    #[x_kube(validation = cluster_ref_rule())]
    pub cluster_ref: String,
    /// The topic name (`orders.eu`), or a pattern of names in the access pattern language
    /// (`orders.*`, `audit.>`). When several BrokerTopics of a cluster match one topic the most
    /// specific applies: an exact name first, then the pattern with the most literal tokens,
    /// then the BrokerTopic whose name sorts first. Two BrokerTopics of one cluster may not
    /// have the same `topic` (the newer one is refused with reason `Conflict`).
    #[schemars(length(min = 1, max = starling_access::pattern::MAX_PATTERN_BYTES))]
    #[x_kube(validation = topic_rule())]
    pub topic: String,
    /// Copies of each topic's log on distinct brokers: 1, 3 or 5. Unset: the cluster's
    /// `durable_replicas` knob (`spec.config`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = replicas_rule())]
    pub replicas: Option<u32>,
    /// How much of each topic's log is kept. Unset limits take the cluster's
    /// (`spec.durability.retention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<TopicRetention>,
    /// When the logs are fsynced: `always` (before a `persisted` ack), `interval` (every
    /// `storage_fsync_interval_ms` of the cluster, in the background) or `never`. Unset: the
    /// cluster's (`spec.durability.fsync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::keep_field_description)]
    pub fsync: Option<StorageFsync>,
    /// Largest message payload a publish to the topic may carry, a quantity such as `"64Ki"`
    /// or `65536`: at least 1 and at most the cluster's `max_frame_bytes`. Unset:
    /// `max_frame_bytes` bounds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub max_message_bytes: Option<QuantityValue>,
}

/// `spec.retention`: the oldest whole segments of each topic's log are deleted beyond these
/// limits (the segment being written is kept).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicRetention {
    /// Most bytes each topic's log keeps, a quantity such as `"10Gi"` or `1073741824`; `0`
    /// for no limit. Unset: the cluster's `storage_retention_max_bytes`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub max_bytes: Option<QuantityValue>,
    /// How long a segment is kept after its last record, e.g. `168h` or `30m`; `0s` for no
    /// limit. Unset: the cluster's `storage_retention_max_age_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub max_age: Option<String>,
}

/// Observed state of a BrokerTopic.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerTopicStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, with a reason ([`TOPIC_REASONS`]) and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The replicated topics open on the cluster's brokers that this BrokerTopic's policy
    /// applies to, by name, at most 20 (as the brokers' `GET /replicas` report them). Topics
    /// with one replica are not replicated and not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_LISTED_TOPICS))]
    pub topics: Vec<TopicReplicaStatus>,
    /// How many replicated topics this policy applies to, listed or not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_count: Option<u32>,
}

/// Where one replicated topic stands, as its brokers report it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicReplicaStatus {
    /// The topic's name.
    pub name: String,
    /// The broker pod whose replica leads the topic; unset while no broker reports leading it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// The broker pods whose replica of the topic is in sync with the leader (the leader
    /// included).
    #[serde(default)]
    #[schemars(length(max = MAX_LISTED_REPLICAS))]
    pub in_sync: Vec<String>,
    /// The replicas the topic has now: the voters of its Raft membership as its leader
    /// reports them (else the broker pods that report a replica of it).
    #[serde(default)]
    pub replicas: u32,
    /// The replica count the brokers' topics document gives the topic (this BrokerTopic's
    /// `replicas`, else the cluster's `durable_replicas`), as the brokers report it: while
    /// it differs from `replicas`, the topic's replica set has not followed it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub configured_replicas: Option<u32>,
    /// How many log entries (each one publish batch) the furthest replica has still to apply
    /// to reach the newest commit reported; unset when no replica reports its indexes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
}

/// The `Ready` condition's reasons, with their status and meaning (for the docs).
pub const TOPIC_REASONS: &[(&str, &str, &str)] = &[
    (
        "Accepted",
        "True",
        "The policy is in the cluster's topics document (the ConfigMap `<cluster>-topics`), which the brokers re-read while they run.",
    ),
    (
        "Invalid",
        "False",
        "A field was refused (a quantity that does not fit, a pattern the brokers refuse, max message size above the cluster's max_frame_bytes, more replicas than brokers); the message says which. Left out of the document.",
    ),
    (
        "ClusterNotFound",
        "False",
        "spec.clusterRef names no BrokerCluster in this namespace; retried every 30 s.",
    ),
    (
        "NoStorage",
        "False",
        "The cluster has no spec.storage: durable topics need the brokers' volumes. Left out of the document.",
    ),
    (
        "Conflict",
        "False",
        "An older BrokerTopic of the same cluster has the same spec.topic (the message names it); this one is left out of the document.",
    ),
    (
        "ClusterPaused",
        "False",
        "The cluster's spec.paused is true: the topics document is not updated until it is resumed.",
    ),
];

/// Every reason of [`TOPIC_REASONS`], by name.
pub mod topic_reasons {
    /// In the topics document.
    pub const ACCEPTED: &str = "Accepted";
    /// A refused field.
    pub const INVALID: &str = "Invalid";
    /// No such cluster.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// The cluster has no volumes.
    pub const NO_STORAGE: &str = "NoStorage";
    /// Another BrokerTopic has the same topic.
    pub const CONFLICT: &str = "Conflict";
    /// The cluster is paused.
    pub const CLUSTER_PAUSED: &str = "ClusterPaused";
}

/// `spec.clusterRef`: immutable (moving a topic's policy to another cluster moves no log).
pub fn cluster_ref_rule() -> Rule {
    rule(
        "self == oldSelf",
        "clusterRef cannot be changed; create another BrokerTopic",
    )
}

/// `spec.topic`: a pattern's shape, as far as a regular expression can tell (the same check
/// as a BrokerUser's patterns).
pub fn topic_rule() -> Rule {
    rule(
        format!("self.matches('{PATTERN_REGEX}')"),
        "topic is a name or a pattern of '.'-separated tokens, each a name, '*' (one token) or, last, '>' (one or more tokens), without spaces: e.g. orders.eu, orders.*, audit.>",
    )
}

/// `spec.replicas`: one of [`ALLOWED_REPLICAS`] (generated from the shared table).
pub fn replicas_rule() -> Rule {
    let allowed: Vec<String> = ALLOWED_REPLICAS.iter().map(u32::to_string).collect();
    rule(
        format!("self in [{}]", allowed.join(", ")),
        format!("replicas must be {}", allowed.join(", ")),
    )
}

/// The CRD as installed: the derived definition plus the int-or-string `anyOf` of the
/// quantities ([`super::quantity::add_int_or_string_any_of`]).
pub fn crd() -> CustomResourceDefinition {
    super::quantity::with_int_or_string_quantities(BrokerTopic::crd())
}

/// The CRD as YAML, exactly what `crdgen --topic` prints and `crds/brokertopic.yaml` holds.
pub fn crd_yaml() -> String {
    super::generated_yaml(&crd(), " -- --topic")
}

#[cfg(test)]
mod tests;
