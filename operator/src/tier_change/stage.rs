//! Applies the step of a tier change ([`super::plan`]) to the validated target: what a
//! reconcile renders now, and whether that is an intermediate step. Pure: the observed
//! StatefulSet, the stored status and the clock are inputs.
//!
//! Growing first renders the *old* tier's config at the new broker count; that config comes
//! from [`validate_at_tier`] at the kept tier, not from a second validation of an edited copy of
//! the spec.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::jiff::Timestamp;

use super::{Stage, TierChangeInput, plan};
use crate::crd::BrokerCluster;
use crate::members::Observed;
use crate::status::{self, Rollout, available_replicas, template_hash};
use crate::validate::{OperatorDefaults, ValidatedCluster, validate_at_tier};

/// What to render for `v` (the cluster validated at its target tier) given the StatefulSet
/// `before` the reconcile: `(cluster, staged)`, `staged` true when it is an intermediate step.
pub fn stage(
    bc: &BrokerCluster,
    v: ValidatedCluster,
    before: Option<&StatefulSet>,
    defaults: &OperatorDefaults,
    now: Timestamp,
) -> (ValidatedCluster, bool) {
    let observed = Observed::of(before, bc.status.as_ref(), now);
    let members = observed.members.or(observed.statefulset_replicas);
    let settled = observed.members_changed_at.is_none_or(|t| {
        Duration::try_from(now.duration_since(t)).unwrap_or(Duration::ZERO)
            >= defaults.handoff_grace
    });
    let input = TierChangeInput {
        target: v.tier,
        target_replicas: v.replicas,
        rendered: bc.status.as_ref().and_then(|s| s.tier),
        members,
        // Brokers still run an older config, or the last replaced one is not ready yet (the
        // StatefulSet reports the roll finished as soon as the last pod is recreated). A
        // cluster without any ready broker has nothing to hand off: its scale-down is not
        // held (e.g. brokers Pending on a too small node).
        rolling_to_target: template_hash(before) == Some(v.config_hash.as_str())
            && members.is_some_and(|m| match status::rollout(before, m, Some(&v.config_hash)) {
                Rollout::RollingOut | Rollout::Pending => true,
                Rollout::NotReady => observed.ready_replicas > 0,
                // Ready, but the last restarted broker has not been available for
                // `minReadySeconds` yet (its entries are still coming back).
                Rollout::Ready => available_replicas(before) < m,
                _ => false,
            }),
        members_settled: settled,
    };
    match plan(&input) {
        Stage::Direct => (v, false),
        Stage::RollFirst { keep_replicas } => (
            ValidatedCluster {
                replicas: keep_replicas,
                ..v
            },
            true,
        ),
        Stage::GrowFirst { keep_tier } => {
            match validate_at_tier(bc, v.id.clone(), defaults, keep_tier) {
                Ok(kept) => (
                    ValidatedCluster {
                        replicas: v.replicas,
                        ..kept
                    },
                    true,
                ),
                // The old tier no longer validates (e.g. the admin changed the tier table):
                // go straight to the target.
                Err(_) => (v, false),
            }
        }
    }
}
