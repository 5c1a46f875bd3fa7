//! Apply: writes rendered children with server-side apply (field manager `starling-operator`,
//! forced, so the operator owns every field it renders) and deletes optional children that are
//! no longer wanted, but only when this BrokerCluster owns them. The generated TLS Secret is the
//! exception: it is created once when absent ([`ensure_tls_secret`]) and never rewritten.
//! Status writes, one field manager per writer, are in [`status`]; the cluster CA and peer
//! certificate Secrets in [`pki`]; the users document Secret in [`users`].

pub mod pki;
pub mod status;
pub mod users;

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::build::{Children, OptionalKind, Unwanted, tls_secret};
use crate::error::{Error, Result};
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
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(false),
        Err(e) => Err(Error::kube("delete", &kind, name, e)),
    }
}

/// Whether `obj` has a controller owner reference with `owner_uid`.
pub fn is_controlled_by<K: Resource>(obj: &K, owner_uid: &str) -> bool {
    obj.owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid == owner_uid)
}

/// Applies every child (config first, StatefulSet last so it never starts before its config
/// and Services exist) and deletes the unwanted ones. Returns the applied StatefulSet.
pub async fn apply_children(
    client: &Client,
    children: &Children,
    unwanted: &[Unwanted],
    owner_uid: &str,
) -> Result<StatefulSet> {
    apply(client, &children.config_map).await?;
    apply(client, &children.members_config_map).await?;
    apply(client, &children.service_account).await?;
    apply(client, &children.role).await?;
    apply(client, &children.role_binding).await?;
    apply(client, &children.headless_service).await?;
    apply(client, &children.client_service).await?;
    apply(client, &children.network_policy).await?;
    if let Some(pdb) = &children.pdb {
        apply(client, pdb).await?;
    }
    let sts = apply(client, &children.statefulset).await?;
    let ns = children
        .statefulset
        .metadata
        .namespace
        .as_deref()
        .ok_or(Error::MissingObjectField("metadata.namespace"))?;
    for u in unwanted {
        match u.kind {
            OptionalKind::PodDisruptionBudget => {
                delete_if_owned::<PodDisruptionBudget>(client, ns, &u.name, owner_uid).await?;
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
