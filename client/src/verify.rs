//! Custom server certificate verifiers: accept-anything ([`Trust::Insecure`])
//! and leaf-fingerprint pinning ([`Trust::Fingerprint`]). Both still check
//! the handshake signature, so the server must hold the certificate's key.
//!
//! [`Trust::Insecure`]: crate::Trust::Insecure
//! [`Trust::Fingerprint`]: crate::Trust::Fingerprint

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, Error, SignatureScheme};

use crate::fingerprint::sha256;

/// Verifies handshake signatures but decides on the certificate by fingerprint (or not at all).
#[derive(Debug)]
pub(crate) struct PinnedVerifier {
    /// `None` accepts any certificate.
    expected: Option<[u8; 32]>,
    provider: Arc<CryptoProvider>,
}

impl PinnedVerifier {
    /// Accepts any certificate.
    pub(crate) fn any(provider: Arc<CryptoProvider>) -> Self {
        PinnedVerifier {
            expected: None,
            provider,
        }
    }

    /// Accepts only a leaf whose DER has SHA-256 `expected`.
    pub(crate) fn fingerprint(expected: [u8; 32], provider: Arc<CryptoProvider>) -> Self {
        PinnedVerifier {
            expected: Some(expected),
            provider,
        }
    }
}

impl ServerCertVerifier for PinnedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        match self.expected {
            None => Ok(ServerCertVerified::assertion()),
            Some(expected) if sha256(end_entity.as_ref()) == expected => {
                Ok(ServerCertVerified::assertion())
            }
            Some(_) => Err(Error::General(
                "server certificate does not match the pinned SHA-256 fingerprint".into(),
            )),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: &PinnedVerifier, der: &[u8]) -> bool {
        let name = ServerName::try_from("localhost").map(|n| n.to_owned());
        let Ok(name) = name else { return false };
        v.verify_server_cert(
            &CertificateDer::from(der.to_vec()),
            &[],
            &name,
            &[],
            UnixTime::now(),
        )
        .is_ok()
    }

    #[test]
    fn pinning_compares_the_leaf_digest() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let der = b"not really a certificate";
        assert!(check(
            &PinnedVerifier::fingerprint(sha256(der), provider.clone()),
            der
        ));
        assert!(!check(
            &PinnedVerifier::fingerprint([0; 32], provider.clone()),
            der
        ));
        assert!(check(&PinnedVerifier::any(provider), der));
    }
}
