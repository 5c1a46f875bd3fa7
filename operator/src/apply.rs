//! Apply: writes rendered children with server-side apply (field manager `starling-operator`,
//! forced, so the operator owns every field it renders) and deletes optional children that are
//! no longer wanted, but only when this BrokerCluster owns them. A child is applied only when
//! the API server does not already hold it as rendered ([`current`]: its applied-hash
//! annotation and its field managers, read from the watch cache of [`crate::live`]), so a
//! reconcile of an unchanged cluster writes nothing. The generated TLS Secret is the
//! exception: it is created once when absent ([`ensure_tls_secret`]) and never rewritten.
//! Status writes, one field manager per writer, are in [`status`]; the cluster CA and peer
//! certificate Secrets in [`pki`]; the users document Secret in [`users`]; the topics document
//! ConfigMap and the BrokerTopics' status in [`topics`].

pub mod current;
pub mod pki;
pub mod status;
pub mod topics;
pub mod users;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use current::{Apply, Decision};

use crate::build::{Children, OptionalKind, Unwanted, tls_secret};
use crate::error::{Error, Result};
use crate::live::{Cached, Live, LiveChildren};
use crate::names::FIELD_MANAGER;
use crate::tls;
use crate::validate::ValidatedCluster;

pub use status::{apply_status, merge_status, status_body};

/// Server-side applies one namespaced object and returns what the API server stored.
pub async fn apply<K>(client: &Client, obj: &K) -> Result<K>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let kind = K::kind(&()).to_string();
    let name = obj
        .meta()
        .name
        .clone()
        .ok_or(Error::MissingObjectField("metadata.name"))?;
    let ns = obj
        .meta()
        .namespace
        .clone()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    let api: Api<K> = Api::namespaced(client.clone(), &ns);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&name, &params, &Patch::Apply(obj))
        .await
        .map_err(|e| Error::kube("apply", &kind, &name, e))
}

/// Deletes `name` if it exists and is controlled by the owner with `owner_uid`. Returns whether
/// something was deleted.
pub async fn delete_if_owned<K>(
    client: &Client,
    ns: &str,
    name: &str,
    owner_uid: &str,
) -> Result<bool>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let kind = K::kind(&()).to_string();
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let Some(existing) = api
        .get_opt(name)
        .await
        .map_err(|e| Error::kube("get", &kind, name, e))?
    else {
        return Ok(false);
    };
    if !is_controlled_by(&existing, owner_uid) {
        return Ok(false);
    }
    delete::<K>(client, ns, name).await
}

/// Deletes `name`; returns false when it was already gone.
async fn delete<K>(client: &Client, ns: &str, name: &str) -> Result<bool>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(Error::kube("delete", K::kind(&()).as_ref(), name, e)),
    }
}

/// Deletes an unwanted `K` if this owner controls it: judged from the watch cache when it
/// covers the namespace, else from a read.
async fn delete_unwanted<K: Cached>(
    client: &Client,
    live: &LiveChildren,
    ns: &str,
    name: &str,
    owner_uid: &str,
) -> Result<bool> {
    match live.get::<K>(ns, name) {
        Live::Unknown => delete_if_owned::<K>(client, ns, name, owner_uid).await,
        Live::Absent => Ok(false),
        Live::Present(meta) if meta_controlled_by(&meta, owner_uid) => {
            delete::<K>(client, ns, name).await
        }
        Live::Present(_) => Ok(false),
    }
}

/// Whether `obj` has a controller owner reference with `owner_uid`.
pub fn is_controlled_by<K: Resource>(obj: &K, owner_uid: &str) -> bool {
    meta_controlled_by(obj.meta(), owner_uid)
}

/// Whether `meta` has a controller owner reference with `owner_uid`.
pub fn meta_controlled_by(meta: &ObjectMeta, owner_uid: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == owner_uid)
}

/// Applies `obj`, stamped with its applied hash, unless `live` shows it already holds that
/// ([`current::decide`]). Returns what the API server stored, or `None` when skipped.
async fn apply_unless_current<K>(client: &Client, live: &Live, obj: &K) -> Result<Option<K>>
where
    K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    let (stamped, hash) = current::stamp(obj)?;
    match current::decide(&hash, live) {
        Decision::Skip => Ok(None),
        Decision::Apply(why) => {
            if let Apply::Drifted(manager) = &why {
                tracing::info!(
                    kind = %K::kind(&()),
                    name = obj.meta().name.as_deref().unwrap_or_default(),
                    %manager,
                    "repairing a child another writer changed"
                );
            }
            apply(client, &stamped).await.map(Some)
        }
    }
}

/// [`apply_unless_current`] of a child kind the watch cache holds.
async fn apply_cached<K: Cached + Serialize>(
    client: &Client,
    live: &LiveChildren,
    obj: &K,
) -> Result<Option<K>> {
    let meta = obj.meta();
    let (Some(ns), Some(name)) = (meta.namespace.as_deref(), meta.name.as_deref()) else {
        return Err(Error::MissingObjectField("metadata.name/namespace"));
    };
    apply_unless_current(client, &live.get::<K>(ns, name), obj).await
}

/// Applies every child that the API server does not hold as rendered (config first,
/// StatefulSet last so it never starts before its config and Services exist) and deletes the
/// unwanted ones. Each is judged by [`current::decide`] from the watch cache `live`; the
/// StatefulSet from `before`, as read at the start of the reconcile. Returns the StatefulSet as
/// applied, or `before` when it was current.
pub async fn apply_children(
    client: &Client,
    live: &LiveChildren,
    before: Option<&StatefulSet>,
    children: &Children,
    unwanted: &[Unwanted],
    owner_uid: &str,
) -> Result<StatefulSet> {
    apply_cached(client, live, &children.config_map).await?;
    apply_cached(client, live, &children.members_config_map).await?;
    apply_cached(client, live, &children.service_account).await?;
    apply_cached(client, live, &children.role).await?;
    apply_cached(client, live, &children.role_binding).await?;
    apply_cached(client, live, &children.headless_service).await?;
    apply_cached(client, live, &children.client_service).await?;
    apply_cached(client, live, &children.network_policy).await?;
    if let Some(pdb) = &children.pdb {
        apply_cached(client, live, pdb).await?;
    }
    let observed = match before {
        Some(sts) => Live::Present(Box::new(sts.metadata.clone())),
        None => Live::Absent,
    };
    let sts = match apply_unless_current(client, &observed, &children.statefulset).await? {
        Some(applied) => applied,
        None => before
            .cloned()
            .ok_or(Error::MissingObjectField("the StatefulSet read before"))?,
    };
    let ns = children
        .statefulset
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    for u in unwanted {
        match u.kind {
            OptionalKind::PodDisruptionBudget => {
                delete_unwanted::<PodDisruptionBudget>(client, live, ns, &u.name, owner_uid)
                    .await?;
            }
        }
    }
    Ok(sts)
}

/// Creates the generated TLS Secret when the cluster uses one and it does not exist yet.
/// An existing Secret is never replaced (a new certificate would have to roll every broker).
/// Returns whether a Secret was created.
pub async fn ensure_tls_secret(client: &Client, v: &ValidatedCluster) -> Result<bool> {
    if !v.tls_generated {
        return Ok(false);
    }
    let name = &v.tls_secret;
    let api: Api<Secret> = Api::namespaced(client.clone(), &v.id.namespace);
    match api.get_metadata(name).await {
        Ok(_) => return Ok(false),
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => return Err(Error::kube("get", "Secret", name, e)),
    }
    let pem = tls::generate(&v.names, &v.id.namespace, &v.cluster_domain)?;
    match api
        .create(&PostParams::default(), &tls_secret::build(v, &pem))
        .await
    {
        Ok(_) => Ok(true),
        // Created in between (another reconcile or replica): keep that one.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(Error::kube("create", "Secret", name, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::render;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn children_are_controlled_by_their_cluster_only() {
        let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
        let children = render(&v);
        assert!(is_controlled_by(&children.statefulset, "0000-uid"));
        assert!(!is_controlled_by(&children.statefulset, "someone-else"));
    }

    #[test]
    fn apply_bodies_carry_api_version_and_kind() {
        let v = cluster(Profile::Balanced, Tier::Medium, |_| {});
        let c = render(&v);
        let bodies = [
            serde_json::to_value(&c.config_map),
            serde_json::to_value(&c.members_config_map),
            serde_json::to_value(&c.role),
            serde_json::to_value(&c.role_binding),
            serde_json::to_value(&c.statefulset),
            serde_json::to_value(&c.client_service),
            serde_json::to_value(&c.service_account),
            serde_json::to_value(c.pdb.as_ref()),
            serde_json::to_value(&c.network_policy),
        ];
        for body in bodies {
            let body = body.unwrap_or_default();
            assert!(
                body.get("apiVersion").is_some() && body.get("kind").is_some(),
                "{body}"
            );
            assert!(
                body.get("status").is_none(),
                "apply bodies never carry status: {body}"
            );
        }
    }
}
