//! Validate: a raw `BrokerCluster` becomes a [`ValidatedCluster`] or a [`SpecError`].
//!
//! This is the only place that reads the spec. Everything downstream (the builders, status,
//! events) works from the validated value, in which the effective tier is chosen, the broker
//! config is resolved by `starling-config` with the operator-owned knobs forced, and resources
//! are the tier's with the overrides on top. Pure: no I/O.

pub mod autoscaling;
pub mod config_hash;
pub mod durability;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod storage;
pub mod topics;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use starling_config::{AuthMode, BrokerConfig, ConfigOverrides, Profile, Tier, TierTable, compose};

use crate::crd::conditions::Reason;
use crate::crd::config_rules::OPERATOR_MANAGED_KNOBS;
use crate::crd::{
    BrokerCluster, BrokerClusterSpec, BrokerClusterStatus, MAX_NAME_LEN, NetworkSpec,
    PodTemplateOverrides, StorageSpec,
};
use crate::error::Error;
use crate::names::{
    CONFIG_DIR, CONFIG_FILE, DATA_DIR, Names, PEER_DIR, TLS_DIR, TOPICS_DIR, TOPICS_KEY,
};
use crate::quantity::parse_nanos;

pub use autoscaling::Policy;
pub use config_hash::config_hash;

/// Settings the operator process supplies to every cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorDefaults {
    /// Broker image used when `spec.image` is unset.
    pub broker_image: String,
    /// The tier table with the admin's overrides (`--tier-overrides`).
    pub tiers: TierTable,
    /// The cluster's DNS domain (`--cluster-domain`), used in member addresses and the
    /// generated certificate's names.
    pub cluster_domain: String,
    /// Time between lowering the members and stopping the leaving brokers
    /// (`--handoff-grace-seconds`).
    pub handoff_grace: std::time::Duration,
    /// The operator's own namespace (`POD_NAMESPACE`), whose operator pods the NetworkPolicy
    /// lets reach the brokers' HTTP port; `None` when unknown (any namespace).
    pub operator_namespace: Option<String>,
}

/// Where an object lives and who owns its children: read from API-server metadata.
#[derive(Debug, Clone, PartialEq)]
pub struct ObjectIdentity {
    /// BrokerCluster name.
    pub name: String,
    /// BrokerCluster namespace.
    pub namespace: String,
    /// Controller owner reference placed on every child.
    pub owner: OwnerReference,
}

impl ObjectIdentity {
    /// Reads the identity of a BrokerCluster; fails when the API server left a field out.
    pub fn of(bc: &BrokerCluster) -> Result<Self, Error> {
        let namespace = bc
            .namespace()
            .ok_or(Error::MissingObjectField("metadata.namespace"))?;
        let owner = bc
            .controller_owner_ref(&())
            .ok_or(Error::MissingObjectField("metadata.uid"))?;
        Ok(ObjectIdentity {
            name: bc.name_any(),
            namespace,
            owner,
        })
    }
}

/// CPU and memory quantities, all set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuMemory {
    /// CPU quantity.
    pub cpu: String,
    /// Memory quantity.
    pub memory: String,
}

/// Effective container resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    /// Requests.
    pub requests: CpuMemory,
    /// Limits.
    pub limits: CpuMemory,
}

/// A BrokerCluster whose spec has been checked and resolved. Builders take only this.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidatedCluster {
    /// Name, namespace and owner reference.
    pub id: ObjectIdentity,
    /// Names of the children.
    pub names: Names,
    /// The tier rendered (see [`effective_tier`]).
    pub tier: Tier,
    /// The profile rendered.
    pub profile: Profile,
    /// Desired broker count.
    pub replicas: i32,
    /// The resolved broker config.
    pub config: BrokerConfig,
    /// `config.to_yaml()`: the exact text of `broker.yaml`.
    pub config_yaml: String,
    /// Hash of the config text and TLS secret name; never of the replica count.
    pub config_hash: String,
    /// Container resources.
    pub resources: Resources,
    /// Broker image.
    pub image: String,
    /// The TLS secret every broker mounts: `spec.tls.secretName`, else the generated one.
    pub tls_secret: String,
    /// Whether [`ValidatedCluster::tls_secret`] is the operator-generated secret (created once
    /// when absent) rather than the user's.
    pub tls_generated: bool,
    /// The cluster CA's Secret: `spec.ca.secretName`, else the operator's `<cluster>-ca`.
    pub ca_secret: String,
    /// Whether [`ValidatedCluster::ca_secret`] was named in the spec (used as it is, never
    /// written) rather than the operator's own (created, and used only while it carries the
    /// cluster's owner reference and CA label).
    pub ca_explicit: bool,
    /// The cluster's DNS domain, for member addresses.
    pub cluster_domain: String,
    /// The StatefulSet's `minReadySeconds`: the hand-off grace, so a rolling restart stops
    /// the next broker only after the restarted one has had its cache entries pushed back.
    pub min_ready_seconds: i32,
    /// Data volume, when set.
    pub storage: Option<StorageSpec>,
    /// Scheduling and metadata overrides.
    pub pod: PodTemplateOverrides,
    /// `spec.auth.mode`.
    pub auth_mode: AuthMode,
    /// `spec.network`.
    pub network: NetworkSpec,
    /// The operator's namespace ([`OperatorDefaults::operator_namespace`]).
    pub operator_namespace: Option<String>,
}

impl ValidatedCluster {
    /// `durable_replicas` when the durable topics are replicated: more than one copy and at
    /// least one durable topic pattern. `None` for one copy, or when nothing is durable.
    pub fn replication(&self) -> Option<u32> {
        (self.config.durable_replicas > 1 && !self.config.durable_topics.is_empty())
            .then_some(self.config.durable_replicas)
    }

    /// Whether the broker pods keep apart (a preferred pod anti-affinity on the node, a spread
    /// over zones, [`crate::build::pod`]): when the durable topics are replicated by the
    /// cluster's knobs, and on every cluster with `spec.storage`, the clusters whose
    /// BrokerTopics can make topics replicated. Keyed on `spec.storage`, which cannot change,
    /// and not on the BrokerTopics themselves, so that a BrokerTopic never changes the pod
    /// template (a roll of every broker), and so that the pods are spread when they and their
    /// volumes are first placed: a volume bound to a node or a zone keeps its pod there,
    /// whatever a later template prefers.
    pub fn spreads_replicas(&self) -> bool {
        self.replication().is_some() || self.storage.is_some()
    }
}

/// One thing wrong with a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The `Degraded` reason it maps to.
    pub reason: Reason,
    /// What is wrong, naming the field.
    pub message: String,
}

/// Why a spec was refused: every problem found, in field order.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.message())]
pub struct SpecError {
    /// The problems; never empty.
    pub problems: Vec<Problem>,
}

impl SpecError {
    /// The `Degraded` reason: the first problem's.
    pub fn reason(&self) -> Reason {
        self.problems
            .first()
            .map_or(Reason::InvalidSpec, |p| p.reason)
    }

    /// All problems on one line.
    pub fn message(&self) -> String {
        self.problems
            .iter()
            .map(|p| p.message.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The tier to render. With `spec.autoscaling.enabled`: the autoscaler's choice
/// (`status.effectiveTier`, or `spec.tier` before it has chosen), clamped to
/// `minTier`..`maxTier`. Otherwise `spec.tier`, whatever the status says, so turning autoscaling
/// off returns to `spec.tier`.
pub fn effective_tier(spec: &BrokerClusterSpec, status: Option<&BrokerClusterStatus>) -> Tier {
    match &spec.autoscaling {
        Some(a) if a.enabled && a.min_tier <= a.max_tier => status
            .and_then(|s| s.effective_tier)
            .unwrap_or(spec.tier)
            .clamp(a.min_tier, a.max_tier),
        _ => spec.tier,
    }
}

/// Checks and resolves a BrokerCluster at its [`effective_tier`].
pub fn validate(
    bc: &BrokerCluster,
    id: ObjectIdentity,
    defaults: &OperatorDefaults,
) -> Result<ValidatedCluster, SpecError> {
    validate_at_tier(
        bc,
        id,
        defaults,
        effective_tier(&bc.spec, bc.status.as_ref()),
    )
}

/// [`validate`], and refuses a `spec.storage` that differs from the volume claim template of
/// `observed`, the cluster's existing StatefulSet ([`storage::storage_problem`]): the reconciler
/// cannot see the previous spec, so the StatefulSet stands in for it. Its problem comes after
/// the spec's own.
pub fn validate_observed(
    bc: &BrokerCluster,
    id: ObjectIdentity,
    defaults: &OperatorDefaults,
    observed: Option<&StatefulSet>,
) -> Result<ValidatedCluster, SpecError> {
    let storage = storage::storage_problem(bc.spec.storage.as_ref(), observed);
    match (validate(bc, id, defaults), storage) {
        (result, None) => result,
        (Ok(_), Some(p)) => Err(SpecError { problems: vec![p] }),
        (Err(mut e), Some(p)) => {
            e.problems.push(p);
            Err(e)
        }
    }
}

/// Checks and resolves a BrokerCluster as if `tier` were the tier to render: what
/// [`validate`] does at the effective tier, and what a staged tier change
/// ([`crate::tier_change::stage`]) asks for the tier it keeps for one more step.
pub fn validate_at_tier(
    bc: &BrokerCluster,
    id: ObjectIdentity,
    defaults: &OperatorDefaults,
    tier: Tier,
) -> Result<ValidatedCluster, SpecError> {
    let spec = &bc.spec;
    let mut problems = Vec::new();
    let mut problem = |reason, message: String| problems.push(Problem { reason, message });

    if !valid_cluster_name(&id.name) {
        problem(
            Reason::InvalidName,
            format!(
                "name `{}` must start with a letter, contain only lowercase letters, digits and '-', and be at most {MAX_NAME_LEN} characters",
                id.name
            ),
        );
    }
    let replicas = spec
        .replicas
        .unwrap_or_else(|| i32::try_from(defaults.tiers.sizing(tier).replicas).unwrap_or(i32::MAX));
    if replicas < 1 {
        problem(
            Reason::InvalidSpec,
            format!("replicas must be at least 1, got {replicas}"),
        );
    }
    // Also checked here, before anything is rendered, for objects the API server admitted
    // before the CRD carried the rule.
    if i64::from(replicas) > i64::from(starling_config::MAX_REPLICAS) {
        problem(
            Reason::InvalidSpec,
            format!(
                "replicas must be at most {}, got {replicas}",
                starling_config::MAX_REPLICAS
            ),
        );
    }
    if let Some(a) = &spec.autoscaling {
        if a.min_tier > a.max_tier {
            problem(
                Reason::InvalidSpec,
                format!(
                    "autoscaling.minTier ({}) must not be a larger tier than autoscaling.maxTier ({})",
                    a.min_tier, a.max_tier
                ),
            );
        }
        if let Err(message) = Policy::from_spec(a) {
            problem(Reason::InvalidSpec, message);
        }
        if a.enabled && spec.replicas.is_some() {
            problem(
                Reason::InvalidSpec,
                crate::crd::rules::AUTOSCALING_REPLICAS_MESSAGE.to_string(),
            );
        }
    }
    let image = spec
        .image
        .clone()
        .unwrap_or_else(|| defaults.broker_image.clone());
    if image.trim().is_empty() {
        problem(Reason::InvalidSpec, "image must not be empty".to_string());
    }
    let resources = match effective_resources(spec, tier, &defaults.tiers) {
        Ok(r) => Some(r),
        Err(messages) => {
            for m in messages {
                problem(Reason::InvalidResources, m);
            }
            None
        }
    };
    let names = Names::new(&id.name);
    let user_tls = spec.tls.as_ref().map(|t| t.secret_name.clone());
    let tls_generated = user_tls.is_none();
    let tls_secret = user_tls.unwrap_or_else(|| names.generated_tls_secret.clone());
    let (ca_secret, ca_explicit) = crate::ca_trust::ca_secret_name(spec, &names);
    let memory_limit = resources
        .as_ref()
        .and_then(|r| starling_config::quantity::parse_units(&r.limits.memory));
    let config = match broker_config(spec, tier, &names, &id.namespace, memory_limit) {
        Ok(c) => Some(c),
        Err(p) => {
            problems.push(p);
            None
        }
    };
    if let (Some(config), Some(limit)) = (&config, memory_limit) {
        let peers = u32::try_from(replicas.saturating_sub(1)).unwrap_or(0);
        if let Err(e) = starling_config::memory::check_fit(config, peers, limit) {
            problems.push(Problem {
                reason: Reason::InvalidConfig,
                message: format!("config rejected: {e}"),
            });
        }
    }
    match (config, resources) {
        (Some(config), Some(resources)) if problems.is_empty() => {
            let config_yaml = config.to_yaml();
            let config_hash = config_hash(&config_yaml, Some(&tls_secret));
            Ok(ValidatedCluster {
                names,
                id,
                tier,
                profile: spec.profile,
                replicas,
                config,
                config_yaml,
                config_hash,
                resources,
                image,
                tls_secret,
                tls_generated,
                ca_secret,
                ca_explicit,
                cluster_domain: defaults.cluster_domain.clone(),
                min_ready_seconds: i32::try_from(defaults.handoff_grace.as_secs())
                    .unwrap_or(i32::MAX),
                storage: spec.storage.clone(),
                pod: spec.pod_template.clone().unwrap_or_default(),
                auth_mode: spec.auth_mode(),
                network: spec.network.clone().unwrap_or_default(),
                operator_namespace: defaults.operator_namespace.clone(),
            })
        }
        _ => Err(SpecError { problems }),
    }
}

/// Whether a BrokerCluster name fits every child name (a DNS-1035 label of at most
/// [`MAX_NAME_LEN`] characters).
pub fn valid_cluster_name(name: &str) -> bool {
    let b = name.as_bytes();
    !b.is_empty()
        && b.len() <= MAX_NAME_LEN
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.last() != Some(&b'-')
}

/// The broker config: profile ⊕ tier ⊕ `spec.config` and `spec.durability` (see
/// [`durability`]) ⊕ the knobs the operator owns. The byte
/// budgets and object caps `spec.config` leaves unset follow the pod's effective memory limit
/// (`starling_config::memory::MemoryBudgets`), so an admin's tier override or
/// `spec.resources.limits.memory` resizes them the way the tier table sizes its own limits.
fn broker_config(
    spec: &BrokerClusterSpec,
    tier: Tier,
    names: &Names,
    namespace: &str,
    memory_limit: Option<u64>,
) -> Result<BrokerConfig, Problem> {
    let mut overrides = durability::merged_overrides(spec)?;
    let set = overrides.set_fields();
    let managed: Vec<&str> = OPERATOR_MANAGED_KNOBS
        .iter()
        .copied()
        .filter(|k| set.contains(k))
        .collect();
    if !managed.is_empty() {
        return Err(Problem {
            reason: Reason::ManagedKnobSet,
            message: format!(
                "config.{} {} set by the operator and cannot be overridden (use spec.tls for TLS, spec.auth.mode for authentication and spec.storage for the durable topics' volume and BrokerTopics for the topics document; cluster membership, users and peer certificates are managed by the operator)",
                managed.join(", config."),
                if managed.len() == 1 { "is" } else { "are" }
            ),
        });
    }
    if spec.storage.is_none()
        && overrides
            .durable_topics
            .as_ref()
            .is_some_and(|t| !t.is_empty())
    {
        return Err(Problem {
            reason: Reason::InvalidConfig,
            message: "config.durable_topics needs spec.storage: durable topics keep their logs on \
                      the brokers' volumes"
                .to_string(),
        });
    }
    force_operator_knobs(&mut overrides, names, namespace);
    overrides.auth_mode = Some(spec.auth_mode());
    overrides.storage_dir = Some(spec.storage.as_ref().map(|_| DATA_DIR.into()));
    // The topics document of the cluster's BrokerTopics, mounted with the volumes (an empty
    // document when there are none): its path only, so its content is no part of the hash.
    overrides.topics_file = Some(spec.storage.as_ref().map(|_| topics_path().into()));
    let mut config = compose(spec.profile, Some(tier), &overrides);
    if let Some(limit) = memory_limit {
        starling_config::memory::MemoryBudgets::for_limit(limit).apply_unset(&mut config, &set);
    }
    config.validate().map(|()| config).map_err(|e| Problem {
        reason: Reason::InvalidConfig,
        message: format!("config rejected: {e}"),
    })
}

/// Sets the knobs the operator owns: the listeners on the container ports, the certificate
/// paths of the mounted TLS secret (the user's or the generated one, so every broker has the
/// same certificate), the members ConfigMap, the users document Secret, and the peer
/// certificate mounted from `<cluster>-peer` at [`PEER_DIR`] (its `ca.crt`, the cluster CA, is
/// also the CA that signs user client certificates) and the URI it carries
/// ([`crate::pki::peer_uri`]). `auth_mode` is set from `spec.auth.mode` by the caller.
pub fn force_operator_knobs(overrides: &mut ConfigOverrides, names: &Names, namespace: &str) {
    use std::net::{IpAddr, Ipv4Addr, SocketAddr};
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    overrides.quic_listen = Some(SocketAddr::new(any, starling_config::DEFAULT_QUIC_PORT));
    overrides.http_listen = Some(SocketAddr::new(any, starling_config::DEFAULT_HTTP_PORT));
    overrides.tls_cert_file = Some(Some(format!("{TLS_DIR}/tls.crt").into()));
    overrides.tls_key_file = Some(Some(format!("{TLS_DIR}/tls.key").into()));
    overrides.cluster_members_file = Some(None);
    overrides.cluster_members_configmap = Some(Some(names.members_config_map.clone()));
    overrides.auth_users_file = Some(None);
    overrides.auth_users_secret = Some(Some(names.users_secret.clone()));
    overrides.auth_client_ca_file = Some(Some(format!("{PEER_DIR}/ca.crt").into()));
    overrides.cluster_peer_cert_file = Some(Some(format!("{PEER_DIR}/tls.crt").into()));
    overrides.cluster_peer_key_file = Some(Some(format!("{PEER_DIR}/tls.key").into()));
    overrides.cluster_peer_uri = Some(Some(crate::pki::peer_uri(namespace, &names.cluster)));
}

/// Path of the topics document inside the pod ([`crate::names::TOPICS_DIR`]).
pub fn topics_path() -> String {
    format!("{TOPICS_DIR}/{TOPICS_KEY}")
}

/// Path of the config file the broker is started with.
pub fn config_path() -> String {
    format!("{CONFIG_DIR}/{CONFIG_FILE}")
}

/// The tier's resources with `spec.resources` on top; every quantity parsed and each request
/// at most its limit.
fn effective_resources(
    spec: &BrokerClusterSpec,
    tier: Tier,
    tiers: &TierTable,
) -> Result<Resources, Vec<String>> {
    let t = tiers.sizing(tier).resources;
    let o = spec.resources.clone().unwrap_or_default();
    let req = o.requests.unwrap_or_default();
    let lim = o.limits.unwrap_or_default();
    let r = Resources {
        requests: CpuMemory {
            cpu: req.cpu.map_or(t.cpu_request, String::from),
            memory: req.memory.map_or(t.memory_request, String::from),
        },
        limits: CpuMemory {
            cpu: lim.cpu.map_or(t.cpu_limit, String::from),
            memory: lim.memory.map_or(t.memory_limit, String::from),
        },
    };
    let mut errors = Vec::new();
    for (what, request, limit) in [
        ("cpu", &r.requests.cpu, &r.limits.cpu),
        ("memory", &r.requests.memory, &r.limits.memory),
    ] {
        match (parse_nanos(request), parse_nanos(limit)) {
            (Some(rq), Some(lm)) if rq > lm => errors.push(format!(
                "resources.requests.{what} ({request}) must not exceed resources.limits.{what} ({limit})"
            )),
            (Some(rq), Some(_)) if rq <= 0 => errors.push(format!(
                "resources.requests.{what} ({request}) must be positive"
            )),
            (None, _) => errors.push(format!(
                "resources.requests.{what} `{request}` is not a quantity"
            )),
            (_, None) => errors.push(format!(
                "resources.limits.{what} `{limit}` is not a quantity"
            )),
            _ => {}
        }
    }
    if let Some(s) = &spec.storage
        && parse_nanos(s.size.as_str()).is_none_or(|n| n <= 0)
    {
        errors.push(format!(
            "storage.size `{}` is not a positive quantity",
            s.size
        ));
    }
    if errors.is_empty() {
        Ok(r)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests;
