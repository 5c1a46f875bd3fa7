//! Status writes: server-side apply of a BrokerCluster's status subresource under one field
//! manager per writer (the reconciler's [`crate::names::FIELD_MANAGER`], the autoscaler's
//! [`crate::names::AUTOSCALER_FIELD_MANAGER`]). Each manager sends every field it owns, whole;
//! the API server removes a field only when the last manager that owns it stops sending it, so
//! neither writer deletes the other's fields (kube-rs/controller-rs writes status the same way).

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::crd::{BrokerCluster, BrokerClusterStatus, GROUP};
use crate::error::{Error, Result};

/// An apply body for the status subresource: `apiVersion`, `kind` and `status`.
pub fn status_body(status: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/v1alpha1"),
        "kind": "BrokerCluster",
        "status": status,
    })
}

/// Applies `body` (see [`status_body`]) to the status of `ns/name` as `manager`, forced (the
/// manager's fields are its own; forcing only takes over fields an older operator wrote with
/// a merge patch). Returns the status the API server stored.
pub async fn apply_status(
    client: &Client,
    ns: &str,
    name: &str,
    manager: &str,
    body: &Value,
) -> Result<Option<BrokerClusterStatus>> {
    let api: Api<BrokerCluster> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        name,
        &PatchParams::apply(manager).force(),
        &Patch::Apply(body),
    )
    .await
    .map(|bc| bc.status)
    .map_err(|e| Error::kube("apply status", "BrokerCluster", name, e))
}

/// A JSON merge patch of the status of `ns/name`. Only for the autoscaler to remove its own
/// fields when an older operator's merge patch still co-owns them (see
/// [`crate::autoscale::runner`]).
pub async fn merge_status(client: &Client, ns: &str, name: &str, status: Value) -> Result<()> {
    let api: Api<BrokerCluster> = Api::namespaced(client.clone(), ns);
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .map(|_| ())
    .map_err(|e| Error::kube("patch status", "BrokerCluster", name, e))
}
