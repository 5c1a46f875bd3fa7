//! Which Secret holds a cluster's CA, and whether the operator may use the one it finds there.
//! Pure.
//!
//! The CA signs every peer and user certificate, so whoever supplies it can mint the
//! `starling:peer` identity. The operator therefore uses only:
//! - a Secret named in `spec.ca.secretName` (an admin's deliberate choice), used as it is and
//!   never written; or
//! - its own `<cluster>-ca`, recognised by both a controller owner reference to this
//!   BrokerCluster (its UID) and the label [`CA_LABEL`] with the cluster's name, which the
//!   operator sets when it creates the Secret.
//!
//! A `<cluster>-ca` without both marks is refused, never used nor overwritten. A Secret planted
//! before the BrokerCluster exists cannot carry the owner reference, because the cluster's UID
//! is assigned when it is created; one planted later needs write access to the namespace's
//! Secrets, which already reaches the real CA key.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::crd::BrokerClusterSpec;
use crate::names::Names;

/// The label the operator sets on the CA Secret it creates; its value is the cluster's name.
pub const CA_LABEL: &str = "starling.dev/cluster-ca";

/// The CA Secret's name and whether the spec named it (`spec.ca.secretName`), else the
/// operator's own `<cluster>-ca`.
pub fn ca_secret_name(spec: &BrokerClusterSpec, names: &Names) -> (String, bool) {
    match &spec.ca {
        Some(ca) => (ca.secret_name.clone(), true),
        None => (names.ca_secret.clone(), false),
    }
}

/// Why a CA Secret the operator found is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Untrusted {
    /// No controller owner reference to this BrokerCluster.
    NotOwned,
    /// Owned, but without `CA_LABEL: <cluster>`.
    NotLabelled,
}

impl Untrusted {
    /// The refusal, for the `Degraded` condition and the event.
    pub fn message(&self, secret: &str, cluster: &str) -> String {
        let (what, hint) = match self {
            Untrusted::NotOwned => (
                "has no controller owner reference to this BrokerCluster",
                "",
            ),
            Untrusted::NotLabelled => (
                "has this BrokerCluster's owner reference but not its CA label",
                " (a CA created by an operator older than the label: add the label after checking it is yours)",
            ),
        };
        format!(
            "Secret {secret} {what} (the operator's CA carries both its owner reference and the label {CA_LABEL}={cluster}); \
             it is refused as not created by the operator, never used. Delete it to have a new CA created, \
             or name it in spec.ca.secretName to use it deliberately{hint}"
        )
    }
}

/// Whether the operator may use the CA in a Secret with this metadata.
///
/// `explicit`: the Secret was named in `spec.ca.secretName`, so it is trusted whoever created
/// it. Otherwise it must be the operator's own: a controller owner reference with
/// `cluster_uid` and `CA_LABEL: cluster`.
pub fn check(
    meta: &ObjectMeta,
    cluster: &str,
    cluster_uid: &str,
    explicit: bool,
) -> Result<(), Untrusted> {
    if explicit {
        return Ok(());
    }
    let owned = meta
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == cluster_uid);
    if !owned {
        return Err(Untrusted::NotOwned);
    }
    let labelled = meta
        .labels
        .as_ref()
        .and_then(|l| l.get(CA_LABEL))
        .is_some_and(|v| v == cluster);
    if labelled {
        Ok(())
    } else {
        Err(Untrusted::NotLabelled)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;
    use crate::crd::CaSpec;

    fn meta(owner: Option<(&str, bool)>, label: Option<&str>) -> ObjectMeta {
        ObjectMeta {
            owner_references: owner.map(|(uid, controller)| {
                vec![OwnerReference {
                    uid: uid.to_string(),
                    controller: Some(controller),
                    ..OwnerReference::default()
                }]
            }),
            labels: label.map(|v| BTreeMap::from([(CA_LABEL.to_string(), v.to_string())])),
            ..ObjectMeta::default()
        }
    }

    #[test]
    fn only_the_operators_own_ca_or_a_named_one_is_trusted() {
        let ours = meta(Some(("uid-1", true)), Some("events"));
        assert_eq!(check(&ours, "events", "uid-1", false), Ok(()));
        // Planted: no owner reference, or the label alone, or another cluster's.
        assert_eq!(
            check(&meta(None, Some("events")), "events", "uid-1", false),
            Err(Untrusted::NotOwned)
        );
        assert_eq!(
            check(
                &meta(Some(("uid-2", true)), Some("events")),
                "events",
                "uid-1",
                false
            ),
            Err(Untrusted::NotOwned)
        );
        assert_eq!(
            check(
                &meta(Some(("uid-1", false)), Some("events")),
                "events",
                "uid-1",
                false
            ),
            Err(Untrusted::NotOwned),
            "a non-controller owner reference is not enough"
        );
        assert_eq!(
            check(&meta(Some(("uid-1", true)), None), "events", "uid-1", false),
            Err(Untrusted::NotLabelled)
        );
        assert_eq!(
            check(
                &meta(Some(("uid-1", true)), Some("other")),
                "events",
                "uid-1",
                false
            ),
            Err(Untrusted::NotLabelled)
        );
        // Named in the spec: trusted as it is.
        assert_eq!(check(&meta(None, None), "events", "uid-1", true), Ok(()));
        let m = Untrusted::NotOwned.message("events-ca", "events");
        assert!(m.contains("events-ca") && m.contains("refused") && m.contains(CA_LABEL));
    }

    #[test]
    fn the_ca_secret_is_the_named_one_or_the_operators() {
        let names = Names::new("events");
        let spec = BrokerClusterSpec::default();
        assert_eq!(
            ca_secret_name(&spec, &names),
            ("events-ca".to_string(), false)
        );
        let spec = BrokerClusterSpec {
            ca: Some(CaSpec {
                secret_name: "corp-ca".into(),
            }),
            ..BrokerClusterSpec::default()
        };
        assert_eq!(ca_secret_name(&spec, &names), ("corp-ca".to_string(), true));
    }
}
