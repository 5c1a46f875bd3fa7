//! TLS material for the QUIC listener: PEM files from the config (a mounted Kubernetes Secret),
//! or a self-signed certificate generated at start whose SHA-256 fingerprint is logged; and the
//! client CA (`auth_client_ca_file`) client certificates are verified against.
//!
//! With a client CA, the listener verifies client certificates with rustls's
//! `WebPkiClientVerifier` built from that CA, and allows clients without one (token users send
//! no certificate; the Starling handshake then decides, see `auth::decide`). A certificate from
//! another CA fails the TLS handshake. Without a client CA no client certificate is asked for.

use std::path::Path;
use std::sync::Arc;

use rustls::RootCertStore;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use sha2::{Digest, Sha256};
use starling_proto::alpn;

use crate::error::{BrokerError, TlsError};

/// A certificate chain and its key.
pub struct TlsMaterial {
    /// Leaf first.
    pub chain: Vec<CertificateDer<'static>>,
    /// The leaf's private key.
    pub key: PrivateKeyDer<'static>,
    /// Whether the broker generated it.
    pub self_signed: bool,
}

impl Clone for TlsMaterial {
    fn clone(&self) -> Self {
        TlsMaterial {
            chain: self.chain.clone(),
            key: self.key.clone_key(),
            self_signed: self.self_signed,
        }
    }
}

impl TlsMaterial {
    /// Loads PEM files.
    pub fn from_files(cert: &Path, key: &Path) -> Result<Self, BrokerError> {
        let cert_pem = std::fs::read(cert).map_err(file_err(cert))?;
        let key_pem = std::fs::read(key).map_err(file_err(key))?;
        Self::from_pem(cert, &cert_pem, key, &key_pem)
    }

    /// Parses PEM text read from `cert` and `key` (the paths name the files in errors).
    pub fn from_pem(
        cert: &Path,
        cert_pem: &[u8],
        key: &Path,
        key_pem: &[u8],
    ) -> Result<Self, BrokerError> {
        let chain = rustls_pemfile::certs(&mut &cert_pem[..])
            .collect::<Result<Vec<_>, _>>()
            .map_err(file_err(cert))?;
        if chain.is_empty() {
            return Err(TlsError::NoCertificate(cert.to_path_buf()).into());
        }
        let key = rustls_pemfile::private_key(&mut &key_pem[..])
            .map_err(file_err(key))?
            .ok_or_else(|| TlsError::NoKey(key.to_path_buf()))?;
        Ok(TlsMaterial {
            chain,
            key,
            self_signed: false,
        })
    }

    /// Generates a self-signed certificate for `names` (DNS names or IP addresses).
    pub fn self_signed(names: Vec<String>) -> Result<Self, BrokerError> {
        let ck = rcgen::generate_simple_self_signed(names).map_err(TlsError::from)?;
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.signing_key.serialize_der()));
        Ok(TlsMaterial {
            chain: vec![ck.cert.der().clone()],
            key,
            self_signed: true,
        })
    }

    /// SHA-256 of the leaf certificate, as colon-separated hex.
    pub fn fingerprint(&self) -> String {
        self.chain
            .first()
            .map(|c| fingerprint(c.as_ref()))
            .unwrap_or_default()
    }

    /// A TLS 1.3-only rustls server config offering both Starling ALPNs; with `client_ca`,
    /// client certificates are verified against it (and clients without one are let through to
    /// the Starling handshake).
    pub fn server_config(
        &self,
        client_ca: Option<&ClientCa>,
    ) -> Result<rustls::ServerConfig, BrokerError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(TlsError::from)?;
        let builder = match client_ca {
            None => builder.with_no_client_auth(),
            Some(ca) => {
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::clone(&ca.roots), provider)
                        .allow_unauthenticated()
                        .build()
                        .map_err(TlsError::from)?;
                builder.with_client_cert_verifier(verifier)
            }
        };
        let mut cfg = builder
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(TlsError::from)?;
        cfg.alpn_protocols = vec![alpn::EVENTS.to_vec(), alpn::CACHE.to_vec()];
        cfg.max_early_data_size = 0;
        Ok(cfg)
    }
}

/// The CA client certificates are verified against.
#[derive(Clone)]
pub struct ClientCa {
    roots: Arc<RootCertStore>,
}

impl ClientCa {
    /// Loads the PEM bundle at `path` (one or more CA certificates).
    pub fn from_file(path: &Path) -> Result<ClientCa, BrokerError> {
        let pem = std::fs::read(path).map_err(file_err(path))?;
        Self::from_pem(path, &pem)
    }

    /// Parses a PEM bundle read from `path`.
    pub fn from_pem(path: &Path, pem: &[u8]) -> Result<ClientCa, BrokerError> {
        let certs = rustls_pemfile::certs(&mut &pem[..])
            .collect::<Result<Vec<_>, _>>()
            .map_err(file_err(path))?;
        let mut roots = RootCertStore::empty();
        let (added, _ignored) = roots.add_parsable_certificates(certs);
        if added == 0 {
            return Err(TlsError::NoCertificate(path.to_path_buf()).into());
        }
        Ok(ClientCa {
            roots: Arc::new(roots),
        })
    }
}

fn file_err(path: &Path) -> impl FnOnce(std::io::Error) -> TlsError {
    let path = path.to_path_buf();
    move |source| TlsError::File { path, source }
}

/// SHA-256 of DER bytes as colon-separated upper-case hex.
pub fn fingerprint(der: &[u8]) -> String {
    Sha256::digest(der)
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Names for a self-signed certificate: localhost, loopback IPs, the host name and, in a pod,
/// the pod name.
pub fn default_names() -> Vec<String> {
    let mut names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    for var in ["HOSTNAME", "POD_NAME"] {
        if let Ok(v) = std::env::var(var)
            && !v.is_empty()
            && !names.contains(&v)
        {
            names.push(v);
        }
    }
    names
}
