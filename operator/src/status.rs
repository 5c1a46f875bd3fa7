//! Status: the conditions and counters written back to a BrokerCluster, computed from the
//! validation outcome and the observed StatefulSet. Pure: the clock is passed in.
//!
//! `Ready` is true only when every desired broker is ready, available (ready for the
//! StatefulSet's `minReadySeconds`, the hand-off grace) and running the current config hash.
//! `Progressing` is true while brokers are being created, replaced or scaled. `Degraded` is true
//! when the spec was refused or the children could not be applied.
//!
//! `ReplicationDegraded` ([`replication`]) says whether the durable topics' replicas can be
//! kept apart: from the validated `durable_replicas` and the replica counts of the accepted
//! BrokerTopics, the member count and the nodes of the broker pods. A refused spec keeps the
//! previous one.
//!
//! While the operator holds a replicated cluster's roll ([`crate::roll`]), `Progressing`
//! says what it waits for: `RollWaitingForReplicas` (a replica not in sync, or a broker whose
//! `/replicas` could not be read) or `RollingOut` naming the pod. While a scale-down's
//! StatefulSet waits for the leaving brokers' replicas ([`crate::members::leaving`]), it says
//! `ScaleDownWaitingForReplicas` naming the broker and how many topics it still holds, and
//! `ScaleDownStalled` (False) once that has lasted longer than the bound.
//!
//! `DiskFull` ([`volumes`]) says whether a broker's storage volume is full, from the brokers'
//! own `GET /storage` answers. A refused spec keeps the previous one.
//!
//! `UsersTableHealthy` ([`users_table`]) says whether the users Secret is valid and the brokers
//! hold the table it carries, from the Secret and the brokers' `GET /users` answers. A refused
//! spec keeps the previous one.
//!
//! `storage` is read from the same StatefulSet: its data volume claim template and retention
//! policy, what the operator rendered from `spec.storage` as the API server stored it.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::crd::conditions::{ConditionType, Reason};
use crate::crd::{
    BrokerClusterStatus, ClaimRetention, ClaimRetentionPolicy, Endpoints, StorageStatus,
};
use crate::members::MembersPlan;
use crate::names::{CONFIG_HASH_ANNOTATION, DATA_VOLUME, Names};
use crate::roll::Roll;
use crate::validate::storage::rendered_claim;
use crate::validate::{SpecError, ValidatedCluster};

pub mod replication;
pub mod topics;
pub mod users_table;
pub mod volumes;

/// What the StatefulSet shows about the rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rollout {
    /// No StatefulSet.
    Missing,
    /// The StatefulSet controller has not observed the latest spec yet.
    Pending,
    /// Some pods run an older template.
    RollingOut,
    /// The pod count differs from the desired count.
    Scaling,
    /// Every pod is current but not all are ready.
    NotReady,
    /// Every desired pod is ready and current.
    Ready,
}

/// Reads the rollout state of `sts` against the desired replica count and config hash.
pub fn rollout(sts: Option<&StatefulSet>, desired: i32, hash: Option<&str>) -> Rollout {
    let Some(sts) = sts else {
        return Rollout::Missing;
    };
    let Some(st) = sts.status.as_ref() else {
        return Rollout::Pending;
    };
    if st.observed_generation.unwrap_or(0) < sts.metadata.generation.unwrap_or(0) {
        return Rollout::Pending;
    }
    let template_hash = sts
        .spec
        .as_ref()
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
        .map(String::as_str);
    let revisions_differ = match (&st.current_revision, &st.update_revision) {
        (Some(c), Some(u)) => c != u,
        _ => false,
    };
    let updated = st.updated_replicas.unwrap_or(0);
    if (hash.is_some() && template_hash != hash)
        || revisions_differ
        || updated < st.replicas.min(desired)
    {
        return Rollout::RollingOut;
    }
    if st.replicas != desired {
        return Rollout::Scaling;
    }
    // Available: ready for `minReadySeconds` (the hand-off grace), so a restarted broker has
    // its cache entries back. Without the field, ready counts.
    let available = st.available_replicas.or(st.ready_replicas).unwrap_or(0);
    if st.ready_replicas.unwrap_or(0) < desired || updated < desired || available < desired {
        return Rollout::NotReady;
    }
    Rollout::Ready
}

/// The config hash on the StatefulSet's pod template.
pub fn template_hash(sts: Option<&StatefulSet>) -> Option<&str> {
    sts?.spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(CONFIG_HASH_ANNOTATION)
        .map(String::as_str)
}

/// `status.availableReplicas` of the StatefulSet (ready for `minReadySeconds`); without it,
/// the ready count.
pub fn available_replicas(sts: Option<&StatefulSet>) -> i32 {
    sts.and_then(|s| s.status.as_ref()).map_or(0, |st| {
        st.available_replicas.or(st.ready_replicas).unwrap_or(0)
    })
}

/// A retention value as the StatefulSet spells it; unset is Kubernetes' default, `Retain`.
fn claim_retention(value: Option<&str>) -> ClaimRetention {
    match value {
        Some("Delete") => ClaimRetention::Delete,
        _ => ClaimRetention::Retain,
    }
}

/// `status.storage`: the data volume claim template and retention policy of `sts`; `None`
/// without a StatefulSet or without a claim template.
pub fn storage(sts: Option<&StatefulSet>) -> Option<StorageStatus> {
    let sts = sts?;
    let claim = rendered_claim(sts)?;
    let policy = sts
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    Some(StorageStatus {
        size: claim.size.unwrap_or_default(),
        storage_class_name: claim.storage_class_name,
        claim_template: DATA_VOLUME.to_string(),
        persistent_volume_claim_retention_policy: ClaimRetentionPolicy {
            when_deleted: claim_retention(policy.and_then(|p| p.when_deleted.as_deref())),
            when_scaled: claim_retention(policy.and_then(|p| p.when_scaled.as_deref())),
        },
    })
}

/// Everything the status is computed from.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    /// Child names.
    pub names: &'a Names,
    /// Namespace of the cluster.
    pub namespace: &'a str,
    /// `metadata.generation` of the BrokerCluster.
    pub generation: Option<i64>,
    /// `spec.paused`.
    pub paused: bool,
    /// The validation outcome.
    pub desired: Result<&'a ValidatedCluster, &'a SpecError>,
    /// The StatefulSet as last seen (after apply when applied).
    pub sts: Option<&'a StatefulSet>,
    /// The status currently stored, to keep transition times and values not re-derived here.
    pub previous: Option<&'a BrokerClusterStatus>,
    /// The apply error of this reconcile, if any: the `Degraded` reason it is reported under
    /// (`ApplyFailed`, or a more precise one such as `UntrustedCa`) and its message.
    pub apply_error: Option<(Reason, String)>,
    /// The membership step applied by this reconcile (`None` when nothing was applied: the
    /// previous `members` and `membersChangedAt` are kept).
    pub members: Option<&'a MembersPlan>,
    /// Where the broker pods run, read only when the durable topics are replicated (`None`
    /// otherwise, or when nothing was read).
    pub placement: Option<&'a replication::Observation>,
    /// The brokers' `GET /storage` answers, read only when some topic is durable (`None`
    /// otherwise, or when nothing was read).
    pub volumes: Option<&'a volumes::Observation>,
    /// The users Secret and the brokers' `GET /users` answers, read only when authentication
    /// is on (`None` otherwise, or when nothing was read).
    pub users_table: Option<&'a users_table::Observation>,
    /// The held roll's decision of this reconcile (`None` when nothing was applied: paused,
    /// refused, or an unreplicated cluster's reconcile that did not decide one).
    pub roll: Option<&'a Roll>,
    /// The most copies an accepted BrokerTopic of the cluster keeps of its topics, when more
    /// than one ([`crate::validate::topics::Judged::most_replicas`]): `ReplicationDegraded`
    /// judges the cluster against it as against `durable_replicas`.
    pub topic_replicas: Option<u32>,
    /// The current time.
    pub now: Time,
}

/// Computes the status to store.
pub fn compute(input: &StatusInput<'_>) -> BrokerClusterStatus {
    let prev = input.previous.cloned().unwrap_or_default();
    let st = input.sts.and_then(|s| s.status.as_ref());
    let sts_replicas = input
        .sts
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.replicas);
    let sts_hash = input
        .sts
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION))
        .cloned();

    // Against what is the rollout judged? The validated cluster when it is applied; otherwise
    // (paused or refused) the StatefulSet's own desired state.
    let (desired_replicas, hash, applied) = match input.desired {
        Ok(v) if !input.paused => (v.replicas, Some(v.config_hash.clone()), Some(v)),
        _ => (sts_replicas.unwrap_or(0), sts_hash.clone(), None),
    };
    let state = match (
        rollout(input.sts, desired_replicas, hash.as_deref()),
        input.members,
    ) {
        // Every pod is up but the new brokers are not members yet.
        (Rollout::Ready, Some(m)) if m.members != desired_replicas => Rollout::Scaling,
        (state, _) => state,
    };
    let ready_replicas = st.and_then(|s| s.ready_replicas).unwrap_or(0);

    let (ready_reason, ready_msg) = match (input.desired, state) {
        (Err(_), _) => (
            Reason::SpecRejected,
            "the spec was refused, see the Degraded condition".to_string(),
        ),
        (_, Rollout::Missing) => (
            Reason::NotCreated,
            "the StatefulSet does not exist".to_string(),
        ),
        (_, Rollout::Ready) => (
            Reason::AllReplicasReady,
            format!("{ready_replicas}/{desired_replicas} brokers ready"),
        ),
        (_, Rollout::RollingOut | Rollout::Pending) => (
            Reason::RolloutInProgress,
            format!("{ready_replicas}/{desired_replicas} brokers ready, rollout in progress"),
        ),
        (_, Rollout::NotReady) if ready_replicas >= desired_replicas => (
            Reason::ReplicasNotReady,
            format!(
                "{ready_replicas}/{desired_replicas} brokers ready, waiting for the hand-off grace (minReadySeconds)"
            ),
        ),
        (_, Rollout::Scaling | Rollout::NotReady) => (
            Reason::ReplicasNotReady,
            format!("{ready_replicas}/{desired_replicas} brokers ready"),
        ),
    };
    let held = input.roll.and_then(Roll::progress);
    // A scale-down whose StatefulSet waits for the leaving brokers' replicas.
    let scale_held = input
        .members
        .and_then(|m| m.held.as_ref())
        .map(|h| (h.reason(), h.message()));
    let (prog_reason, prog_msg) = if input.paused {
        let pending = matches!(input.desired, Ok(v) if sts_hash.as_deref() != Some(v.config_hash.as_str()) || sts_replicas != Some(v.replicas));
        (
            Reason::Paused,
            if pending {
                "paused; spec changes are applied when spec.paused is false".to_string()
            } else {
                "paused".to_string()
            },
        )
    } else {
        match state {
            // A scale-down held by the leaving brokers' replicas (the StatefulSet exists).
            _ if scale_held.is_some() => scale_held.unwrap_or((Reason::Scaling, String::new())),
            Rollout::Missing | Rollout::Pending if st.is_none() => {
                (Reason::Creating, "creating the StatefulSet".to_string())
            }
            // A replicated cluster's roll held by the operator: what it waits for.
            Rollout::RollingOut | Rollout::Pending if held.is_some() => {
                held.unwrap_or((Reason::RollingOut, String::new()))
            }
            Rollout::RollingOut | Rollout::Pending => (
                Reason::RollingOut,
                format!(
                    "{}/{desired_replicas} brokers updated",
                    st.and_then(|s| s.updated_replicas).unwrap_or(0)
                ),
            ),
            Rollout::Scaling => (
                Reason::Scaling,
                format!(
                    "scaling from {} to {desired_replicas} brokers",
                    st.map_or(0, |s| s.replicas)
                ),
            ),
            Rollout::Missing | Rollout::NotReady | Rollout::Ready => {
                (Reason::Stable, "no change in flight".to_string())
            }
        }
    };
    let (deg_reason, deg_msg) = match (input.desired, &input.apply_error) {
        (Err(e), _) => (e.reason(), e.message()),
        (Ok(_), Some((reason, err))) => (*reason, err.clone()),
        (Ok(_), None) => (Reason::AsExpected, "spec accepted and applied".to_string()),
    };

    let auth_mode = match input.desired {
        Ok(v) => Some(v.auth_mode),
        Err(_) => None,
    };
    let auth = match auth_mode {
        Some(starling_config::AuthMode::None) => Some((
            Reason::AuthModeNone,
            "spec.auth.mode is none: clients are not authenticated and every operation is allowed; use it for development only".to_string(),
        )),
        Some(starling_config::AuthMode::Required) => Some((
            Reason::AuthRequired,
            "clients authenticate as BrokerUsers".to_string(),
        )),
        // A refused spec: keep what was reported before.
        None => None,
    };
    // Brokers in the member list, at most the desired count: the brokers' own view of how
    // many replicas a topic can have.
    let replicated = match input.desired {
        Ok(v) => {
            let members = input.members.map(|m| m.members).or(prev.members);
            let brokers = members.map_or(v.replicas, |m| m.min(v.replicas));
            Some(replication::condition(
                v.replication().max(input.topic_replicas),
                brokers,
                input.placement,
            ))
        }
        Err(_) => None,
    };
    let disk = match input.desired {
        // Durable by the knobs, or the volumes were read because some BrokerTopic is.
        Ok(v) => Some(volumes::condition(
            !v.config.durable_topics.is_empty() || input.volumes.is_some(),
            input.volumes,
        )),
        Err(_) => None,
    };
    let users = match input.desired {
        Ok(v) => Some(users_table::condition(
            v.auth_mode == starling_config::AuthMode::Required,
            input.users_table,
        )),
        Err(_) => None,
    };
    // A refused spec: keep what was reported before.
    let kept = |computed: bool, t: ConditionType| {
        if computed {
            None
        } else {
            prev.conditions
                .iter()
                .find(|c| c.type_ == t.as_str())
                .cloned()
        }
    };
    let kept_auth = kept(auth.is_some(), ConditionType::AuthenticationDisabled);
    let kept_replication = kept(replicated.is_some(), ConditionType::ReplicationDegraded);
    let kept_disk = kept(disk.is_some(), ConditionType::DiskFull);
    let kept_users = kept(users.is_some(), ConditionType::UsersTableHealthy);
    let conditions = [
        Some((ready_reason, ready_msg)),
        Some((prog_reason, prog_msg)),
        Some((deg_reason, deg_msg)),
        auth,
    ]
    .into_iter()
    .flatten()
    .map(|(reason, message)| condition(reason, message, input, &prev.conditions))
    .chain(kept_auth)
    .chain(replicated.map(|(reason, message)| condition(reason, message, input, &prev.conditions)))
    .chain(kept_replication)
    .chain(disk.map(|(reason, message)| condition(reason, message, input, &prev.conditions)))
    .chain(kept_disk)
    .chain(users.map(|(reason, message)| condition(reason, message, input, &prev.conditions)))
    .chain(kept_users)
    .collect();

    BrokerClusterStatus {
        observed_generation: input.generation,
        conditions,
        replicas: st.map_or(0, |s| s.replicas),
        ready_replicas,
        ready: Some(format!("{ready_replicas}/{desired_replicas}")),
        tier: applied.map(|v| v.tier).or(prev.tier),
        profile: applied.map(|v| v.profile).or(prev.profile),
        effective_tier: prev.effective_tier,
        config_hash: applied.map(|v| v.config_hash.clone()).or(sts_hash),
        selector: Some(input.names.selector_string()),
        endpoints: Some(Endpoints {
            host: input.names.client_host(input.namespace),
            quic_port: starling_config::DEFAULT_QUIC_PORT.into(),
            http_port: starling_config::DEFAULT_HTTP_PORT.into(),
        }),
        members: input.members.map(|m| m.members).or(prev.members),
        members_changed_at: input
            .members
            .map(|m| Time(m.members_changed_at))
            .or(prev.members_changed_at),
        storage: storage(input.sts),
        autoscaling: prev.autoscaling,
    }
}

/// Builds one condition, keeping the previous transition time when the status did not change.
fn condition(
    reason: Reason,
    message: String,
    input: &StatusInput<'_>,
    previous: &[Condition],
) -> Condition {
    let type_ = reason.condition().as_str();
    let status = reason.status();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| input.now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_string(),
        status: status.to_string(),
        reason: reason.as_str().to_string(),
        message,
        observed_generation: input.generation,
        last_transition_time,
    }
}

#[cfg(test)]
mod tests;
