//! Build: every child object as a pure function of a [`ValidatedCluster`].
//!
//! One file per object kind. [`render`] collects them into [`Children`], which also knows which
//! optional objects must be absent (for example the PodDisruptionBudget of a single broker), so
//! the apply step can delete them.

pub mod config_map;
pub mod pdb;
pub mod pod;
pub mod service;
pub mod service_account;
pub mod statefulset;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use sha2::{Digest, Sha256};

use crate::validate::ValidatedCluster;

/// Every object one BrokerCluster owns, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    /// The broker config.
    pub config_map: ConfigMap,
    /// The brokers' identity.
    pub service_account: ServiceAccount,
    /// Stable per-broker DNS.
    pub headless_service: Service,
    /// The address clients use.
    pub client_service: Service,
    /// The brokers.
    pub statefulset: StatefulSet,
    /// Present only with more than one broker.
    pub pdb: Option<PodDisruptionBudget>,
}

/// A kind of optional child that may have to be deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionalKind {
    /// `policy/v1` PodDisruptionBudget.
    PodDisruptionBudget,
}

/// An object that exists from an earlier spec but is no longer wanted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwanted {
    /// Its kind.
    pub kind: OptionalKind,
    /// Its name.
    pub name: String,
}

/// Renders every child of a validated cluster.
pub fn render(v: &ValidatedCluster) -> Children {
    Children {
        config_map: config_map::build(v),
        service_account: service_account::build(v),
        headless_service: service::headless(v),
        client_service: service::client(v),
        statefulset: statefulset::build(v),
        pdb: pdb::build(v),
    }
}

/// Optional children this render does not include and which must be deleted if present.
pub fn unwanted(v: &ValidatedCluster, children: &Children) -> Vec<Unwanted> {
    let mut out = Vec::new();
    if children.pdb.is_none() {
        out.push(Unwanted {
            kind: OptionalKind::PodDisruptionBudget,
            name: v.names.pdb.clone(),
        });
    }
    out
}

/// Metadata of a child: name, namespace, labels and the controller owner reference.
pub fn child_meta(v: &ValidatedCluster, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_string()),
        namespace: Some(v.id.namespace.clone()),
        labels: Some(v.names.labels()),
        owner_references: Some(vec![v.id.owner.clone()]),
        ..ObjectMeta::default()
    }
}

/// The restart hash: SHA-256 over the broker config text and the TLS secret name. The replica
/// count is deliberately not an input, so scaling never restarts brokers.
pub fn config_hash(config_yaml: &str, tls_secret: Option<&str>) -> String {
    let mut h = Sha256::new();
    h.update(b"config\0");
    h.update(config_yaml.as_bytes());
    h.update(b"\0tls\0");
    h.update(tls_secret.unwrap_or("").as_bytes());
    let digest = h.finalize();
    digest.iter().take(16).map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
pub(crate) mod fixtures;
#[cfg(test)]
mod tests;
