//! Where the member list comes from: a members file, or the operator's members ConfigMap read
//! through the Kubernetes API with the pod's service account. Both are polled every
//! `cluster_poll_interval_ms` (the broker's one poller, [`crate::watched`]); a list that fails
//! to read or parse is logged and the last good one stays in force.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use starling_config::BrokerConfig;
use tokio::sync::watch;

use super::pod_ips::PodIps;
use super::{Cluster, MemberSet, MembersError};
use crate::watched::{self, Watched};

/// ConfigMap key holding the member list.
pub const CONFIGMAP_KEY: &str = "members";
/// Where a pod finds its namespace when `POD_NAMESPACE` is unset.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Why a member list could not be read, or its source not set up.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// `cluster_members_configmap` without a namespace to read it in.
    #[error(
        "cluster_members_configmap needs the pod's namespace: POD_NAMESPACE is unset and {NAMESPACE_FILE}: {0}"
    )]
    NoNamespace(#[source] std::io::Error),
    /// No Kubernetes client.
    #[error("cannot reach the Kubernetes API: {0}")]
    Kubernetes(#[source] kube::Error),
    /// The members file could not be read.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The ConfigMap could not be read.
    #[error("ConfigMap {name}: {source}")]
    ConfigMap {
        /// Its name.
        name: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
    /// The ConfigMap has no member list.
    #[error("ConfigMap {0} has no {CONFIGMAP_KEY:?} key")]
    NoKey(String),
    /// The list does not parse.
    #[error("{0}")]
    Parse(#[from] MembersError),
    /// One read took longer than `READ_LIMIT`.
    #[error("no answer within {READ_LIMIT:?}")]
    Timeout,
    /// No read succeeded at start-up.
    #[error("no usable member list within {limit:?}: {last}")]
    FirstRead {
        /// How long start-up waited.
        limit: Duration,
        /// The last read's error.
        last: Box<SourceError>,
    },
}

/// The pod's namespace: `POD_NAMESPACE`, else the service account's namespace file.
pub fn pod_namespace() -> std::io::Result<String> {
    match std::env::var("POD_NAMESPACE") {
        Ok(ns) if !ns.is_empty() => Ok(ns),
        _ => std::fs::read_to_string(NAMESPACE_FILE).map(|s| s.trim().to_string()),
    }
}

/// A member list source.
pub enum Source {
    /// A local file.
    File(PathBuf),
    /// A ConfigMap's `members` key.
    ConfigMap {
        /// ConfigMaps of the pod's namespace.
        api: Box<kube::Api<ConfigMap>>,
        /// The ConfigMap's name.
        name: String,
        /// Pod lookups in the same namespace (see [`PodIps`]).
        pods: Box<PodIps>,
    },
}

/// Longest one read of the list may take before it is abandoned (and tried again at the next
/// poll).
const READ_LIMIT: Duration = Duration::from_secs(5);

impl Source {
    /// The source the config names, if any.
    pub async fn from_config(cfg: &BrokerConfig) -> Result<Option<Source>, SourceError> {
        if let Some(path) = &cfg.cluster_members_file {
            return Ok(Some(Source::File(path.clone())));
        }
        let Some(name) = &cfg.cluster_members_configmap else {
            return Ok(None);
        };
        let namespace = pod_namespace().map_err(SourceError::NoNamespace)?;
        let client = kube::Client::try_default()
            .await
            .map_err(SourceError::Kubernetes)?;
        Ok(Some(Source::ConfigMap {
            api: Box::new(kube::Api::namespaced(client.clone(), &namespace)),
            name: name.clone(),
            pods: Box::new(PodIps::new(client, &namespace)),
        }))
    }

    /// Pod lookups, when the members come from Kubernetes.
    pub fn pod_ips(&self) -> Option<PodIps> {
        match self {
            Source::File(_) => None,
            Source::ConfigMap { pods, .. } => Some(PodIps::clone(pods)),
        }
    }

    /// Reads and parses the list once, within [`READ_LIMIT`]: a request that hangs (an
    /// overloaded API server) must not freeze the view until the HTTP client gives up.
    pub async fn read(&self) -> Result<MemberSet, SourceError> {
        tokio::time::timeout(READ_LIMIT, self.read_unlimited())
            .await
            .unwrap_or(Err(SourceError::Timeout))
    }

    async fn read_unlimited(&self) -> Result<MemberSet, SourceError> {
        let text = match self {
            Source::File(path) => {
                tokio::fs::read_to_string(path)
                    .await
                    .map_err(|source| SourceError::File {
                        path: path.clone(),
                        source,
                    })?
            }
            Source::ConfigMap { api, name, .. } => {
                let cm = api
                    .get(name)
                    .await
                    .map_err(|source| SourceError::ConfigMap {
                        name: name.clone(),
                        source,
                    })?;
                cm.data
                    .and_then(|mut d| d.remove(CONFIGMAP_KEY))
                    .ok_or_else(|| SourceError::NoKey(name.clone()))?
            }
        };
        Ok(MemberSet::parse(&text)?)
    }

    /// Reads the list, retrying every `every` until it succeeds or `limit` passes.
    pub async fn first_read(
        &self,
        every: Duration,
        limit: Duration,
    ) -> Result<MemberSet, SourceError> {
        let deadline = Instant::now() + limit;
        loop {
            match self.read().await {
                Ok(set) => return Ok(set),
                Err(e) if Instant::now() >= deadline => {
                    return Err(SourceError::FirstRead {
                        limit,
                        last: Box::new(e),
                    });
                }
                Err(e) => tracing::warn!(error = %e, "member list not readable yet"),
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// The member list as the poller watches it ([`crate::watched`]): every list read is handed to
/// the view, which ignores one it already has.
struct MemberList {
    cluster: Arc<Cluster>,
    source: Source,
}

impl Watched for MemberList {
    type Doc = MemberSet;

    async fn read(&self) -> Result<MemberSet, String> {
        self.source.read().await.map_err(|e| e.to_string())
    }

    fn apply(&mut self, set: MemberSet) -> Result<(), String> {
        self.cluster.apply(set);
        Ok(())
    }

    fn failure(&self) -> String {
        "cannot read the member list; keeping the last one".into()
    }
}

/// Re-reads the list every `every` and applies changes until `stop`.
pub async fn poll(
    cluster: Arc<Cluster>,
    source: Source,
    every: Duration,
    stop: watch::Receiver<bool>,
) {
    watched::poll(MemberList { cluster, source }, every, stop).await;
}
