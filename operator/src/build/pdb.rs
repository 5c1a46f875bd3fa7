//! The PodDisruptionBudget: at most one broker down at a time, only when there is more than one.

use k8s_openapi::api::policy::v1::{PodDisruptionBudget, PodDisruptionBudgetSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::child_meta;
use crate::validate::ValidatedCluster;

/// Renders the PodDisruptionBudget, or `None` for a single broker (a budget of one unavailable
/// pod out of one would not protect anything and would block node drains needlessly).
/// `replicas` is the StatefulSet's size.
pub fn build(v: &ValidatedCluster, replicas: i32) -> Option<PodDisruptionBudget> {
    (replicas > 1).then(|| PodDisruptionBudget {
        metadata: child_meta(v, &v.names.pdb),
        spec: Some(PodDisruptionBudgetSpec {
            max_unavailable: Some(IntOrString::Int(1)),
            selector: Some(LabelSelector {
                match_labels: Some(v.names.selector_labels()),
                ..LabelSelector::default()
            }),
            ..PodDisruptionBudgetSpec::default()
        }),
        ..PodDisruptionBudget::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn only_with_more_than_one_broker() {
        let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
        assert!(build(&v, 1).is_none());
        let pdb = build(&v, 3);
        let spec = pdb.and_then(|p| p.spec).unwrap_or_default();
        assert_eq!(spec.max_unavailable, Some(IntOrString::Int(1)));
        assert!(build(&v, 2).is_some());
    }
}
