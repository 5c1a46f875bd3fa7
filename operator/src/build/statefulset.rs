//! The broker StatefulSet: replicas as planned (see [`crate::members`]), parallel pod management (it is
//! immutable, so chosen from day one), `minReadySeconds` of the hand-off grace (a rolling restart
//! waits until the restarted broker got its cache entries back), the pod template from
//! [`super::pod`] and, when storage is requested, one volume claim per broker with its
//! retention policy always set (`Retain`/`Retain` unless `spec.storage` says otherwise), so what
//! happens to the claims is visible on the StatefulSet.
//!
//! A replicated cluster's StatefulSet also carries the `RollingUpdate` partition the operator
//! holds its roll at and the hash of its pod template ([`template_hash`]), from which the next
//! reconcile sees whether the template changed ([`crate::roll`]). An unreplicated one has
//! neither: the StatefulSet controller rolls it by itself.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{
    RollingUpdateStatefulSetStrategy, StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy,
    StatefulSetSpec, StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use sha2::{Digest, Sha256};

use super::{child_meta, pod};
use crate::crd::{ClaimRetentionPolicy, StorageSpec};
use crate::names::{Names, TEMPLATE_HASH_ANNOTATION};
use crate::validate::ValidatedCluster;

/// The hash of a pod template: SHA-256 (first 16 bytes, hex) of its JSON.
pub fn template_hash(template: &PodTemplateSpec) -> String {
    // A PodTemplateSpec always serialises (string keys, no custom serialiser); should it not,
    // every template would hash alike and a change would roll unheld, as an unreplicated one.
    let json = serde_json::to_vec(template).unwrap_or_default();
    Sha256::digest(&json)
        .iter()
        .take(16)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Renders the StatefulSet with `replicas` brokers, its roll held at `partition` (`None`: no
/// partition, nor template hash).
pub fn build(v: &ValidatedCluster, replicas: i32, partition: Option<i32>) -> StatefulSet {
    let template = pod::template(v);
    let mut metadata = child_meta(v, &v.names.statefulset);
    if partition.is_some() {
        metadata.annotations = Some(BTreeMap::from([(
            TEMPLATE_HASH_ANNOTATION.to_string(),
            template_hash(&template),
        )]));
    }
    StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(v.names.selector_labels()),
                ..LabelSelector::default()
            },
            service_name: Some(v.names.headless_service.clone()),
            pod_management_policy: Some("Parallel".to_string()),
            // A rolling restart moves on only after the restarted broker has been ready for
            // the hand-off grace, time for its peers to push its cache entries back.
            min_ready_seconds: Some(v.min_ready_seconds),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("RollingUpdate".to_string()),
                rolling_update: partition.map(|p| RollingUpdateStatefulSetStrategy {
                    partition: Some(p),
                    ..RollingUpdateStatefulSetStrategy::default()
                }),
            }),
            revision_history_limit: Some(5),
            template,
            volume_claim_templates: v
                .storage
                .as_ref()
                .map(|s| vec![claim_template(s, &v.names)]),
            persistent_volume_claim_retention_policy: v
                .storage
                .as_ref()
                .map(|s| retention_policy(s.persistent_volume_claim_retention_policy)),
            ..StatefulSetSpec::default()
        }),
        ..StatefulSet::default()
    }
}

/// The one volume claim template: `data`, `ReadWriteOnce`, the size and class of `spec.storage`.
fn claim_template(s: &StorageSpec, names: &Names) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(pod::DATA_VOLUME.to_string()),
            labels: Some(names.labels()),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            storage_class_name: s.storage_class_name.clone(),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([(
                    "storage".to_string(),
                    Quantity(s.size.to_string()),
                )])),
                ..VolumeResourceRequirements::default()
            }),
            ..PersistentVolumeClaimSpec::default()
        }),
        ..PersistentVolumeClaim::default()
    }
}

/// `spec.storage.persistentVolumeClaimRetentionPolicy` as the StatefulSet's field, both values
/// always written.
fn retention_policy(p: ClaimRetentionPolicy) -> StatefulSetPersistentVolumeClaimRetentionPolicy {
    StatefulSetPersistentVolumeClaimRetentionPolicy {
        when_deleted: Some(p.when_deleted.as_str().to_string()),
        when_scaled: Some(p.when_scaled.as_str().to_string()),
    }
}
