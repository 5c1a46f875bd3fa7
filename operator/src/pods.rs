//! Which pods are a BrokerCluster's brokers: the pods its StatefulSet controls ([`owned_by`]).
//! Pure. The autoscaler scrapes them (`crate::autoscale::scrape`) and the status reads their
//! nodes (`crate::status::replication`).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;

/// The cluster's StatefulSet, whose pods alone are the cluster's brokers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner<'a> {
    /// The StatefulSet's name: its pods are `<name>-<ordinal>`.
    pub name: &'a str,
    /// The StatefulSet's UID, as in its pods' controller owner reference.
    pub uid: &'a str,
    /// The StatefulSet's `spec.replicas`: its pods' ordinals are below it.
    pub replicas: u32,
}

/// Whether a pod is one of the StatefulSet's: a controller owner reference of kind
/// `StatefulSet` with its UID, and the name `<statefulset>-<ordinal>` with an ordinal below
/// its replicas. Labels alone prove nothing (any pod may carry the broker labels); a pod name
/// is unique in its namespace, so a stranger's pod cannot take a running broker's name. Pure.
pub fn owned_by(pod: &Pod, owner: &Owner<'_>) -> bool {
    let controlled = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.kind == "StatefulSet" && o.uid == owner.uid);
    let ordinal = pod
        .metadata
        .name
        .as_deref()
        .and_then(|n| n.strip_prefix(owner.name))
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|o| !o.is_empty() && o.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|o| o.parse::<u32>().ok())
        .is_some_and(|o| o < owner.replicas);
    controlled && ordinal
}

impl<'a> Owner<'a> {
    /// The owner as `sts` describes itself: its name, UID and `spec.replicas`; `None` when the
    /// API server left the name or UID out.
    pub fn of(sts: &'a StatefulSet) -> Option<Owner<'a>> {
        Some(Owner {
            name: sts.metadata.name.as_deref()?,
            uid: sts.metadata.uid.as_deref().filter(|u| !u.is_empty())?,
            replicas: sts
                .spec
                .as_ref()
                .and_then(|s| s.replicas)
                .and_then(|r| u32::try_from(r).ok())
                .unwrap_or(0),
        })
    }
}
