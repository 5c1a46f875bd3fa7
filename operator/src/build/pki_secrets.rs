//! The cluster's PKI Secrets: `<cluster>-ca` (`ca.crt`, `ca.key`: the cluster CA) and
//! `<cluster>-peer` (`tls.crt`, `tls.key`, `ca.crt`: the brokers' peer certificate, common name
//! `starling:peer`, and the CA that verifies peers and users), both owned by the cluster.
//!
//! The CA Secret also carries the label `starling.dev/cluster-ca` ([`CA_LABEL`]), which
//! [`crate::ca_trust`] checks with the owner reference before the CA is used.
//!
//! The CA Secret is created once and kept while its CA is usable; the peer Secret is
//! rewritten only when its certificate must be renewed (see [`crate::pki`] and
//! [`crate::apply::pki`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::child_meta;
use crate::ca_trust::CA_LABEL;
use crate::tls::CertificatePem;
use crate::validate::ValidatedCluster;

/// Key of the CA certificate (in the CA, peer and user Secrets).
pub const CA_CERT: &str = "ca.crt";
/// Key of the CA private key (CA Secret only).
pub const CA_KEY: &str = "ca.key";
/// Key of a leaf certificate.
pub const TLS_CERT: &str = "tls.crt";
/// Key of a leaf private key.
pub const TLS_KEY: &str = "tls.key";

fn bytes(text: &str) -> ByteString {
    ByteString(text.as_bytes().to_vec())
}

/// The CA Secret (type `Opaque`).
/// Named [`ValidatedCluster::ca_secret`], with the label [`CA_LABEL`] (value: the cluster's
/// name) beside its owner reference: the two marks [`crate::ca_trust::check`] requires.
pub fn ca_secret(v: &ValidatedCluster, ca: &CertificatePem) -> Secret {
    let mut metadata = child_meta(v, &v.ca_secret);
    metadata
        .labels
        .get_or_insert_with(BTreeMap::new)
        .insert(CA_LABEL.to_string(), v.id.name.clone());
    Secret {
        metadata,
        type_: Some("Opaque".to_string()),
        data: Some(BTreeMap::from([
            (CA_CERT.to_string(), bytes(&ca.cert)),
            (CA_KEY.to_string(), bytes(&ca.key)),
        ])),
        ..Secret::default()
    }
}

/// The peer Secret (type `kubernetes.io/tls`, plus `ca.crt`).
pub fn peer_secret(v: &ValidatedCluster, peer: &CertificatePem, ca_cert: &str) -> Secret {
    Secret {
        metadata: child_meta(v, &v.names.peer_secret),
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(BTreeMap::from([
            (TLS_CERT.to_string(), bytes(&peer.cert)),
            (TLS_KEY.to_string(), bytes(&peer.key)),
            (CA_CERT.to_string(), bytes(ca_cert)),
        ])),
        ..Secret::default()
    }
}

/// The text of one key of a Secret, if present and UTF-8.
pub fn key_text<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .data
        .as_ref()?
        .get(key)
        .and_then(|b| std::str::from_utf8(&b.0).ok())
}

/// The CA held by a CA Secret, when both keys are present.
pub fn read_ca(secret: &Secret) -> Option<CertificatePem> {
    Some(CertificatePem {
        cert: key_text(secret, CA_CERT)?.to_string(),
        key: key_text(secret, CA_KEY)?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pki;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn the_ca_and_peer_secrets_are_owned_and_laid_out_for_the_brokers() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let ca = pki::generate_ca("events", "messaging", 1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        let s = ca_secret(&v, &ca);
        assert_eq!(s.metadata.name.as_deref(), Some("events-ca"));
        let mut labels = v.names.labels();
        labels.insert(CA_LABEL.to_string(), "events".to_string());
        assert_eq!(s.metadata.labels, Some(labels));
        assert_eq!(
            crate::ca_trust::check(&s.metadata, "events", "0000-uid", false),
            Ok(()),
            "the operator trusts the CA Secret it creates"
        );
        assert_eq!(
            s.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].uid.as_str()),
            Some("0000-uid")
        );
        assert_eq!(read_ca(&s), Some(ca.clone()));

        let peer = pki::issue_peer(&ca, "urn:starling:peer:messaging/events", 1_800_000_000)
            .unwrap_or_else(|e| panic!("{e}"));
        let p = peer_secret(&v, &peer, &ca.cert);
        assert_eq!(p.metadata.name.as_deref(), Some("events-peer"));
        assert_eq!(p.type_.as_deref(), Some("kubernetes.io/tls"));
        let keys: Vec<&str> = p
            .data
            .as_ref()
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(keys, vec!["ca.crt", "tls.crt", "tls.key"]);
        assert_eq!(key_text(&p, CA_CERT), Some(ca.cert.as_str()));
        assert_eq!(
            pki::leaf_needs_renewal(
                key_text(&p, TLS_CERT),
                &ca.cert,
                starling_access::PEER_IDENTITY,
                1_800_000_000
            ),
            None
        );
        assert_eq!(read_ca(&p), None, "a peer Secret holds no CA key");
    }
}
