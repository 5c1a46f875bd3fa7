//! Kubernetes Events: which ones a reconcile emits, decided by a pure function of what was
//! observed before applying and what is about to be applied.
//!
//! - `Created` (Normal): the StatefulSet did not exist.
//! - `ConfigRollout` (Normal): the config hash changes, so brokers are replaced one at a time.
//! - `Scaled` (Normal): the desired broker count changes; no broker restarts.
//! - `SpecRejected` (Warning): the spec was refused (emitted when the refusal changes).
//! - `ReconcileFailed` (Warning): an API call failed; retried with backoff.
//! - `TierChanged` (Normal): the autoscaler moved `status.effectiveTier`, with why.
//! - `AuthenticationDisabled` (Warning): `spec.auth.mode` is `none` (emitted when the
//!   `AuthenticationDisabled` condition is not already true).
//! - `RollingBroker` (Normal): a replicated cluster's held roll lets the next broker restart.
//! - `RollWaitingForReplicas` (Normal): the held roll waits for the brokers' replicas
//!   (emitted when what it waits for changes).
//! - `ScaleDownWaitingForReplicas` (Normal): a scale-down's StatefulSet keeps a leaving broker
//!   that still holds replicas (emitted when what it waits for changes).
//! - `ScaleDownStalled` (Warning): that wait has lasted past its bound (emitted once, when
//!   `Progressing` turns to `ScaleDownStalled`).

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::runtime::events::{Event, EventType};

use crate::crd::BrokerClusterStatus;
use crate::crd::conditions::{ConditionType, Reason, find};
use crate::members::MembersPlan;
use crate::names::CONFIG_HASH_ANNOTATION;
use crate::roll::{Roll, Step};
use crate::validate::{SpecError, ValidatedCluster};

/// An event to publish on the BrokerCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Planned {
    /// Warning or Normal.
    pub warning: bool,
    /// CamelCase reason.
    pub reason: &'static str,
    /// What the operator did: `Create`, `Update`, `Scale`, `Validate`, `Reconcile`.
    pub action: &'static str,
    /// The human-readable note.
    pub note: String,
}

impl Planned {
    /// As a kube-runtime event.
    pub fn to_event(&self) -> Event {
        Event {
            type_: if self.warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: self.reason.to_string(),
            note: Some(truncate(&self.note, MAX_NOTE_BYTES)),
            action: self.action.to_string(),
            secondary: None,
        }
    }
}

/// Every event reason with its type and meaning, for the docs.
pub const EVENT_REASONS: &[(&str, &str, &str)] = &[
    (
        "Created",
        "Normal",
        "The StatefulSet did not exist and was created.",
    ),
    (
        "ConfigRollout",
        "Normal",
        "The config hash changed (profile, tier, overrides or TLS secret); brokers are replaced one at a time.",
    ),
    (
        "Scaled",
        "Normal",
        "The desired broker count changed; running brokers are not restarted.",
    ),
    (
        "SpecRejected",
        "Warning",
        "The spec was refused; emitted when the refusal changes. The message names the field.",
    ),
    (
        "ReconcileFailed",
        "Warning",
        "An API call failed; the operator retries with backoff (5 s doubling to 5 min).",
    ),
    (
        "TierChanged",
        "Normal",
        "The autoscaler changed status.effectiveTier, e.g. `tier small→medium: publish 9.1k msg/s > 80% of 10k for 3m`.",
    ),
    (
        "AuthenticationDisabled",
        "Warning",
        "spec.auth.mode is none: clients are not authenticated and every operation is allowed. Emitted when authentication becomes disabled.",
    ),
    (
        "RollingBroker",
        "Normal",
        "A replicated cluster's roll, held by the operator, lets the StatefulSet restart the next broker (the partition is lowered by one pod): every pod above it is updated and Ready, and every other broker reports its replicas in sync.",
    ),
    (
        "RollWaitingForReplicas",
        "Normal",
        "The held roll waits: a broker reports a replica that is not in sync, or its GET /replicas could not be read. The message names the pod and the topic; emitted when that changes.",
    ),
    (
        "ScaleDownWaitingForReplicas",
        "Normal",
        "A scale-down lowered the member list; the StatefulSet keeps the leaving brokers until none of them holds a replica of a replicated topic (or cannot be read). The message names the pod and how many topics it holds; emitted when that changes.",
    ),
    (
        "ScaleDownStalled",
        "Warning",
        "The scale-down has waited for the leaving brokers' replicas for longer than 10 minutes. The operator keeps waiting (stopping the broker could take a topic below quorum); emitted when the Progressing condition turns to ScaleDownStalled.",
    ),
];

/// The API server refuses event notes longer than this.
pub const MAX_NOTE_BYTES: usize = 1024;

/// Cuts `text` to at most `max` bytes on a character boundary.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

/// Events for applying `v` over the StatefulSet observed before the apply.
pub fn for_apply(before: Option<&StatefulSet>, v: &ValidatedCluster) -> Vec<Planned> {
    let Some(sts) = before else {
        return vec![Planned {
            warning: false,
            reason: "Created",
            action: "Create",
            note: format!(
                "created StatefulSet {} with {} brokers ({} tier, {} profile)",
                v.names.statefulset, v.replicas, v.tier, v.profile
            ),
        }];
    };
    let spec = sts.spec.as_ref();
    let mut out = Vec::new();
    let old_hash = spec
        .and_then(|s| s.template.metadata.as_ref())
        .and_then(|m| m.annotations.as_ref())
        .and_then(|a| a.get(CONFIG_HASH_ANNOTATION));
    if old_hash.is_some_and(|h| *h != v.config_hash) {
        out.push(Planned {
            warning: false,
            reason: "ConfigRollout",
            action: "Update",
            note: format!(
                "broker config changed ({} tier, {} profile); rolling brokers to config {}",
                v.tier, v.profile, v.config_hash
            ),
        });
    }
    let old_replicas = spec.and_then(|s| s.replicas);
    if let Some(old) = old_replicas
        && old != v.replicas
    {
        out.push(Planned {
            warning: false,
            reason: "Scaled",
            action: "Scale",
            note: format!("scaled brokers from {old} to {}", v.replicas),
        });
    }
    out
}

/// The warning for a refused spec, unless the stored status already reports the same refusal.
pub fn for_rejection(previous: Option<&BrokerClusterStatus>, err: &SpecError) -> Option<Planned> {
    let message = err.message();
    let already = find(previous, ConditionType::Degraded).is_some_and(|c| {
        c.status == "True" && c.reason == err.reason().as_str() && c.message == message
    });
    (!already).then_some(Planned {
        warning: true,
        reason: "SpecRejected",
        action: "Validate",
        note: message,
    })
}

/// The event of an autoscaler tier change to `to`; `reason` is the decision's, e.g.
/// `tier small→medium: publish 9.1k msg/s > 80% of 10k for 3m`. The action names the target
/// tier: the event recorder folds events with the same reason and action into one series
/// (keeping the first note), so moves to different tiers stay separate events.
pub fn for_tier_change(to: starling_config::Tier, reason: &str) -> Planned {
    use starling_config::Tier;
    Planned {
        warning: false,
        reason: "TierChanged",
        action: match to {
            Tier::Small => "ScaleToSmall",
            Tier::Medium => "ScaleToMedium",
            Tier::Large => "ScaleToLarge",
        },
        note: reason.to_string(),
    }
}

/// The warning for a cluster whose authentication is disabled, unless the stored status
/// already says so (the `AuthenticationDisabled` condition is true).
pub fn for_auth_mode(
    previous: Option<&BrokerClusterStatus>,
    v: &ValidatedCluster,
) -> Option<Planned> {
    if v.auth_mode != starling_config::AuthMode::None {
        return None;
    }
    let already =
        find(previous, ConditionType::AuthenticationDisabled).is_some_and(|c| c.status == "True");
    (!already).then(|| Planned {
        warning: true,
        reason: "AuthenticationDisabled",
        action: "Validate",
        note: format!(
            "spec.auth.mode is none: anyone who reaches {} on the QUIC port may publish, subscribe and use the cache; use it for development only",
            v.names.client_service
        ),
    })
}

/// The events of a held roll's decision: `RollingBroker` when a broker is let restart,
/// `RollWaitingForReplicas` when the brokers' replicas hold the roll, unless the stored
/// `Progressing` condition already says the same.
pub fn for_roll(previous: Option<&BrokerClusterStatus>, roll: &Roll) -> Option<Planned> {
    if let Step::Restart { pod } = &roll.step {
        return Some(Planned {
            warning: false,
            reason: "RollingBroker",
            action: "Update",
            note: format!(
                "every replica in sync: letting the StatefulSet restart {pod} (partition {} to {}; {}/{} brokers updated)",
                roll.from,
                roll.partition.unwrap_or(0),
                roll.updated,
                roll.replicas
            ),
        });
    }
    let (reason, message) = roll.progress()?;
    if reason != crate::crd::conditions::Reason::RollWaitingForReplicas {
        return None;
    }
    let already = find(previous, ConditionType::Progressing)
        .is_some_and(|c| c.reason == reason.as_str() && c.message == message);
    (!already).then_some(Planned {
        warning: false,
        reason: "RollWaitingForReplicas",
        action: "Update",
        note: message,
    })
}

/// The events of a scale-down whose StatefulSet waits for the leaving brokers' replicas
/// ([`MembersPlan::held`]): `ScaleDownWaitingForReplicas` when what it waits for changes (the
/// stored `Progressing` message differs), `ScaleDownStalled` when the wait passes its bound
/// (the stored reason is not already `ScaleDownStalled`).
pub fn for_scale_down(
    previous: Option<&BrokerClusterStatus>,
    plan: &MembersPlan,
) -> Option<Planned> {
    let held = plan.held.as_ref()?;
    let (reason, message) = (held.reason(), held.message());
    let stored = find(previous, ConditionType::Progressing);
    if reason == Reason::ScaleDownStalled {
        let already = stored.is_some_and(|c| c.reason == reason.as_str());
        return (!already).then_some(Planned {
            warning: true,
            reason: "ScaleDownStalled",
            action: "Scale",
            note: message,
        });
    }
    let already = stored.is_some_and(|c| c.reason == reason.as_str() && c.message == message);
    (!already).then_some(Planned {
        warning: false,
        reason: "ScaleDownWaitingForReplicas",
        action: "Scale",
        note: message,
    })
}

/// The warning for a failed reconcile.
pub fn for_error(err: &crate::error::Error) -> Planned {
    Planned {
        warning: true,
        reason: match err {
            crate::error::Error::UntrustedCa(_) => "UntrustedCa",
            crate::error::Error::UsersDocumentFull(_) => "UsersDocumentFull",
            _ => "ReconcileFailed",
        },
        action: "Reconcile",
        note: err.to_string(),
    }
}

#[cfg(test)]
mod tests;
