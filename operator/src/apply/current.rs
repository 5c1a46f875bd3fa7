//! Whether a child must be applied, or the API server already holds what was rendered. Pure.
//!
//! Every applied child carries the annotation `starling.dev/applied-hash`: a SHA-256 of the
//! rendered object without that annotation ([`stamp`]). A reconcile applies a child only when
//! [`decide`] says so, from what the watch cache ([`crate::live`]) or a read it makes anyway
//! (the StatefulSet) holds of the live object:
//!
//! - absent, or not known (no watch covers its namespace): apply;
//! - its hash differs from the rendered one (the spec, the operator or the render changed):
//!   apply;
//! - **drift**: another writer manages fields of the object itself (not its `status`), e.g.
//!   `kubectl edit`, `kubectl scale` or a `kubectl apply` with its own field manager: apply.
//!   Every write to a field records its writer in `metadata.managedFields`, and the operator's
//!   forced apply takes back every field it renders, so an edit of a rendered field is repaired
//!   and its writer's entry disappears once it owns no field any more. A writer that added
//!   fields the operator does not render (an extra label, say) keeps its entry: that child is
//!   applied on every reconcile, which changes nothing on the server;
//! - otherwise: skip. A deleted child leaves the cache, so it is recreated; any change to a
//!   child triggers a reconcile of its owner through the same watch.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::live::{Live, is_foreign};
use crate::names::APPLIED_HASH_ANNOTATION;

/// Why a child is applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apply {
    /// Nothing is known about the live object (no watch covers its namespace).
    Unknown,
    /// It does not exist (or the cache has not seen it yet).
    Absent,
    /// Its applied hash is not the rendered one (or it has none).
    Changed,
    /// Another writer manages some of its fields: the named field manager.
    Drifted(String),
}

/// What to do with one rendered child.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Apply it, for this reason.
    Apply(Apply),
    /// The live object already holds it.
    Skip,
}

/// The applied hash of a rendered object: SHA-256 (first 16 bytes, hex) of its JSON without
/// the [`APPLIED_HASH_ANNOTATION`].
pub fn applied_hash<K: Resource + Serialize + Clone>(obj: &K) -> Result<String> {
    let mut bare = obj.clone();
    if let Some(a) = bare.meta_mut().annotations.as_mut() {
        a.remove(APPLIED_HASH_ANNOTATION);
        if a.is_empty() {
            bare.meta_mut().annotations = None;
        }
    }
    let json = serde_json::to_vec(&bare).map_err(|source| Error::Serialize {
        what: "a child object",
        source,
    })?;
    let digest = Sha256::digest(&json);
    Ok(digest.iter().take(16).map(|b| format!("{b:02x}")).collect())
}

/// The object with its [`APPLIED_HASH_ANNOTATION`] set, and that hash.
pub fn stamp<K: Resource + Serialize + Clone>(obj: &K) -> Result<(K, String)> {
    let hash = applied_hash(obj)?;
    let mut out = obj.clone();
    out.meta_mut()
        .annotations
        .get_or_insert_with(Default::default)
        .insert(APPLIED_HASH_ANNOTATION.to_string(), hash.clone());
    Ok((out, hash))
}

/// The first other writer of the object itself, if any ([`is_foreign`]).
pub fn foreign_manager(meta: &ObjectMeta) -> Option<String> {
    meta.managed_fields
        .iter()
        .flatten()
        .find(|e| is_foreign(e))
        .map(|e| e.manager.clone().unwrap_or_default())
}

/// Whether to apply a child rendered with `hash`, given what is known of the live one.
pub fn decide(hash: &str, live: &Live) -> Decision {
    let meta = match live {
        Live::Unknown => return Decision::Apply(Apply::Unknown),
        Live::Absent => return Decision::Apply(Apply::Absent),
        Live::Present(meta) => meta,
    };
    let live_hash = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(APPLIED_HASH_ANNOTATION));
    if live_hash.map(String::as_str) != Some(hash) {
        return Decision::Apply(Apply::Changed);
    }
    match foreign_manager(meta) {
        Some(manager) => Decision::Apply(Apply::Drifted(manager)),
        None => Decision::Skip,
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;

    use super::*;
    use crate::build::render;
    use crate::live::slim;
    use crate::names::FIELD_MANAGER;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    fn entry(manager: &str, subresource: Option<&str>) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Update".into()),
            subresource: subresource.map(Into::into),
            ..ManagedFieldsEntry::default()
        }
    }

    /// The live metadata of `obj` as applied by the operator, with `others` as further
    /// managed-fields entries.
    fn applied(obj: &ConfigMap, others: Vec<ManagedFieldsEntry>) -> Live {
        let (stamped, _) = stamp(obj).unwrap_or_else(|e| panic!("{e}"));
        let mut meta = stamped.metadata;
        let mut fields = vec![ManagedFieldsEntry {
            manager: Some(FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            ..ManagedFieldsEntry::default()
        }];
        fields.extend(others);
        meta.managed_fields = Some(fields);
        meta.resource_version = Some("42".into());
        slim(&mut meta);
        Live::Present(Box::new(meta))
    }

    fn config_map() -> ConfigMap {
        render(&cluster(Profile::Balanced, Tier::Medium, |_| {})).config_map
    }

    #[test]
    fn the_hash_follows_the_content_and_ignores_its_own_annotation() {
        let cm = config_map();
        let (stamped, hash) = stamp(&cm).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            stamped
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(APPLIED_HASH_ANNOTATION)),
            Some(&hash)
        );
        assert_eq!(
            applied_hash(&stamped).ok(),
            Some(hash.clone()),
            "stable once stamped"
        );
        let mut other = cm.clone();
        other
            .data
            .get_or_insert_with(Default::default)
            .insert("broker.yaml".into(), "changed: true\n".into());
        assert_ne!(applied_hash(&other).ok(), Some(hash));
    }

    #[test]
    fn an_unchanged_child_is_skipped() {
        let cm = config_map();
        let (_, hash) = stamp(&cm).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decide(&hash, &applied(&cm, vec![])), Decision::Skip);
        // The controllers' status writes are not drift.
        let status = applied(&cm, vec![entry("kube-controller-manager", Some("status"))]);
        assert_eq!(decide(&hash, &status), Decision::Skip);
    }

    #[test]
    fn a_missing_unknown_or_changed_child_is_applied() {
        let cm = config_map();
        let (_, hash) = stamp(&cm).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(decide(&hash, &Live::Absent), Decision::Apply(Apply::Absent));
        assert_eq!(
            decide(&hash, &Live::Unknown),
            Decision::Apply(Apply::Unknown)
        );
        let mut changed = cm.clone();
        changed.metadata.labels = None;
        assert_eq!(
            decide(&hash, &applied(&changed, vec![])),
            Decision::Apply(Apply::Changed),
            "a child applied from another render"
        );
        let unannotated = Live::Present(Box::new(cm.metadata.clone()));
        assert_eq!(
            decide(&hash, &unannotated),
            Decision::Apply(Apply::Changed),
            "a child applied before the annotation existed"
        );
    }

    #[test]
    fn a_child_someone_else_edited_is_applied_again() {
        let cm = config_map();
        let (_, hash) = stamp(&cm).unwrap_or_else(|e| panic!("{e}"));
        for (manager, sub) in [
            ("kubectl-edit", None),
            ("kubectl", Some("scale")),
            ("someone-elses-apply", None),
        ] {
            assert_eq!(
                decide(&hash, &applied(&cm, vec![entry(manager, sub)])),
                Decision::Apply(Apply::Drifted(manager.into())),
                "{manager}"
            );
        }
    }

    #[test]
    fn slimming_keeps_what_the_decision_and_the_owner_trigger_read() {
        let cm = config_map();
        let (stamped, hash) = stamp(&cm).unwrap_or_else(|e| panic!("{e}"));
        let mut meta = stamped.metadata.clone();
        meta.annotations
            .get_or_insert_with(Default::default)
            .insert("other".into(), "x".into());
        meta.managed_fields = Some(vec![
            entry(FIELD_MANAGER, None),
            entry("kube-controller-manager", Some("status")),
            entry("kubectl-edit", None),
        ]);
        slim(&mut meta);
        assert_eq!(meta.name, cm.metadata.name);
        assert_eq!(meta.namespace, cm.metadata.namespace);
        assert_eq!(meta.owner_references, cm.metadata.owner_references);
        assert_eq!(meta.labels, None);
        assert_eq!(
            meta.annotations,
            Some([(APPLIED_HASH_ANNOTATION.to_string(), hash)].into())
        );
        let managers: Vec<_> = meta
            .managed_fields
            .iter()
            .flatten()
            .map(|e| (e.manager.clone(), e.fields_v1.is_none()))
            .collect();
        assert_eq!(managers, vec![(Some("kubectl-edit".to_string()), true)]);
    }
}
