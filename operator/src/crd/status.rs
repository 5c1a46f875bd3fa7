//! The `BrokerCluster` status block, written by the operator from the observed StatefulSet.
//!
//! The condition types and reasons that fill `conditions` are defined in [`super::conditions`].

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use starling_config::{Profile, Tier};

/// Observed state of a broker cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerClusterStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Progressing`, `Degraded`, `AuthenticationDisabled`, `ReplicationDegraded`
    /// and `DiskFull`, each with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// Broker pods that exist (the `/scale` subresource's status replicas).
    #[serde(default)]
    pub replicas: i32,
    /// Broker pods that are ready.
    #[serde(default)]
    pub ready_replicas: i32,
    /// Ready brokers out of desired, e.g. `2/3` (the `Ready` printer column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// The tier currently rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::rules::keep_field_description)]
    pub tier: Option<Tier>,
    /// The profile currently rendered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::rules::keep_field_description)]
    pub profile: Option<Profile>,
    /// The tier chosen by the autoscaler, rendered while `spec.autoscaling.enabled` is true
    /// (clamped to `minTier`..`maxTier`). Written only by the autoscaler, never by users;
    /// cleared when autoscaling is turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = super::rules::keep_field_description)]
    pub effective_tier: Option<Tier>,
    /// SHA-256 of the rendered broker config and TLS secret name (the pods'
    /// `starling.dev/config-hash`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// Label selector of the broker pods, for the `/scale` subresource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<String>,
    /// Where clients connect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoints: Option<Endpoints>,
    /// Brokers in the member list (the `<name>-members` ConfigMap the brokers read). It rises
    /// to a new size once the added brokers are ready, and drops before brokers are removed,
    /// which happens a hand-off grace later (`--handoff-grace-seconds`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members: Option<i32>,
    /// When `members` last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub members_changed_at: Option<Time>,
    /// The brokers' volumes as the StatefulSet has them (only with `spec.storage`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageStatus>,
    /// What the autoscaler observed and decided last (only while autoscaling is enabled).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingStatus>,
}

impl BrokerClusterStatus {
    /// The fields the reconciler owns (its field manager applies them): everything but the
    /// autoscaler's `effectiveTier` and `autoscaling`.
    pub fn reconciler_fields(&self) -> BrokerClusterStatus {
        BrokerClusterStatus {
            effective_tier: None,
            autoscaling: None,
            ..self.clone()
        }
    }
}

/// The status fields the autoscaler owns, as its field manager applies them: both sent whole
/// on every write (a field left out is removed), nothing of the reconciler's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalerFields {
    /// `status.effectiveTier`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_tier: Option<Tier>,
    /// `status.autoscaling`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingStatus>,
}

/// The autoscaler's last observation and decision. Rates are averages over the last scrape
/// interval, summed over the brokers that were scraped.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AutoscalingStatus {
    /// Messages accepted from publishers per second (`starling_published_messages_total`):
    /// the load compared with the tier capacity.
    #[serde(default)]
    pub publish_msgs_per_sec: i64,
    /// Events written to subscribers per second (`starling_delivered_events_total`).
    #[serde(default)]
    pub delivered_msgs_per_sec: i64,
    /// Publish payload bytes accepted per second (`starling_published_bytes_total`).
    #[serde(default)]
    pub published_bytes_per_sec: i64,
    /// EventBatch bytes written to subscribers per second (`starling_delivered_bytes_total`).
    #[serde(default)]
    pub delivered_bytes_per_sec: i64,
    /// CPU of each broker process in millicores (`starling_process_cpu_seconds_total`), by pod.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_cpu_millicores: BTreeMap<String, i64>,
    /// Publish capacity of the current tier in msg/s (the tier table, with the operator's
    /// `--tier-overrides`).
    #[serde(default)]
    pub capacity_msgs_per_sec: i64,
    /// `publishMsgsPerSec` as a percentage of `capacityMsgsPerSec`.
    #[serde(default)]
    pub utilization_percent: i64,
    /// The last decision: `Stay`, `ScaleUp`, `ScaleDown` or `Hold` (incomplete data, not ready,
    /// rollout in progress, cooldown).
    #[serde(default)]
    pub recommendation: String,
    /// Why, in words.
    #[serde(default)]
    pub reason: String,
    /// Broker pods whose metrics were scraped and rated in the last round.
    #[serde(default)]
    pub pods_scraped: i32,
    /// Broker pods expected (the pods that exist, at least the StatefulSet's replicas).
    #[serde(default)]
    pub pods_expected: i32,
    /// When the last round was scraped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_scrape_time: Option<Time>,
    /// When the autoscaler last changed `effectiveTier` (the cooldown starts here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change_time: Option<Time>,
    /// The reason of the last tier change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_change_reason: Option<String>,
}

/// The brokers' volumes, read from the StatefulSet's volume claim template and retention
/// policy (what the operator rendered from `spec.storage`, as the API server stored it).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StorageStatus {
    /// Size each broker's claim requests, e.g. `10Gi`.
    pub size: String,
    /// StorageClass of the claims. Unset: the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// The StatefulSet's volume claim template, `data`: broker N's claim is
    /// `<claimTemplate>-<BrokerCluster name>-N`, e.g. `data-events-0`.
    pub claim_template: String,
    /// The StatefulSet's `persistentVolumeClaimRetentionPolicy` (`Retain` where it sets none,
    /// as Kubernetes does).
    pub persistent_volume_claim_retention_policy: super::ClaimRetentionPolicy,
}

/// The client Service's address.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Endpoints {
    /// DNS name of the client Service, e.g. `events.messaging.svc`.
    pub host: String,
    /// UDP port of the QUIC listener.
    pub quic_port: i32,
    /// TCP port of `/metrics`, `/healthz` and `/readyz`.
    pub http_port: i32,
}
