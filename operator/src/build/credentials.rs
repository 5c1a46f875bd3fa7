//! A BrokerUser's credentials Secret, laid out so an application mounts it as a directory and
//! the SDK reads it with `Credentials::load_dir`: `tls.crt` and `tls.key` (a `tls` user) or
//! `token` (a `token` user), `ca.crt` (what to trust for the brokers' server certificate, when
//! known) and `address` (`<cluster>.<namespace>.svc:7400`). Owned by the BrokerUser, so
//! deleting the user deletes it.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::names::{CLUSTER_LABEL, FIELD_MANAGER, Names, USER_LABEL};
use crate::tls::CertificatePem;

/// Key of the token.
pub const TOKEN_KEY: &str = "token";
/// Key of the server address.
pub const ADDRESS_KEY: &str = "address";

/// What proves the user's identity.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A bearer token.
    Token(String),
    /// A client certificate and its key.
    Certificate(CertificatePem),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(<redacted>)"),
            Credential::Certificate(c) => f.debug_tuple("Certificate").field(c).finish(),
        }
    }
}

/// Everything the Secret holds.
#[derive(Debug, Clone, PartialEq)]
pub struct CredentialsInput<'a> {
    /// Secret name.
    pub name: &'a str,
    /// Namespace of the user and the cluster.
    pub namespace: &'a str,
    /// The BrokerUser's name.
    pub user: &'a str,
    /// The cluster's name.
    pub cluster: &'a str,
    /// Controller owner reference to the BrokerUser.
    pub owner: OwnerReference,
    /// The credential.
    pub credential: &'a Credential,
    /// PEM the client should trust for the brokers' server certificate, if known.
    pub server_ca: Option<&'a str>,
}

/// The address clients connect to.
pub fn address(cluster: &str, namespace: &str) -> String {
    format!(
        "{}:{}",
        Names::new(cluster).client_host(namespace),
        starling_config::DEFAULT_QUIC_PORT
    )
}

/// The Secret's data.
pub fn data(input: &CredentialsInput<'_>) -> BTreeMap<String, ByteString> {
    let b = |s: &str| ByteString(s.as_bytes().to_vec());
    let mut out = BTreeMap::new();
    match input.credential {
        Credential::Token(t) => {
            out.insert(TOKEN_KEY.to_string(), b(t));
        }
        Credential::Certificate(c) => {
            out.insert("tls.crt".to_string(), b(&c.cert));
            out.insert("tls.key".to_string(), b(&c.key));
        }
    }
    if let Some(ca) = input.server_ca {
        out.insert("ca.crt".to_string(), b(ca));
    }
    out.insert(
        ADDRESS_KEY.to_string(),
        b(&address(input.cluster, input.namespace)),
    );
    out
}

/// The Secret.
pub fn build(input: &CredentialsInput<'_>) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(input.name.to_string()),
            namespace: Some(input.namespace.to_string()),
            labels: Some(BTreeMap::from([
                (
                    "app.kubernetes.io/managed-by".to_string(),
                    FIELD_MANAGER.to_string(),
                ),
                (
                    "app.kubernetes.io/part-of".to_string(),
                    "starling".to_string(),
                ),
                (CLUSTER_LABEL.to_string(), input.cluster.to_string()),
                (USER_LABEL.to_string(), input.user.to_string()),
            ])),
            owner_references: Some(vec![input.owner.clone()]),
            ..ObjectMeta::default()
        },
        type_: Some("Opaque".to_string()),
        data: Some(data(input)),
        ..Secret::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input<'a>(credential: &'a Credential, ca: Option<&'a str>) -> CredentialsInput<'a> {
        CredentialsInput {
            name: "orders-app-credentials",
            namespace: "messaging",
            user: "orders-app",
            cluster: "events",
            owner: OwnerReference {
                api_version: "starling.dev/v1alpha1".into(),
                kind: "BrokerUser".into(),
                name: "orders-app".into(),
                uid: "user-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            },
            credential,
            server_ca: ca,
        }
    }

    fn keys(s: &Secret) -> Vec<String> {
        s.data
            .as_ref()
            .map(|d| d.keys().cloned().collect())
            .unwrap_or_default()
    }

    #[test]
    fn a_token_secret_holds_token_ca_and_address() {
        let t = Credential::Token("tok".into());
        let s = build(&input(&t, Some("CA")));
        assert_eq!(keys(&s), ["address", "ca.crt", "token"]);
        let data = s.data.clone().unwrap_or_default();
        assert_eq!(
            data.get("address").map(|b| b.0.as_slice()),
            Some(&b"events.messaging.svc:7400"[..])
        );
        assert_eq!(data.get("token").map(|b| b.0.as_slice()), Some(&b"tok"[..]));
        assert_eq!(s.metadata.name.as_deref(), Some("orders-app-credentials"));
        let owner = s.metadata.owner_references.unwrap_or_default();
        assert_eq!(owner[0].kind, "BrokerUser");
        assert_eq!(owner[0].uid, "user-uid");
        let labels = s.metadata.labels.unwrap_or_default();
        assert_eq!(
            labels.get(USER_LABEL).map(String::as_str),
            Some("orders-app")
        );
        assert!(!format!("{t:?}").contains("tok"), "Debug hides the token");
    }

    #[test]
    fn a_tls_secret_holds_the_certificate_and_key() {
        let c = Credential::Certificate(CertificatePem {
            cert: "CERT".into(),
            key: "KEY".into(),
        });
        assert_eq!(
            keys(&build(&input(&c, Some("CA")))),
            ["address", "ca.crt", "tls.crt", "tls.key"]
        );
        // Without a known server CA the client falls back to its own trust.
        assert_eq!(
            keys(&build(&input(&c, None))),
            ["address", "tls.crt", "tls.key"]
        );
    }
}
