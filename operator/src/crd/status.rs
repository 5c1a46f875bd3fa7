//! The `BrokerCluster` status block, written by the operator from the observed StatefulSet.
//!
//! The condition types and reasons that fill `conditions` are defined in [`crate::status`].

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
    /// `Ready`, `Progressing` and `Degraded`, each with a reason and a message.
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
    /// The tier chosen by the autoscaler. Reserved: written only by the autoscaler, when
    /// `spec.autoscaling.enabled` is true.
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
