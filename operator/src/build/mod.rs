//! Build: every child object as a pure function of a [`ValidatedCluster`].
//!
//! One file per object kind. [`render_sized`] collects them into [`Children`], which also knows
//! which optional objects must be absent (for example the PodDisruptionBudget of a single
//! broker), so the apply step can delete them. The StatefulSet size and the member count are
//! inputs ([`Sizes`]), planned by [`crate::members::plan_members`], and so is the roll's
//! partition, decided by [`crate::roll::decide`]; [`render`] is the steady state where both
//! sizes equal the desired replicas and no roll is held. The config hash is computed with the config
//! text, by validation ([`crate::validate::config_hash()`]).
//!
//! The generated TLS Secret ([`tls_secret`]) and the PKI Secrets ([`pki_secrets`]) are
//! rendered here too, but they are written only when absent or due for renewal, not applied on
//! every reconcile (see [`crate::apply::ensure_tls_secret`] and [`crate::apply::pki`]).

pub mod config_map;
pub mod credentials;
pub mod members;
pub mod network_policy;
pub mod pdb;
pub mod pki_secrets;
pub mod pod;
pub mod rbac;
pub mod service;
pub mod service_account;
pub mod statefulset;
pub mod tls_secret;
pub mod topics_config_map;
pub mod users_secret;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::validate::ValidatedCluster;

/// Every object one BrokerCluster owns, rendered.
#[derive(Debug, Clone, PartialEq)]
pub struct Children {
    /// The broker config.
    pub config_map: ConfigMap,
    /// The member list the brokers poll.
    pub members_config_map: ConfigMap,
    /// The brokers' identity.
    pub service_account: ServiceAccount,
    /// What the brokers may read: their member list.
    pub role: Role,
    /// Binds [`Children::role`] to [`Children::service_account`].
    pub role_binding: RoleBinding,
    /// Stable per-broker DNS.
    pub headless_service: Service,
    /// The address clients use.
    pub client_service: Service,
    /// The brokers.
    pub statefulset: StatefulSet,
    /// Present only with more than one broker.
    pub pdb: Option<PodDisruptionBudget>,
    /// Who may reach the brokers.
    pub network_policy: NetworkPolicy,
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

/// The StatefulSet size and member count to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// `spec.replicas` of the StatefulSet.
    pub statefulset_replicas: i32,
    /// Brokers listed in the members ConfigMap.
    pub members: i32,
    /// The `RollingUpdate` partition the operator holds a replicated cluster's roll at
    /// ([`crate::roll`]); `None`: no partition, the StatefulSet controller rolls by itself.
    pub partition: Option<i32>,
}

impl Sizes {
    /// Both at the cluster's desired replicas: no membership change in flight, and no roll
    /// held (partition 0 when the topics are replicated, none otherwise).
    pub fn steady(v: &ValidatedCluster) -> Self {
        Sizes {
            statefulset_replicas: v.replicas,
            members: v.replicas,
            partition: v.replication().map(|_| 0),
        }
    }
}

/// Renders every child of a validated cluster in the steady state ([`Sizes::steady`]).
pub fn render(v: &ValidatedCluster) -> Children {
    render_sized(v, Sizes::steady(v))
}

/// Renders every child of a validated cluster at the given sizes.
pub fn render_sized(v: &ValidatedCluster, sizes: Sizes) -> Children {
    Children {
        config_map: config_map::build(v),
        members_config_map: members::build(v, sizes.members),
        service_account: service_account::build(v),
        role: rbac::role(v),
        role_binding: rbac::role_binding(v),
        headless_service: service::headless(v),
        client_service: service::client(v),
        statefulset: statefulset::build(v, sizes.statefulset_replicas, sizes.partition),
        pdb: pdb::build(v, sizes.statefulset_replicas),
        network_policy: network_policy::build(v, v.operator_namespace.as_deref()),
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

#[cfg(test)]
mod tests;
