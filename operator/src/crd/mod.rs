//! The `BrokerCluster` custom resource (`starling.dev/v1alpha1`): spec types, the derived CRD and
//! the admission rules attached to it.
//!
//! The tier, profile and broker knob types come from `starling-config`; this module only adds the
//! Kubernetes-facing shape around them. Submodules:
//! - [`status`]: the status block the operator writes;
//! - [`conditions`]: the condition types and reasons of `status.conditions`;
//! - [`duration`]: the duration strings of `spec.autoscaling`;
//! - [`quantity`]: [`QuantityValue`], the int-or-string CPU, memory and volume sizes;
//! - [`cel`]: the building blocks of CEL rules (a rule with its message, append a rule to a
//!   schema node, read a field with its default);
//! - [`rules`]: the CEL `x-kubernetes-validations` the types below attach through kube's derive
//!   attributes (`#[x_kube(validation = ...)]`, `#[kube(validation = ...)]`), and what stays
//!   outside the derive and why;
//! - [`config_rules`]: the schema and admission rules of `spec.config` (the broker knobs),
//!   attached by `schema_with` from the shared tables;
//! - [`user`]: the `BrokerUser` resource (a client identity and its permissions);
//! - [`topic`]: the `BrokerTopic` resource (a durable topic or pattern and its log policy).

pub mod cel;
pub mod conditions;
pub mod config_rules;
pub mod duration;
pub mod quantity;
pub mod rules;
pub mod status;
pub mod topic;
pub mod user;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, Toleration, TopologySpreadConstraint};
use k8s_openapi::api::networking::v1::NetworkPolicyPeer;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use starling_config::{AuthMode, ConfigOverrides, Profile, StorageFsync, Tier};

pub use quantity::QuantityValue;
pub use status::{
    AutoscalerFields, AutoscalingStatus, BrokerClusterStatus, Endpoints, StorageStatus,
};

/// API group of the custom resource.
pub const GROUP: &str = "starling.dev";
/// Longest accepted BrokerCluster name: the StatefulSet's revision label (`<name>-<10 chars>`)
/// must stay within the 63-character label limit.
pub const MAX_NAME_LEN: usize = 52;

/// Desired state of a Starling broker cluster.
// clippy mistakes the repeated `type_ = ...` of the printcolumn arguments for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "starling.dev",
    version = "v1alpha1",
    kind = "BrokerCluster",
    namespaced,
    // `sbc`; `bc` collides with OpenShift's BuildConfig and is kept for one release only.
    shortname = "sbc",
    shortname = "bc",
    category = "starling",
    status = "BrokerClusterStatus",
    derive = "PartialEq",
    doc = "A Starling QUIC message broker cluster, sized by a tier and tuned by a performance profile.",
    validation = rules::name_rule(),
    scale(
        spec_replicas_path = ".spec.replicas",
        status_replicas_path = ".status.replicas",
        label_selector_path = ".status.selector"
    ),
    printcolumn(
        name = "Tier",
        type_ = "string",
        json_path = ".status.tier",
        description = "Tier currently deployed"
    ),
    printcolumn(
        name = "Profile",
        type_ = "string",
        json_path = ".status.profile",
        description = "Performance profile currently deployed"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.ready",
        description = "Ready brokers out of desired"
    ),
    printcolumn(
        name = "Status",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].reason",
        description = "Reason of the Ready condition"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = rules::storage_removed_rule(),
    validation = rules::storage_added_rule(),
    validation = rules::durability_needs_storage_rule(),
    validation = rules::durability_conflict_rule(),
    validation = rules::lanes_rule(),
    validation = rules::autoscaling_replicas_rule()
)]
pub struct BrokerClusterSpec {
    /// Deployment tier: `small`, `medium` or `large`. Sets the default replica count, each
    /// broker's CPU and memory, and the capacity-bound knobs (queues, lanes, cache size).
    #[serde(default)]
    pub tier: Tier,
    /// Performance profile: `balanced`, `latency` or `throughput`. Sets batching, flow-control
    /// windows and acknowledgement behaviour.
    #[serde(default)]
    pub profile: Profile,
    /// Number of brokers. Unset: the tier's default. Scaling never restarts running brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(
        validation = rules::replicas_min_rule(),
        validation = rules::replicas_max_rule()
    )]
    pub replicas: Option<i32>,
    /// Explicit broker knob overrides, using the broker config file's knob names. Set knobs
    /// replace the profile and tier values. `quic_listen`, `http_listen`, `tls_cert_file`,
    /// `tls_key_file`, `cluster_members_file` and `cluster_members_configmap` are managed by the
    /// operator and refused here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "config_rules::config_schema")]
    pub config: Option<ConfigOverrides>,
    /// Per-broker CPU and memory requests and limits. Set values replace the tier's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceOverrides>,
    /// A persistent volume per broker, mounted at `/var/lib/starling`. It holds the durable
    /// topics' logs (the topics of `durability`, or of `config.durable_topics`): the operator
    /// sets `storage_dir` to it, and durable topics are refused without it. One copy, on the
    /// topic owner's volume; a topic whose owner changes does not take its log along yet.
    /// Cannot be added or removed after creation, and its `size` and `storageClassName` cannot
    /// change (a StatefulSet's volume claim templates are immutable); its
    /// `persistentVolumeClaimRetentionPolicy` can.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<StorageSpec>,
    /// Which topics are durable and how their logs are kept: rendered into the broker knobs
    /// `durable_topics`, `storage_fsync`, `storage_fsync_interval_ms`,
    /// `storage_retention_max_bytes` and `storage_retention_max_age_ms`. Needs `storage`. A
    /// knob set here must not also be set in `config`. The default of every topic no
    /// BrokerTopic names: a topic a BrokerTopic matches takes that BrokerTopic's settings,
    /// and these knobs for the ones it leaves unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durability: Option<DurabilitySpec>,
    /// QUIC TLS, for clients and between brokers (every broker mounts the same certificate).
    /// Unset: the operator generates a self-signed certificate once, into the Secret
    /// `<name>-tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// The cluster CA, which signs the peer and user certificates and verifies peers and
    /// users. Unset: the operator creates the Secret `<name>-ca` and uses it only while it
    /// carries this BrokerCluster's controller owner reference and the label
    /// `starling.dev/cluster-ca: <name>`; any other Secret of that name is refused (condition
    /// `Degraded`, reason `UntrustedCa`), never used. Set: the named Secret (`ca.crt`, `ca.key`)
    /// is used as it is and never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<CaSpec>,
    /// Broker container image. Unset: the operator's default image (`--broker-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    #[x_kube(validation = rules::image_rule())]
    pub image: Option<String>,
    /// Scheduling and pod metadata overrides for the broker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplateOverrides>,
    /// Tier autoscaling from the brokers' own metrics (see `docs/autoscaling.md`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscaling: Option<AutoscalingSpec>,
    /// Client authentication. Unset: `mode: required`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<AuthSpec>,
    /// Who may reach the brokers: the NetworkPolicy the operator renders for the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// When true the operator stops changing the cluster's objects but keeps reporting status.
    /// It still keeps the credentials: the CA and peer certificate Secrets, and the users
    /// document (so deleting a BrokerUser still revokes it).
    #[serde(default)]
    pub paused: bool,
}

/// Client authentication of the brokers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuthSpec {
    /// `required` (default): every client authenticates as a `BrokerUser` (client certificate
    /// or token) and every operation is checked against its permissions. `none`: no
    /// authentication and no checks, for development only; reported as a Warning event and the
    /// `AuthenticationDisabled` condition.
    #[serde(default = "default_auth_mode")]
    pub mode: AuthMode,
}

impl Default for AuthSpec {
    fn default() -> Self {
        AuthSpec {
            mode: default_auth_mode(),
        }
    }
}

fn default_auth_mode() -> AuthMode {
    AuthMode::Required
}

impl BrokerClusterSpec {
    /// `spec.auth.mode`, `required` when unset.
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.as_ref().map_or(AuthMode::Required, |a| a.mode)
    }
}

/// The cluster's NetworkPolicy: who may open QUIC connections and scrape the HTTP port.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// Sources allowed to reach the QUIC port (UDP 7400), as NetworkPolicy peers (a
    /// `namespaceSelector` and/or a `podSelector`). Unset: every pod of the cluster's own
    /// namespace. An empty list allows no client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_clients: Option<Vec<NetworkPolicyPeer>>,
    /// Namespaces whose pods may scrape the HTTP port (TCP 9400: `/metrics`, `/healthz`,
    /// `/readyz`, `/config`), in addition to the operator's pods. Unset: the namespace named
    /// `monitoring` (label `kubernetes.io/metadata.name: monitoring`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monitoring_namespace_selector: Option<LabelSelector>,
}

/// CPU and memory, each optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuMemory {
    /// CPU quantity, e.g. `2`, `"2"` or `"500m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub cpu: Option<QuantityValue>,
    /// Memory quantity, e.g. `"4Gi"` or `4294967296`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub memory: Option<QuantityValue>,
}

/// Resource overrides of one broker container.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceOverrides {
    /// Requests that replace the tier's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<CpuMemory>,
    /// Limits that replace the tier's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<CpuMemory>,
}

/// A persistent volume claim template for every broker.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = rules::storage_size_rule(), validation = rules::storage_class_rule())]
pub struct StorageSpec {
    /// Volume size, e.g. `"10Gi"` or `10737418240`. Cannot change after creation.
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub size: QuantityValue,
    /// StorageClass of the volumes. Unset: the cluster's default class. Cannot change after
    /// creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
    /// What happens to the brokers' claims (and so their volumes and durable topics' logs) when
    /// the BrokerCluster is deleted and when it scales down: the StatefulSet's field of the
    /// same name. Unset: `Retain` for both. Can be changed at any time.
    #[serde(default)]
    pub persistent_volume_claim_retention_policy: ClaimRetentionPolicy,
}

/// `spec.durability`: the durable topics and how their logs are written and kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DurabilitySpec {
    /// Topic patterns whose messages are kept in a log on the broker's volume (`orders.*`,
    /// `audit.>`, exact names): the knob `durable_topics`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    /// When the logs are fsynced: `always` (before a `persisted` ack), `interval` (every
    /// `fsyncIntervalMs`, in the background) or `never` (the OS writes back in its own time):
    /// the knob `storage_fsync`. Unset: the profile's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::keep_field_description)]
    pub fsync: Option<StorageFsync>,
    /// The period, in milliseconds, of the background fsync under `fsync: interval`: the knob
    /// `storage_fsync_interval_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = rules::fsync_interval_rule())]
    pub fsync_interval_ms: Option<u64>,
    /// How much of each durable topic's log is kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<RetentionSpec>,
}

/// `spec.durability.retention`: the oldest whole segments of a durable topic's log are deleted
/// beyond these limits (the segment being written is kept).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetentionSpec {
    /// Most bytes each durable topic's log keeps, a quantity such as `"10Gi"` or `1073741824`:
    /// the knob `storage_retention_max_bytes`. Unset: no size limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(transform = rules::quantity_max_length)]
    #[x_kube(validation = rules::quantity_rule())]
    pub max_bytes: Option<QuantityValue>,
    /// How long a segment is kept after its last record, e.g. `168h` or `30m`: the knob
    /// `storage_retention_max_age_ms`. Unset: no age limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub max_age: Option<String>,
}

/// Keep or delete the brokers' PersistentVolumeClaims.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ClaimRetention {
    /// Keep the claims: their volumes and the logs on them stay until deleted by hand.
    #[default]
    Retain,
    /// Delete the claims; whether the volumes go too is the StorageClass's `reclaimPolicy`.
    Delete,
}

impl ClaimRetention {
    /// The value as the StatefulSet's `persistentVolumeClaimRetentionPolicy` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimRetention::Retain => "Retain",
            ClaimRetention::Delete => "Delete",
        }
    }
}

/// `spec.storage.persistentVolumeClaimRetentionPolicy`, rendered as the StatefulSet's field of
/// the same name.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimRetentionPolicy {
    /// When the BrokerCluster (and with it its StatefulSet) is deleted: `Retain` keeps every
    /// broker's claim, so a BrokerCluster created again with the same name gets its volumes
    /// back; `Delete` deletes them.
    #[serde(default)]
    pub when_deleted: ClaimRetention,
    /// When the cluster scales down: `Retain` keeps the removed brokers' claims, so a broker
    /// that comes back gets its volume back; `Delete` deletes them once their pods are gone.
    #[serde(default)]
    pub when_scaled: ClaimRetention,
}

/// TLS material for the QUIC listener.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// Name of a Secret in the cluster's namespace holding `tls.crt` and `tls.key` (the layout
    /// cert-manager writes). Changing it rolls the brokers.
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::secret_name_rule())]
    pub secret_name: String,
}

/// A cluster CA supplied by an admin.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CaSpec {
    /// Name of a Secret in the cluster's namespace holding `ca.crt` and `ca.key` (PEM). The
    /// operator reads it and never writes it; a missing or unusable CA fails the reconcile.
    #[schemars(length(max = 253))]
    #[x_kube(validation = rules::secret_name_rule())]
    pub secret_name: String,
}

/// Scheduling and metadata overrides applied to the broker pod template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PodTemplateOverrides {
    /// Node labels a broker node must have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Tolerations of the broker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Affinity rules of the broker pods. With `spec.storage` (where BrokerTopics can
    /// replicate topics) or replicated durable topics (`durable_replicas` above 1), and no
    /// `podAntiAffinity` here, the operator adds a preferred pod anti-affinity on
    /// `kubernetes.io/hostname` against the cluster's other brokers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Topology spread constraints. Unset: brokers spread across nodes
    /// (`kubernetes.io/hostname`, maxSkew 1, ScheduleAnyway), and with `spec.storage` or
    /// replicated durable topics across zones too (`topology.kubernetes.io/zone`, the same).
    /// An empty list disables spreading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
    /// PriorityClass of the broker pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub priority_class_name: Option<String>,
    /// Extra pod annotations. `starling.dev/config-hash` is reserved for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// The tier autoscaler: bounds, thresholds and timing. See `docs/autoscaling.md`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = rules::autoscaling_tier_order_rule(),
    validation = rules::autoscaling_threshold_rule()
)]
pub struct AutoscalingSpec {
    /// Whether the autoscaler may change the cluster's tier. Its choice is written to
    /// `status.effectiveTier`, never to `spec`; turning this off returns to `spec.tier`.
    #[serde(default)]
    pub enabled: bool,
    /// Smallest tier the autoscaler may choose.
    #[serde(default = "rules::smallest_tier")]
    pub min_tier: Tier,
    /// Largest tier the autoscaler may choose.
    #[serde(default = "rules::largest_tier")]
    pub max_tier: Tier,
    /// Scale up one tier when the publish rate stays above this percentage of the current
    /// tier's capacity for `scaleUpWindow`.
    #[serde(default = "rules::default_scale_up_threshold")]
    #[x_kube(validation = rules::percent_rule())]
    pub scale_up_threshold: i32,
    /// How long the publish rate must stay above `scaleUpThreshold` (e.g. `3m`, `90s`).
    #[serde(default = "rules::default_scale_up_window")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub scale_up_window: String,
    /// Scale down one tier when the publish rate stays below this percentage of the next
    /// lower tier's capacity for `scaleDownWindow`. Must be below `scaleUpThreshold`.
    #[serde(default = "rules::default_scale_down_threshold")]
    #[x_kube(validation = rules::percent_rule())]
    pub scale_down_threshold: i32,
    /// How long the publish rate must stay below `scaleDownThreshold` (e.g. `15m`).
    #[serde(default = "rules::default_scale_down_window")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub scale_down_window: String,
    /// Minimum time between two tier changes.
    #[serde(default = "rules::default_cooldown")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub cooldown: String,
    /// How often every broker's `/metrics` is scraped (at least `1s`).
    #[serde(default = "rules::default_scrape_interval")]
    #[schemars(length(max = 32))]
    #[x_kube(validation = rules::duration_rule())]
    pub scrape_interval: String,
}

impl Default for AutoscalingSpec {
    fn default() -> Self {
        AutoscalingSpec {
            enabled: false,
            min_tier: rules::smallest_tier(),
            max_tier: rules::largest_tier(),
            scale_up_threshold: rules::default_scale_up_threshold(),
            scale_up_window: rules::default_scale_up_window(),
            scale_down_threshold: rules::default_scale_down_threshold(),
            scale_down_window: rules::default_scale_down_window(),
            cooldown: rules::default_cooldown(),
            scrape_interval: rules::default_scrape_interval(),
        }
    }
}

/// The CRD as installed: the derived definition plus the int-or-string `anyOf` of the
/// quantities ([`quantity::add_int_or_string_any_of`]), which kube's derive cannot emit.
pub fn crd() -> CustomResourceDefinition {
    quantity::with_int_or_string_quantities(BrokerCluster::crd())
}

/// The CRD as YAML, exactly what `crdgen` prints and `crds/brokercluster.yaml` holds.
pub fn crd_yaml() -> String {
    generated_yaml(&crd(), "")
}

/// A CRD as the YAML `crdgen` prints: a header naming the command (`crdgen` with `args`,
/// e.g. ` -- --user`) that regenerates it, then the definition.
pub(crate) fn generated_yaml(crd: &CustomResourceDefinition, args: &str) -> String {
    let body = serde_saphyr::to_string(crd).unwrap_or_default();
    format!(
        "# Generated by `cargo run -p starling-operator --bin crdgen{args}`; do not edit.\n{body}"
    )
}

#[cfg(test)]
mod probe;
#[cfg(test)]
mod tests;
