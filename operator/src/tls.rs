//! The TLS material the operator generates when `spec.tls` is unset: one self-signed
//! certificate and key, stored once in the Secret `<cluster>-tls` and mounted by every broker,
//! so all brokers present the same certificate and can authenticate each other (and clients can
//! pin it).
//!
//! This module only generates the certificate ([`generate`]); the Secret holding it is rendered
//! by [`crate::build::tls_secret`]. The apply step creates the Secret only when it does not
//! exist, and never regenerates it, so the brokers are not rolled.

use std::net::{IpAddr, Ipv4Addr};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, KeyPair, SanType,
};

use crate::names::Names;

/// A certificate and its private key, PEM encoded.
#[derive(Clone, PartialEq, Eq)]
pub struct CertificatePem {
    /// The certificate (`tls.crt`).
    pub cert: String,
    /// The private key (`tls.key`), PKCS#8.
    pub key: String,
}

impl std::fmt::Debug for CertificatePem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificatePem")
            .field("cert", &self.cert)
            .field("key", &"<redacted>")
            .finish()
    }
}

/// Why a certificate could not be generated.
#[derive(Debug, thiserror::Error)]
#[error("generating the TLS certificate: {0}")]
pub struct TlsError(#[from] rcgen::Error);

/// The DNS names of the generated certificate: every broker through the headless Service
/// (wildcards, with and without the cluster domain), the client Service in every short form,
/// and `localhost`. The certificate also names the IP address 127.0.0.1.
pub fn dns_names(names: &Names, namespace: &str, cluster_domain: &str) -> Vec<String> {
    let headless = &names.headless_service;
    let client = &names.client_service;
    vec![
        format!("*.{headless}.{namespace}.svc.{cluster_domain}"),
        format!("*.{headless}.{namespace}.svc"),
        client.clone(),
        format!("{client}.{namespace}"),
        format!("{client}.{namespace}.svc"),
        format!("{client}.{namespace}.svc.{cluster_domain}"),
        "localhost".to_string(),
    ]
}

/// Generates a self-signed certificate (ECDSA P-256, usable for server and client
/// authentication) for the cluster's names.
pub fn generate(
    names: &Names,
    namespace: &str,
    cluster_domain: &str,
) -> Result<CertificatePem, TlsError> {
    let mut params = CertificateParams::new(dns_names(names, namespace, cluster_domain))?;
    params
        .subject_alt_names
        .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("{}.{namespace}.svc", names.client_service),
    );
    dn.push(DnType::OrganizationName, "starling");
    params.distinguished_name = dn;
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CertificatePem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::GeneralName;
    use x509_parser::pem::parse_x509_pem;

    fn sans(pem: &str) -> (Vec<String>, Vec<Vec<u8>>) {
        let (_, block) = parse_x509_pem(pem.as_bytes()).unwrap_or_else(|e| panic!("pem: {e}"));
        let cert = block.parse_x509().unwrap_or_else(|e| panic!("x509: {e}"));
        let ext = cert
            .subject_alternative_name()
            .unwrap_or_else(|e| panic!("san: {e}"))
            .unwrap_or_else(|| panic!("no SAN extension"));
        let mut dns = Vec::new();
        let mut ips = Vec::new();
        for name in &ext.value.general_names {
            match name {
                GeneralName::DNSName(d) => dns.push(d.to_string()),
                GeneralName::IPAddress(ip) => ips.push(ip.to_vec()),
                _ => {}
            }
        }
        (dns, ips)
    }

    #[test]
    fn the_certificate_names_every_broker_and_the_client_service() {
        let names = Names::new("events");
        let pem = generate(&names, "messaging", "cluster.local").unwrap_or_else(|e| panic!("{e}"));
        assert!(pem.cert.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(pem.key.contains("PRIVATE KEY-----"));
        assert!(
            !format!("{pem:?}").contains(&pem.key),
            "Debug never prints the key"
        );
        let (dns, ips) = sans(&pem.cert);
        assert_eq!(
            dns,
            vec![
                "*.events-headless.messaging.svc.cluster.local",
                "*.events-headless.messaging.svc",
                "events",
                "events.messaging",
                "events.messaging.svc",
                "events.messaging.svc.cluster.local",
                "localhost",
            ]
        );
        assert_eq!(ips, vec![vec![127, 0, 0, 1]]);
    }

    #[test]
    fn each_generation_is_a_new_key() {
        let names = Names::new("events");
        let a = generate(&names, "m", "example.org").unwrap_or_else(|e| panic!("{e}"));
        let b = generate(&names, "m", "example.org").unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(a.key, b.key);
        let (dns, _) = sans(&a.cert);
        assert!(dns.contains(&"*.events-headless.m.svc.example.org".to_string()));
    }
}
