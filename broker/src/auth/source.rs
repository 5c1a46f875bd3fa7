//! Where the users document comes from: `auth_users_file` (a hand-run broker, or any mounted
//! file), or the `users.yaml` key of the `auth_users_secret` Secret in the pod's namespace,
//! read through the Kubernetes API with the pod's service account (the way the members
//! ConfigMap is read, see `cluster::source`). Reading the Secret through the API rather than a
//! mount means a change is seen at the next poll instead of after the kubelet's sync period.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use starling_access::{AccessError, Users};
use starling_config::BrokerConfig;

use super::health::ReadFailure;
use crate::cluster::source::pod_namespace;

/// The Secret key holding the users document.
pub const SECRET_KEY: &str = "users.yaml";

/// Longest one read may take before it is abandoned (and tried again at the next poll).
const READ_LIMIT: Duration = Duration::from_secs(5);

/// Why the users document could not be read, parsed, or its source set up.
#[derive(Debug, thiserror::Error)]
pub enum UsersSourceError {
    /// `auth_users_secret` without a namespace to read it in.
    #[error("auth_users_secret needs the pod's namespace: POD_NAMESPACE is unset and {0}")]
    NoNamespace(#[source] std::io::Error),
    /// No Kubernetes client.
    #[error("cannot reach the Kubernetes API: {0}")]
    Kubernetes(#[source] kube::Error),
    /// The file could not be read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The Secret could not be read.
    #[error("Secret {name}: {source}")]
    Secret {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The Secret has no users document.
    #[error("Secret {0} has no {SECRET_KEY:?} key")]
    NoKey(String),
    /// The document is not UTF-8.
    #[error("the users document is not UTF-8")]
    NotUtf8,
    /// The document does not compile.
    #[error("{0}")]
    Document(#[from] AccessError),
    /// One read took longer than `READ_LIMIT`.
    #[error("no answer within {READ_LIMIT:?}")]
    Timeout,
}

impl UsersSourceError {
    /// Why, as the users table's health counts it: the document is not there, could not be
    /// read, or does not compile.
    pub fn reason(&self) -> ReadFailure {
        match self {
            UsersSourceError::File { source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                ReadFailure::Missing
            }
            UsersSourceError::Secret {
                source: kube::Error::Api(status),
                ..
            } if status.code == 404 => ReadFailure::Missing,
            UsersSourceError::NoKey(_) => ReadFailure::Missing,
            UsersSourceError::NotUtf8 | UsersSourceError::Document(_) => ReadFailure::Invalid,
            UsersSourceError::NoNamespace(_)
            | UsersSourceError::Kubernetes(_)
            | UsersSourceError::File { .. }
            | UsersSourceError::Secret { .. }
            | UsersSourceError::Timeout => ReadFailure::Unreadable,
        }
    }
}

/// A users document source.
pub enum UsersSource {
    /// A local file.
    File(PathBuf),
    /// A Secret's `users.yaml` key.
    Secret {
        /// Secrets of the pod's namespace.
        api: Box<kube::Api<Secret>>,
        /// The Secret's name.
        name: String,
    },
}

impl UsersSource {
    /// The source the config names, if any.
    pub async fn from_config(cfg: &BrokerConfig) -> Result<Option<UsersSource>, UsersSourceError> {
        if let Some(path) = &cfg.auth_users_file {
            return Ok(Some(UsersSource::File(path.clone())));
        }
        let Some(name) = &cfg.auth_users_secret else {
            return Ok(None);
        };
        let namespace = pod_namespace().map_err(UsersSourceError::NoNamespace)?;
        let client = kube::Client::try_default()
            .await
            .map_err(UsersSourceError::Kubernetes)?;
        Ok(Some(UsersSource::Secret {
            api: Box::new(kube::Api::namespaced(client, &namespace)),
            name: name.clone(),
        }))
    }

    /// What the source is, for log lines.
    pub fn describe(&self) -> String {
        match self {
            UsersSource::File(path) => format!("file {}", path.display()),
            UsersSource::Secret { name, .. } => format!("Secret {name}"),
        }
    }

    /// The document's text, within [`READ_LIMIT`].
    pub async fn read_text(&self) -> Result<String, UsersSourceError> {
        tokio::time::timeout(READ_LIMIT, self.read_unlimited())
            .await
            .unwrap_or(Err(UsersSourceError::Timeout))
    }

    async fn read_unlimited(&self) -> Result<String, UsersSourceError> {
        match self {
            UsersSource::File(path) => {
                tokio::fs::read_to_string(path)
                    .await
                    .map_err(|source| UsersSourceError::File {
                        path: path.clone(),
                        source,
                    })
            }
            UsersSource::Secret { api, name } => {
                let secret = api
                    .get(name)
                    .await
                    .map_err(|source| UsersSourceError::Secret {
                        name: name.clone(),
                        source,
                    })?;
                let bytes = secret
                    .data
                    .and_then(|mut d| d.remove(SECRET_KEY))
                    .ok_or_else(|| UsersSourceError::NoKey(name.clone()))?;
                String::from_utf8(bytes.0).map_err(|_| UsersSourceError::NotUtf8)
            }
        }
    }

    /// Reads and compiles the document.
    pub async fn read(&self) -> Result<(String, Users), UsersSourceError> {
        let text = self.read_text().await?;
        let users = Users::parse(&text)?;
        Ok((text, users))
    }
}
