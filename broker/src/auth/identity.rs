//! The subject common name and URI subject alternative names of a connection's client
//! certificate. rustls has verified the chain against the client CA by the time the connection
//! is established; this only reads the leaf.
//! Parsed with `x509-parser` (the maintained DER/X.509 parser of the rusticata project, which
//! rcgen also reads certificates with) rather than by hand: certificate parsing is exactly the
//! code not to write again.

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, GeneralName, X509Certificate};

/// The DER of the leaf of `conn`'s client certificate chain; `None` without one.
pub fn client_leaf(conn: &quinn::Connection) -> Option<CertificateDer<'static>> {
    let chain = conn
        .peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?;
    chain.first().cloned()
}

/// The URI subject alternative names of a DER certificate (none when it does not parse).
pub fn uri_sans(der: &[u8]) -> Vec<String> {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|n| match n {
            GeneralName::URI(u) => Some((*u).to_string()),
            _ => None,
        })
        .collect()
}

/// The first subject common name of a DER certificate.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::{common_name, uri_sans};

    #[test]
    fn reads_the_subject_common_name() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "starling:peer");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()).as_deref(), Some("starling:peer"));
        assert_eq!(common_name(b"not a certificate"), None);
        assert!(uri_sans(cert.der()).is_empty());
        params.subject_alt_names = vec![rcgen::SanType::URI(
            "urn:starling:peer:ns/c".try_into().unwrap(),
        )];
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(uri_sans(cert.der()), ["urn:starling:peer:ns/c"]);
        assert!(uri_sans(b"not a certificate").is_empty());
    }
}
