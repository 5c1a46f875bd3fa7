//! The subject common name of a connection's client certificate. rustls has verified the chain
//! against the client CA by the time the connection is established; this only reads the leaf.
//! Parsed with `x509-parser` (the maintained DER/X.509 parser of the rusticata project, which
//! rcgen also reads certificates with) rather than by hand: certificate parsing is exactly the
//! code not to write again.

use rustls::pki_types::CertificateDer;
use x509_parser::prelude::{FromDer, X509Certificate};

/// The common name of the leaf of `conn`'s client certificate chain; `None` without a client
/// certificate, or when the leaf has no UTF-8 common name.
pub fn client_common_name(conn: &quinn::Connection) -> Option<String> {
    let chain = conn
        .peer_identity()?
        .downcast::<Vec<CertificateDer<'static>>>()
        .ok()?;
    common_name(chain.first()?.as_ref())
}

/// The first subject common name of a DER certificate.
pub fn common_name(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let cn = cert.subject().iter_common_name().next()?;
    cn.as_str().ok().map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::common_name;

    #[test]
    fn reads_the_subject_common_name() {
        let mut params = rcgen::CertificateParams::new(vec!["x".into()]).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "starling:peer");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(common_name(cert.der()).as_deref(), Some("starling:peer"));
        assert_eq!(common_name(b"not a certificate"), None);
    }
}
