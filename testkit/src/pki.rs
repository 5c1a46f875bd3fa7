//! Test certificates made with rcgen: a CA, and leaves it signs (server certificates, user
//! client certificates, the `starling:peer` certificate), the same kind of material the
//! operator builds. Every test that needs a CA takes it from here.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};

/// A certificate authority.
pub struct Ca {
    params: CertificateParams,
    key: KeyPair,
    /// The CA certificate (PEM).
    pub pem: String,
}

/// A certificate and its key, PEM.
pub struct Leaf {
    /// The certificate.
    pub cert: String,
    /// The private key.
    pub key: String,
    /// The certificate's DER.
    pub der: Vec<u8>,
}

impl Ca {
    /// A new self-signed CA named `name`.
    pub fn new(name: &str) -> Ca {
        let key = KeyPair::generate().expect("ca key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("ca params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).expect("ca cert");
        Ca {
            pem: cert.pem(),
            params,
            key,
        }
    }

    /// A leaf with common name `cn` and DNS names `sans`, for server and client use.
    pub fn issue(&self, cn: &str, sans: &[&str]) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params =
            CertificateParams::new(sans.iter().map(|s| (*s).to_string()).collect::<Vec<_>>())
                .expect("leaf params");
        params.distinguished_name.push(DnType::CommonName, cn);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf cert");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }

    /// A client certificate for user (or peer identity) `cn`.
    pub fn client(&self, cn: &str) -> Leaf {
        self.issue(cn, &[])
    }

    /// A `starling:peer` certificate carrying the URI SAN `uri` (as the operator issues it,
    /// `urn:starling:peer:<namespace>/<cluster>`), for server and client use.
    pub fn peer(&self, uri: &str) -> Leaf {
        let key = KeyPair::generate().expect("leaf key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("leaf params");
        params
            .distinguished_name
            .push(DnType::CommonName, "starling:peer");
        params.subject_alt_names = vec![SanType::URI(uri.try_into().expect("an IA5 URI"))];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let issuer = Issuer::from_params(&self.params, &self.key);
        let cert = params.signed_by(&key, &issuer).expect("leaf cert");
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// Writes `text` to `path` through a rename, so a poll never reads half a file.
pub fn write_atomic(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}
