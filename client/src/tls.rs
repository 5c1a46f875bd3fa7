//! Builds the rustls client configuration (TLS 1.3 only, ring provider) for a
//! [`Trust`] choice, the client's [`Credentials`] (a certificate is presented for client
//! authentication) and an ALPN protocol.

use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::CertificateDer;

use crate::ClientError;
use crate::credentials::{Credentials, certificate_chain, private_key};
use crate::trust::Trust;
use crate::verify::PinnedVerifier;

/// ALPN of publish and subscribe connections (defined by the wire protocol).
pub const ALPN_PUBSUB: &[u8] = starling_proto::alpn::EVENTS;
/// ALPN of cache connections (defined by the wire protocol).
pub const ALPN_CACHE: &[u8] = starling_proto::alpn::CACHE;

/// A rustls client config for `trust`, presenting the certificate of `credentials` (if any),
/// offering only `alpn`.
pub(crate) fn rustls_config(
    trust: &Trust,
    credentials: &Credentials,
    alpn: &[u8],
) -> Result<rustls::ClientConfig, ClientError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| ClientError::Tls(e.to_string()))?;
    let builder = match trust {
        Trust::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier::any(provider))),
        Trust::Fingerprint(fp) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(PinnedVerifier::fingerprint(*fp, provider))),
        Trust::CaFile(path) => {
            let pem = std::fs::read(path).map_err(|e| {
                ClientError::Config(format!("cannot read CA file {}: {e}", path.display()))
            })?;
            builder.with_root_certificates(roots_from_pem(&pem)?)
        }
        Trust::CaPem(pem) => builder.with_root_certificates(roots_from_pem(pem)?),
    };
    let mut config = match credentials {
        Credentials::Certificate { cert_pem, key_pem } => {
            let chain = certificate_chain(cert_pem, "client certificate")?;
            let key = private_key(key_pem, "client private key")?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| ClientError::Tls(format!("client certificate: {e}")))?
        }
        Credentials::None | Credentials::Token(_) => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(config)
}

/// A quinn crypto config wrapping [`rustls_config`].
pub(crate) fn quic_crypto(
    trust: &Trust,
    credentials: &Credentials,
    alpn: &[u8],
) -> Result<Arc<quinn::crypto::rustls::QuicClientConfig>, ClientError> {
    let tls = rustls_config(trust, credentials, alpn)?;
    quinn::crypto::rustls::QuicClientConfig::try_from(tls)
        .map(Arc::new)
        .map_err(|e| ClientError::Tls(e.to_string()))
}

/// Every certificate of a PEM bundle as a trust anchor.
fn roots_from_pem(pem: &[u8]) -> Result<RootCertStore, ClientError> {
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| ClientError::Config(format!("bad CA PEM: {e}")))?;
    if certs.is_empty() {
        return Err(ClientError::Config(
            "CA PEM contains no CERTIFICATE block".into(),
        ));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots
            .add(cert)
            .map_err(|e| ClientError::Config(format!("bad CA certificate: {e}")))?;
    }
    Ok(roots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: Credentials = Credentials::None;

    #[test]
    fn every_trust_mode_builds_with_alpn() {
        let fp = rustls_config(&Trust::Fingerprint([1; 32]), &NONE, ALPN_CACHE);
        assert_eq!(
            fp.map(|c| c.alpn_protocols).ok(),
            Some(vec![ALPN_CACHE.to_vec()])
        );
        assert!(rustls_config(&Trust::Insecure, &NONE, ALPN_PUBSUB).is_ok());
        assert!(quic_crypto(&Trust::Insecure, &NONE, ALPN_PUBSUB).is_ok());
    }

    #[test]
    fn ca_pem_with_a_certificate_builds() {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]);
        let pem = cert.map(|c| c.cert.pem().into_bytes()).unwrap_or_default();
        assert!(rustls_config(&Trust::CaPem(pem), &NONE, ALPN_PUBSUB).is_ok());
    }

    #[test]
    fn bad_ca_inputs_are_config_errors() {
        let empty = rustls_config(&Trust::CaPem(b"no pem here".to_vec()), &NONE, ALPN_PUBSUB);
        assert!(matches!(empty, Err(ClientError::Config(_))));
        let missing = rustls_config(
            &Trust::CaFile("/nonexistent/ca.pem".into()),
            &NONE,
            ALPN_PUBSUB,
        );
        assert!(
            matches!(missing, Err(ClientError::Config(m)) if m.contains("/nonexistent/ca.pem"))
        );
    }

    #[test]
    fn a_client_certificate_is_offered_for_client_auth() {
        let c = rcgen::generate_simple_self_signed(vec!["alice".into()]).unwrap();
        let creds = Credentials::Certificate {
            cert_pem: c.cert.pem().into_bytes(),
            key_pem: c.signing_key.serialize_pem().into_bytes(),
        };
        let cfg = rustls_config(&Trust::Insecure, &creds, ALPN_PUBSUB).unwrap();
        assert!(cfg.client_auth_cert_resolver.has_certs());
        let plain = rustls_config(&Trust::Insecure, &Credentials::token("t"), ALPN_PUBSUB);
        assert!(!plain.unwrap().client_auth_cert_resolver.has_certs());
        // A key that does not match the certificate is refused while configuring.
        let other = rcgen::generate_simple_self_signed(vec!["bob".into()]).unwrap();
        let mismatched = Credentials::Certificate {
            cert_pem: c.cert.pem().into_bytes(),
            key_pem: other.signing_key.serialize_pem().into_bytes(),
        };
        let err = rustls_config(&Trust::Insecure, &mismatched, ALPN_PUBSUB).map(|_| ());
        assert!(matches!(err, Err(ClientError::Tls(_))), "{err:?}");
    }
}
