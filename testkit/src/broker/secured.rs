//! A broker that requires authentication, for the SDK and CLI tests of credentials: a users
//! file with one token user and one certificate user, and a client CA (rcgen) that signs the
//! certificate user's certificate.

use std::path::Path;

use starling_broker::{Broker, RunningBroker};
use starling_config::{AuthMode, ConfigOverrides, Profile, compose};

use crate::pki::Ca;

/// The token user's token.
pub const TOKEN: &str = "cli-token-0123456789abcdef";
/// The token user's name.
pub const TOKEN_USER: &str = "app";
/// The certificate user's name (its certificate's common name).
pub const CERT_USER: &str = "billing";

/// A test CA and one client certificate it signed.
pub struct ClientCert {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The client certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PEM).
    pub key_pem: String,
}

/// A new CA and a client certificate with common name `cn` signed by it.
pub fn client_cert(cn: &str) -> ClientCert {
    let ca = Ca::new("test users CA");
    let leaf = ca.client(cn);
    ClientCert {
        ca_pem: ca.pem,
        cert_pem: leaf.cert,
        key_pem: leaf.key,
    }
}

/// Replaces the users document with one that has only the certificate user (through a rename,
/// so the broker never reads half a file): the token user is revoked.
pub fn revoke_token_user(s: &Secured) {
    let text = users_yaml();
    let kept = &text[text
        .find(&format!("  - name: {CERT_USER}"))
        .expect("cert user")..];
    let tmp = s.dir.path().join("users.yaml.new");
    std::fs::write(&tmp, format!("version: 1\nusers:\n{kept}")).expect("write users");
    std::fs::rename(&tmp, s.dir.path().join("users.yaml")).expect("rename users");
}

/// The users document: `app` (token) may publish and subscribe `allowed.>` and read and write
/// cache keys `allowed.*`; `billing` (certificate) may publish `billing.>` only.
fn users_yaml() -> String {
    format!(
        r#"version: 1
users:
  - name: {TOKEN_USER}
    authentication: {{type: token, sha256: "{hash}"}}
    permissions:
      publish: {{allow: ["allowed.>"]}}
      subscribe: {{allow: ["allowed.>"]}}
      cache_read: {{allow: ["allowed.*"]}}
      cache_write: {{allow: ["allowed.*"]}}
  - name: {CERT_USER}
    authentication: {{type: tls}}
    permissions:
      publish: {{allow: ["billing.>"]}}
"#,
        hash = starling_access::token_hash_hex(TOKEN.as_bytes()),
    )
}

/// A broker with `auth_mode: required`, its users file and client CA, and the certificate of
/// the certificate user.
pub struct Secured {
    /// The broker.
    pub broker: RunningBroker,
    /// The certificate user's certificate and its CA.
    pub cert: ClientCert,
    /// Where the users file and CA live (removed on drop).
    pub dir: tempfile::TempDir,
}

impl Secured {
    /// Starts the broker on 127.0.0.1 ephemeral ports; `tag` names its temporary directory.
    pub async fn start(tag: &str) -> Secured {
        let tmp = tempfile::Builder::new()
            .prefix(&format!("starling-secured-{tag}-"))
            .tempdir()
            .expect("temp dir");
        let dir = tmp.path();
        let cert = client_cert(CERT_USER);
        std::fs::write(dir.join("client-ca.crt"), &cert.ca_pem).expect("write CA");
        std::fs::write(dir.join("users.yaml"), users_yaml()).expect("write users");
        let overrides = ConfigOverrides {
            auth_mode: Some(AuthMode::Required),
            auth_users_file: Some(Some(dir.join("users.yaml"))),
            auth_client_ca_file: Some(Some(dir.join("client-ca.crt"))),
            quic_listen: Some("127.0.0.1:0".parse().expect("addr")),
            http_listen: Some("127.0.0.1:0".parse().expect("addr")),
            drain_timeout_ms: Some(1_000),
            auth_reload_interval_ms: Some(200),
            ..ConfigOverrides::default()
        };
        let cfg = compose(Profile::Balanced, None, &overrides);
        let broker = Broker::new(cfg)
            .expect("valid config")
            .start()
            .await
            .expect("broker starts");
        Secured {
            broker,
            cert,
            dir: tmp,
        }
    }

    /// Writes the certificate user's files into `dir` (as `tls.crt` and `tls.key`).
    pub fn write_cert(&self, dir: &Path) {
        std::fs::write(dir.join("tls.crt"), &self.cert.cert_pem).expect("write cert");
        std::fs::write(dir.join("tls.key"), &self.cert.key_pem).expect("write key");
    }
}
