//! What the roll decision reads of the API objects: the live StatefulSet ([`live_set`]) and its
//! pods ([`pod_views`]). Pure. The brokers' `GET /replicas` are read by the controller
//! (`crate::controller`), at each pod's IP and `http` port with the operator's one broker HTTP
//! client, as the volumes are, and parsed by [`super::report::parse`].

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt;

use super::{LiveSet, PodView, REVISION_LABEL};
use crate::names::TEMPLATE_HASH_ANNOTATION;
use crate::pods::{Owner, owned_by};

/// The StatefulSet as the roll reads it; `None` without a name.
pub fn live_set(sts: &StatefulSet) -> Option<LiveSet> {
    let spec = sts.spec.as_ref();
    let status = sts.status.as_ref();
    Some(LiveSet {
        name: sts.metadata.name.clone()?,
        template_hash: sts
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(TEMPLATE_HASH_ANNOTATION))
            .cloned(),
        partition: spec
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|u| u.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0),
        generation: sts.metadata.generation.unwrap_or(0),
        observed_generation: status.and_then(|s| s.observed_generation).unwrap_or(0),
        update_revision: status.and_then(|s| s.update_revision.clone()),
    })
}

/// The pods `sts` controls ([`owned_by`]), each with its ordinal, revision label, readiness
/// and whether it is being deleted. Pure.
pub fn pod_views(pods: &[Pod], sts: &StatefulSet) -> Vec<PodView> {
    let Some(owner) = Owner::of(sts) else {
        return Vec::new();
    };
    pods.iter()
        .filter(|p| owned_by(p, &owner))
        .filter_map(|p| {
            let name = p.name_any();
            let ordinal = name
                .strip_prefix(owner.name)
                .and_then(|rest| rest.strip_prefix('-'))
                .and_then(|o| o.parse::<i32>().ok())?;
            let ready_since = p
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
                .filter(|c| c.status == "True")
                // Ready without a transition time: counted as ready since long ago.
                .map(|c| {
                    c.last_transition_time
                        .as_ref()
                        .map_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH, |t| t.0)
                });
            Some(PodView {
                revision: p.labels().get(REVISION_LABEL).cloned(),
                ordinal,
                ready_since,
                terminating: p.metadata.deletion_timestamp.is_some(),
                name,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sts(partition: Option<i32>) -> StatefulSet {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "events", "uid": "sts-uid", "generation": 7,
                         "annotations": {"starling.dev/template-hash": "t1"}},
            "spec": {"replicas": 3, "selector": {}, "serviceName": "events-headless",
                     "template": {},
                     "updateStrategy": {"type": "RollingUpdate",
                                        "rollingUpdate": partition.map(|p| serde_json::json!({"partition": p}))}},
            "status": {"replicas": 3, "observedGeneration": 6, "updateRevision": "events-abc"}
        }))
        .unwrap_or_default()
    }

    fn pod(name: &str, uid: &str, ready: Option<&str>, deleting: bool) -> Pod {
        let conditions = ready.map(|status| {
            serde_json::json!([{"type": "Ready", "status": status,
                                "lastTransitionTime": "2026-12-01T10:00:00Z"}])
        });
        let mut p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"controller-revision-hash": "events-abc"},
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                              "name": "events", "uid": uid, "controller": true}]},
            "status": {"conditions": conditions}
        }))
        .unwrap_or_default();
        if deleting {
            p.metadata.deletion_timestamp =
                Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ));
        }
        p
    }

    #[test]
    fn the_live_set_reads_partition_revision_and_annotation() {
        let l = live_set(&sts(Some(2)));
        assert_eq!(
            l,
            Some(LiveSet {
                name: "events".into(),
                template_hash: Some("t1".into()),
                partition: 2,
                generation: 7,
                observed_generation: 6,
                update_revision: Some("events-abc".into()),
            })
        );
        assert_eq!(live_set(&sts(None)).map(|l| l.partition), Some(0));
    }

    #[test]
    fn pod_views_keep_the_statefulsets_pods_with_their_state() {
        let pods = [
            pod("events-1", "sts-uid", Some("True"), false),
            pod("events-0", "sts-uid", Some("False"), true),
            pod("events-2", "other-uid", Some("True"), false),
            pod("stranger", "sts-uid", Some("True"), false),
        ];
        let views = pod_views(&pods, &sts(None));
        let got: Vec<(&str, i32, Option<&str>, bool, bool)> = views
            .iter()
            .map(|v| {
                (
                    v.name.as_str(),
                    v.ordinal,
                    v.revision.as_deref(),
                    v.ready_since.is_some(),
                    v.terminating,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![
                ("events-1", 1, Some("events-abc"), true, false),
                ("events-0", 0, Some("events-abc"), false, true),
            ]
        );
        assert_eq!(
            views[0].ready_since.map(|t| t.to_string()),
            Some("2026-12-01T10:00:00Z".to_string())
        );
    }
}
