//! BrokerUsers in a test namespace: create one (as a user would, from YAML-shaped JSON, so the
//! suite exercises the CRD's schema and not only the operator's Rust types), wait until the
//! operator made it Ready, read its credentials Secret, and turn that Secret into an SDK
//! `ClientConfig` or a directory for `starling --credentials DIR`.
//!
//! The Secret's `address` (`<cluster>.<namespace>.svc:7400`) does not resolve on the host, so
//! the suite connects to the client Service's ClusterIP and uses the address's host as the TLS
//! server name: the brokers' certificate is still verified against the Secret's `ca.crt`.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use kube::api::{ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use starling_client::Credentials;

use crate::kube_env::TestNamespace;
use crate::{E2eError, wait};

pub use crate::credentials::{CredentialsDirGuard, UserCredentials};

/// How long the operator may take to make a BrokerUser Ready.
pub const USER_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// The BrokerUser resource, addressed dynamically.
pub fn broker_user_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("starling.dev", "v1alpha1", "BrokerUser"),
        "brokerusers",
    )
}

/// How a BrokerUser authenticates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthType {
    /// A client certificate issued by the cluster CA.
    Tls,
    /// A generated token.
    Token,
}

impl AuthType {
    /// The value of `spec.authentication.type`.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthType::Tls => "tls",
            AuthType::Token => "token",
        }
    }
}

/// Permissions allowing every operation on every topic and key: what the suite's tests that
/// are not about access control run with.
pub fn full_access() -> serde_json::Value {
    let all = serde_json::json!({ "allow": [">"] });
    serde_json::json!({
        "publish": all, "subscribe": all, "cacheRead": all, "cacheWrite": all,
    })
}

impl TestNamespace {
    /// Typed-enough API for BrokerUsers here.
    pub fn users(&self) -> Api<DynamicObject> {
        Api::namespaced_with(self.env.client.clone(), &self.name, &broker_user_resource())
    }

    /// Creates a BrokerUser of `cluster` with `permissions` (the CRD's camelCase shape:
    /// `publish`, `subscribe`, `cacheRead`, `cacheWrite`, each `{allow, deny}`).
    pub async fn create_user(
        &self,
        name: &str,
        cluster: &str,
        auth: AuthType,
        permissions: serde_json::Value,
    ) -> Result<DynamicObject, E2eError> {
        let obj: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": "starling.dev/v1alpha1",
            "kind": "BrokerUser",
            "metadata": { "name": name },
            "spec": {
                "cluster": cluster,
                "authentication": { "type": auth.as_str() },
                "permissions": permissions,
            },
        }))
        .map_err(|e| E2eError::Env(format!("BrokerUser {name}: {e}")))?;
        Ok(self.users().create(&PostParams::default(), &obj).await?)
    }

    /// Deletes a BrokerUser.
    pub async fn delete_user(&self, name: &str) -> Result<(), E2eError> {
        self.users().delete(name, &DeleteParams::default()).await?;
        Ok(())
    }

    /// Waits until the BrokerUser has observed its latest generation, is Ready and names its
    /// Secret; returns it.
    pub async fn wait_user_ready(&self, name: &str) -> Result<DynamicObject, E2eError> {
        let api = self.users();
        wait::until(
            &format!("BrokerUser {}/{name} Ready", self.name),
            USER_READY_TIMEOUT,
            || {
                let api = api.clone();
                async move {
                    let user = api.get(name).await.ok()?;
                    user_is_ready(&user).then_some(user)
                }
            },
        )
        .await
    }

    /// Reads the credentials Secret of a Ready BrokerUser.
    pub async fn user_credentials(&self, name: &str) -> Result<UserCredentials, E2eError> {
        let user = self.users().get(name).await?;
        let secret_name = user
            .data
            .pointer("/status/secretName")
            .and_then(|v| v.as_str())
            .ok_or_else(|| E2eError::Env(format!("BrokerUser {name} has no status.secretName")))?
            .to_string();
        let secret = self.api::<Secret>().get(&secret_name).await?;
        let files: BTreeMap<String, Vec<u8>> = secret
            .data
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (k, v.0))
            .collect();
        let text = |key: &str| -> Result<String, E2eError> {
            let bytes = files
                .get(key)
                .ok_or_else(|| E2eError::Env(format!("Secret {secret_name} has no {key}")))?;
            String::from_utf8(bytes.clone())
                .map(|s| s.trim().to_string())
                .map_err(|_| E2eError::Env(format!("Secret {secret_name}: {key} is not UTF-8")))
        };
        let credentials = if files.contains_key("token") {
            Credentials::Token(text("token")?)
        } else {
            let pem = |key: &str| {
                files
                    .get(key)
                    .cloned()
                    .ok_or_else(|| E2eError::Env(format!("Secret {secret_name} has no {key}")))
            };
            Credentials::Certificate {
                cert_pem: pem("tls.crt")?,
                key_pem: pem("tls.key")?,
            }
        };
        let ca_pem = files
            .get("ca.crt")
            .cloned()
            .ok_or_else(|| E2eError::Env(format!("Secret {secret_name} has no ca.crt")))?;
        Ok(UserCredentials {
            user: name.to_string(),
            address: text("address")?,
            secret_name,
            files,
            credentials,
            ca_pem,
        })
    }

    /// The user every test that is not about access control connects as: `e2e-<cluster>`, a
    /// certificate user allowed everything, created on first use and reused after.
    pub async fn full_access_user(&self, cluster: &str) -> Result<UserCredentials, E2eError> {
        let name = format!("e2e-{cluster}");
        match self.users().get_opt(&name).await? {
            Some(_) => {}
            None => {
                self.create_user(&name, cluster, AuthType::Tls, full_access())
                    .await?;
            }
        }
        self.wait_user_ready(&name).await?;
        self.user_credentials(&name).await
    }
}

/// Whether a BrokerUser is current and Ready, with its Secret named.
pub fn user_is_ready(user: &DynamicObject) -> bool {
    let status = match user.data.get("status") {
        Some(s) => s,
        None => return false,
    };
    let observed = status.get("observedGeneration").and_then(|g| g.as_i64());
    let current = observed.is_none_or(|g| Some(g) == user.metadata.generation);
    let ready = status
        .get("conditions")
        .and_then(|c| c.as_array())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "True")
        });
    let named = status.get("secretName").and_then(|s| s.as_str()).is_some();
    current && ready && named
}

/// The condition of `type_` on a BrokerUser, as `(status, reason, message)`.
pub fn user_condition(user: &DynamicObject, type_: &str) -> Option<(String, String, String)> {
    let cs = user.data.pointer("/status/conditions")?.as_array()?;
    let c = cs.iter().find(|c| c["type"] == type_)?;
    let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
    Some((s("status"), s("reason"), s("message")))
}
