//! The generated TLS Secret (`<cluster>-tls`): the certificate of [`crate::tls::generate`] as a
//! `kubernetes.io/tls` Secret owned by the cluster. Created once when absent, never applied
//! (see [`crate::apply::ensure_tls_secret`]).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;

use super::child_meta;
use crate::tls::CertificatePem;
use crate::validate::ValidatedCluster;

/// The generated Secret (`kubernetes.io/tls`, keys `tls.crt` and `tls.key`), owned by the
/// cluster and labelled like its other children.
pub fn build(v: &ValidatedCluster, pem: &CertificatePem) -> Secret {
    Secret {
        metadata: child_meta(v, &v.names.generated_tls_secret),
        type_: Some("kubernetes.io/tls".to_string()),
        data: Some(BTreeMap::from([
            (
                "tls.crt".to_string(),
                ByteString(pem.cert.as_bytes().to_vec()),
            ),
            (
                "tls.key".to_string(),
                ByteString(pem.key.as_bytes().to_vec()),
            ),
        ])),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::fixtures::cluster;
    use starling_config::{Profile, Tier};

    #[test]
    fn the_secret_is_a_tls_secret_owned_by_the_cluster() {
        let v = cluster(Profile::Balanced, Tier::Small, |_| {});
        let pem = CertificatePem {
            cert: "CERT".into(),
            key: "KEY".into(),
        };
        let s = build(&v, &pem);
        assert_eq!(s.metadata.name.as_deref(), Some("events-tls"));
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/tls"));
        assert_eq!(s.metadata.labels, Some(v.names.labels()));
        assert_eq!(
            s.metadata
                .owner_references
                .as_ref()
                .map(|o| o[0].uid.as_str()),
            Some("0000-uid")
        );
        let data = s.data.unwrap_or_default();
        assert_eq!(
            data.get("tls.crt").map(|b| b.0.as_slice()),
            Some(&b"CERT"[..])
        );
        assert_eq!(
            data.get("tls.key").map(|b| b.0.as_slice()),
            Some(&b"KEY"[..])
        );
    }
}
