//! The cluster's certificate authority and the certificates it signs, as pure functions of
//! their inputs and the current time.
//!
//! Each BrokerCluster has one CA ([`generate_ca`]), kept in the Secret `<cluster>-ca` and never
//! regenerated while it is valid ([`ca_is_usable`]). It signs:
//! - the brokers' peer certificate (common name [`PEER_IDENTITY`], the URI SAN
//!   [`peer_uri`] naming the cluster, client and server authentication), shared by every
//!   broker ([`issue_peer`]);
//! - one client certificate per `BrokerUser` with `authentication.type: tls` (common name = the
//!   user's name, client authentication only) ([`issue_user`]).
//!
//! A leaf is reissued when [`leaf_needs_renewal`] says so: it does not parse, names someone
//! else, was not signed by the current CA, or has less than a third of its lifetime left; the
//! peer certificate also when it lacks the cluster's URI ([`peer_needs_renewal`]).
//! Nothing here does I/O; the Secrets are rendered by [`crate::build::pki_secrets`].

use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use starling_access::PEER_IDENTITY;
use x509_parser::pem::parse_x509_pem;
use x509_parser::time::ASN1Time;

use crate::tls::CertificatePem;

/// Lifetime of a cluster CA.
pub const CA_LIFETIME: Duration = Duration::from_secs(10 * 365 * 24 * 3600);
/// Lifetime of the brokers' peer certificate.
pub const PEER_LIFETIME: Duration = Duration::from_secs(90 * 24 * 3600);
/// Lifetime of a user's client certificate.
pub const USER_LIFETIME: Duration = Duration::from_secs(365 * 24 * 3600);
/// How far back `notBefore` is set, so a clock a little behind still accepts a fresh
/// certificate.
pub const BACKDATE: Duration = Duration::from_secs(3600);

/// Why a certificate could not be generated or signed.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused the parameters or the CA material.
    #[error("certificate generation: {0}")]
    Rcgen(#[from] rcgen::Error),
    /// A time could not be represented.
    #[error("time out of range: {0}")]
    Time(String),
}

/// The URI SAN of cluster `namespace/cluster`'s peer certificate, which its brokers require of
/// a peer (`cluster_peer_uri`): `urn:starling:peer:<namespace>/<cluster>`. Namespace and
/// cluster names are DNS labels, so the URI needs no escaping and names one cluster only.
pub fn peer_uri(namespace: &str, cluster: &str) -> String {
    format!("urn:starling:peer:{namespace}/{cluster}")
}

fn asn1(unix_secs: i64) -> Result<ASN1Time, PkiError> {
    ASN1Time::from_timestamp(unix_secs).map_err(|e| PkiError::Time(e.to_string()))
}

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX / 4)
}

fn validity(
    params: &mut CertificateParams,
    now_unix: i64,
    lifetime: Duration,
) -> Result<(), PkiError> {
    params.not_before = asn1(now_unix.saturating_sub(secs(BACKDATE)))?.to_datetime();
    params.not_after = asn1(now_unix.saturating_add(secs(lifetime)))?.to_datetime();
    Ok(())
}

/// A new CA for the cluster `cluster` in `namespace` (ECDSA P-256, [`CA_LIFETIME`], may sign
/// leaves only: path length 0).
pub fn generate_ca(
    cluster: &str,
    namespace: &str,
    now_unix: i64,
) -> Result<CertificatePem, PkiError> {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(
        DnType::CommonName,
        format!("starling cluster CA {namespace}/{cluster}"),
    );
    dn.push(DnType::OrganizationName, "starling");
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut params, now_unix, CA_LIFETIME)?;
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CertificatePem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A leaf certificate with common name `cn` and the given extended key usages, signed by `ca`.
pub fn issue(
    ca: &CertificatePem,
    cn: &str,
    uri: Option<&str>,
    usages: Vec<ExtendedKeyUsagePurpose>,
    lifetime: Duration,
    now_unix: i64,
) -> Result<CertificatePem, PkiError> {
    let ca_key = KeyPair::from_pem(&ca.key)?;
    let issuer = Issuer::from_ca_cert_pem(&ca.cert, ca_key)?;
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn.push(DnType::OrganizationName, "starling");
    params.distinguished_name = dn;
    if let Some(uri) = uri {
        params.subject_alt_names = vec![SanType::URI(uri.try_into()?)];
    }
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = usages;
    params.use_authority_key_identifier_extension = true;
    validity(&mut params, now_unix, lifetime)?;
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    Ok(CertificatePem {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// The brokers' peer certificate: common name [`PEER_IDENTITY`], the URI SAN `uri`
/// ([`peer_uri`]), client and server authentication, [`PEER_LIFETIME`].
pub fn issue_peer(
    ca: &CertificatePem,
    uri: &str,
    now_unix: i64,
) -> Result<CertificatePem, PkiError> {
    issue(
        ca,
        PEER_IDENTITY,
        Some(uri),
        vec![
            ExtendedKeyUsagePurpose::ClientAuth,
            ExtendedKeyUsagePurpose::ServerAuth,
        ],
        PEER_LIFETIME,
        now_unix,
    )
}

/// A user's client certificate: common name = the user's name, client authentication only,
/// [`USER_LIFETIME`].
pub fn issue_user(
    ca: &CertificatePem,
    user: &str,
    now_unix: i64,
) -> Result<CertificatePem, PkiError> {
    issue(
        ca,
        user,
        None,
        vec![ExtendedKeyUsagePurpose::ClientAuth],
        USER_LIFETIME,
        now_unix,
    )
}

/// Whether a stored CA can keep signing: the certificate and key parse, the key is the
/// certificate's, the certificate is a CA and it is valid at `now_unix`.
pub fn ca_is_usable(ca: &CertificatePem, now_unix: i64) -> bool {
    let Ok(key) = KeyPair::from_pem(&ca.key) else {
        return false;
    };
    let Ok((_, block)) = parse_x509_pem(ca.cert.as_bytes()) else {
        return false;
    };
    let Ok(cert) = block.parse_x509() else {
        return false;
    };
    let Ok(now) = ASN1Time::from_timestamp(now_unix) else {
        return false;
    };
    cert.public_key().subject_public_key.data.as_ref() == key.public_key_raw()
        && cert.is_ca()
        && cert.validity().is_valid_at(now)
}

/// Why a leaf certificate must be (re)issued, or `None` to keep it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// There is no certificate yet, or it does not parse.
    Missing,
    /// Its common name is not the expected one.
    WrongName,
    /// It was not signed by the current CA (the CA was replaced).
    OtherIssuer,
    /// Less than a third of its lifetime is left (or it has expired).
    Expiring,
    /// A peer certificate without the cluster's URI (issued before the URI was required).
    MissingUri,
}

impl Renewal {
    /// In words, for logs and events.
    pub fn as_str(&self) -> &'static str {
        match self {
            Renewal::Missing => "no certificate yet",
            Renewal::WrongName => "the certificate names someone else",
            Renewal::OtherIssuer => "the certificate was signed by another CA",
            Renewal::Expiring => "less than a third of the certificate's lifetime is left",
            Renewal::MissingUri => "the peer certificate does not carry the cluster's URI",
        }
    }
}

/// Whether the leaf `cert_pem` (with common name `cn`) must be reissued by `ca_cert_pem` at
/// `now_unix`.
pub fn leaf_needs_renewal(
    cert_pem: Option<&str>,
    ca_cert_pem: &str,
    cn: &str,
    now_unix: i64,
) -> Option<Renewal> {
    let Some(Ok((_, block))) = cert_pem.map(|p| parse_x509_pem(p.as_bytes())) else {
        return Some(Renewal::Missing);
    };
    let Ok(cert) = block.parse_x509() else {
        return Some(Renewal::Missing);
    };
    let name = cert
        .subject()
        .iter_common_name()
        .next()
        .and_then(|c| c.as_str().ok());
    if name != Some(cn) {
        return Some(Renewal::WrongName);
    }
    let signed = parse_x509_pem(ca_cert_pem.as_bytes())
        .ok()
        .and_then(|(_, ca_block)| {
            let ca = ca_block.parse_x509().ok()?;
            Some(cert.verify_signature(Some(ca.public_key())).is_ok())
        });
    if signed != Some(true) {
        return Some(Renewal::OtherIssuer);
    }
    let not_before = cert.validity().not_before.timestamp();
    let not_after = cert.validity().not_after.timestamp();
    let lifetime = not_after.saturating_sub(not_before);
    let left = not_after.saturating_sub(now_unix);
    // left < lifetime / 3, in integers.
    (left.saturating_mul(3) < lifetime || left <= 0).then_some(Renewal::Expiring)
}

/// Whether the peer certificate `cert_pem` must be reissued by `ca_cert_pem` at `now_unix`:
/// [`leaf_needs_renewal`] for [`PEER_IDENTITY`], or it does not carry `uri` as a URI SAN.
pub fn peer_needs_renewal(
    cert_pem: Option<&str>,
    ca_cert_pem: &str,
    uri: &str,
    now_unix: i64,
) -> Option<Renewal> {
    leaf_needs_renewal(cert_pem, ca_cert_pem, PEER_IDENTITY, now_unix).or_else(|| {
        let uris = cert_pem.map(uri_sans).unwrap_or_default();
        (!uris.iter().any(|u| u == uri)).then_some(Renewal::MissingUri)
    })
}

/// The URI subject alternative names of the PEM certificate `cert_pem` (none when it does not
/// parse).
pub fn uri_sans(cert_pem: &str) -> Vec<String> {
    let Ok((_, block)) = parse_x509_pem(cert_pem.as_bytes()) else {
        return Vec::new();
    };
    let Ok(cert) = block.parse_x509() else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            x509_parser::extensions::GeneralName::URI(u) => Some((*u).to_string()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::extensions::ExtendedKeyUsage;

    const NOW: i64 = 1_800_000_000;
    const URI: &str = "urn:starling:peer:messaging/events";

    fn parse(pem: &str) -> Vec<u8> {
        let (_, block) = parse_x509_pem(pem.as_bytes()).unwrap_or_else(|e| panic!("pem: {e}"));
        block.contents
    }

    fn cn_of(cert: &x509_parser::certificate::X509Certificate<'_>) -> String {
        cert.subject()
            .iter_common_name()
            .next()
            .and_then(|c| c.as_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    fn eku(cert: &x509_parser::certificate::X509Certificate<'_>) -> ExtendedKeyUsage<'static> {
        let e = cert
            .extended_key_usage()
            .unwrap_or_else(|e| panic!("eku: {e}"))
            .unwrap_or_else(|| panic!("no EKU"))
            .value;
        ExtendedKeyUsage {
            any: e.any,
            server_auth: e.server_auth,
            client_auth: e.client_auth,
            code_signing: e.code_signing,
            email_protection: e.email_protection,
            time_stamping: e.time_stamping,
            ocsp_signing: e.ocsp_signing,
            other: Vec::new(),
        }
    }

    #[test]
    fn the_ca_is_a_ten_year_self_signed_ca() {
        let ca = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !format!("{ca:?}").contains(&ca.key),
            "Debug never prints the key"
        );
        let der = parse(&ca.cert);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap_or_else(|e| panic!("{e}"));
        assert!(cert.is_ca());
        assert_eq!(cn_of(&cert), "starling cluster CA messaging/events");
        assert_eq!(cert.subject(), cert.issuer());
        assert!(cert.verify_signature(None).is_ok(), "self-signed");
        assert_eq!(
            cert.validity().not_after.timestamp(),
            NOW + secs(CA_LIFETIME)
        );
        assert!(ca_is_usable(&ca, NOW));
        assert!(!ca_is_usable(&ca, NOW + secs(CA_LIFETIME) + 1), "expired");
        let other = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        let mismatched = CertificatePem {
            cert: ca.cert.clone(),
            key: other.key,
        };
        assert!(!ca_is_usable(&mismatched, NOW), "the key must be the CA's");
        assert!(!ca_is_usable(
            &CertificatePem {
                cert: "garbage".into(),
                key: ca.key.clone()
            },
            NOW
        ));
    }

    #[test]
    fn the_peer_certificate_is_signed_by_the_ca_for_both_directions() {
        let ca = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        let peer = issue_peer(&ca, URI, NOW).unwrap_or_else(|e| panic!("{e}"));
        let der = parse(&peer.cert);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap_or_else(|e| panic!("{e}"));
        let ca_der = parse(&ca.cert);
        let (_, ca_cert) =
            x509_parser::parse_x509_certificate(&ca_der).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cn_of(&cert), PEER_IDENTITY);
        assert_eq!(cert.issuer(), ca_cert.subject());
        assert!(cert.verify_signature(Some(ca_cert.public_key())).is_ok());
        assert!(!cert.is_ca());
        let e = eku(&cert);
        assert!(e.client_auth && e.server_auth);
        assert_eq!(cert.validity().not_before.timestamp(), NOW - secs(BACKDATE));
        assert_eq!(
            cert.validity().not_after.timestamp(),
            NOW + secs(PEER_LIFETIME)
        );
    }

    #[test]
    fn the_peer_certificate_names_its_cluster_by_uri_and_one_without_it_is_reissued() {
        assert_eq!(peer_uri("messaging", "events"), URI);
        let ca = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        let peer = issue_peer(&ca, URI, NOW).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(uri_sans(&peer.cert), [URI]);
        assert_eq!(
            peer_needs_renewal(Some(&peer.cert), &ca.cert, URI, NOW),
            None
        );
        // Another cluster's URI, or none (a certificate issued before the URI): reissued.
        let other = peer_uri("messaging", "billing");
        assert_eq!(
            peer_needs_renewal(Some(&peer.cert), &ca.cert, &other, NOW),
            Some(Renewal::MissingUri)
        );
        let bare = issue(
            &ca,
            PEER_IDENTITY,
            None,
            vec![ExtendedKeyUsagePurpose::ClientAuth],
            PEER_LIFETIME,
            NOW,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(uri_sans(&bare.cert).is_empty());
        assert_eq!(
            peer_needs_renewal(Some(&bare.cert), &ca.cert, URI, NOW),
            Some(Renewal::MissingUri)
        );
        assert_eq!(
            peer_needs_renewal(None, &ca.cert, URI, NOW),
            Some(Renewal::Missing)
        );
        // A user certificate carries no URI.
        let user = issue_user(&ca, "orders-app", NOW).unwrap_or_else(|e| panic!("{e}"));
        assert!(uri_sans(&user.cert).is_empty());
    }

    #[test]
    fn a_user_certificate_names_the_user_and_only_authenticates_clients() {
        let ca = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        let user = issue_user(&ca, "orders-app", NOW).unwrap_or_else(|e| panic!("{e}"));
        let der = parse(&user.cert);
        let (_, cert) = x509_parser::parse_x509_certificate(&der).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cn_of(&cert), "orders-app");
        let e = eku(&cert);
        assert!(e.client_auth && !e.server_auth);
        assert_eq!(
            leaf_needs_renewal(Some(&user.cert), &ca.cert, "orders-app", NOW),
            None
        );
    }

    #[test]
    fn renewal_when_missing_misnamed_foreign_or_two_thirds_through() {
        let ca = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        let peer = issue_peer(&ca, URI, NOW).unwrap_or_else(|e| panic!("{e}"));
        let check =
            |cert: Option<&str>, ca: &str, cn: &str, now| leaf_needs_renewal(cert, ca, cn, now);
        assert_eq!(
            check(None, &ca.cert, PEER_IDENTITY, NOW),
            Some(Renewal::Missing)
        );
        assert_eq!(
            check(Some("not a cert"), &ca.cert, PEER_IDENTITY, NOW),
            Some(Renewal::Missing)
        );
        assert_eq!(
            check(Some(&peer.cert), &ca.cert, "someone", NOW),
            Some(Renewal::WrongName)
        );
        let other = generate_ca("events", "messaging", NOW).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            check(Some(&peer.cert), &other.cert, PEER_IDENTITY, NOW),
            Some(Renewal::OtherIssuer)
        );
        // The whole validity is the lifetime plus the backdating.
        let total = secs(PEER_LIFETIME) + secs(BACKDATE);
        let not_after = NOW + secs(PEER_LIFETIME);
        let renew_from = not_after - total / 3;
        assert_eq!(
            check(Some(&peer.cert), &ca.cert, PEER_IDENTITY, renew_from - 1),
            None
        );
        assert_eq!(
            check(Some(&peer.cert), &ca.cert, PEER_IDENTITY, renew_from + 1),
            Some(Renewal::Expiring)
        );
        assert_eq!(
            check(Some(&peer.cert), &ca.cert, PEER_IDENTITY, not_after + 10),
            Some(Renewal::Expiring)
        );
    }
}
