//! Where the member list comes from: a members file, or the operator's members ConfigMap read
//! through the Kubernetes API with the pod's service account. Both are polled every
//! `cluster_poll_interval_ms`; a list that fails to read or parse is logged and the last good
//! one stays in force.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use starling_config::BrokerConfig;
use tokio::sync::watch;

use super::pod_ips::PodIps;
use super::{Cluster, MemberSet};
use crate::error::BrokerError;

/// ConfigMap key holding the member list.
pub const CONFIGMAP_KEY: &str = "members";
/// Where a pod finds its namespace when `POD_NAMESPACE` is unset.
const NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

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
    pub async fn from_config(cfg: &BrokerConfig) -> Result<Option<Source>, BrokerError> {
        if let Some(path) = &cfg.cluster_members_file {
            return Ok(Some(Source::File(path.clone())));
        }
        let Some(name) = &cfg.cluster_members_configmap else {
            return Ok(None);
        };
        let namespace = match std::env::var("POD_NAMESPACE") {
            Ok(ns) if !ns.is_empty() => ns,
            _ => std::fs::read_to_string(NAMESPACE_FILE)
                .map(|s| s.trim().to_string())
                .map_err(|e| {
                    BrokerError::Membership(format!(
                        "cluster_members_configmap needs the pod's namespace: POD_NAMESPACE is unset and {NAMESPACE_FILE}: {e}"
                    ))
                })?,
        };
        let client = kube::Client::try_default().await.map_err(|e| {
            BrokerError::Membership(format!("cannot reach the Kubernetes API: {e}"))
        })?;
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
    pub async fn read(&self) -> Result<MemberSet, String> {
        tokio::time::timeout(READ_LIMIT, self.read_unlimited())
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {READ_LIMIT:?}")))
    }

    async fn read_unlimited(&self) -> Result<MemberSet, String> {
        let text = match self {
            Source::File(path) => tokio::fs::read_to_string(path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?,
            Source::ConfigMap { api, name, .. } => {
                let cm = api
                    .get(name)
                    .await
                    .map_err(|e| format!("ConfigMap {name}: {e}"))?;
                cm.data
                    .and_then(|mut d| d.remove(CONFIGMAP_KEY))
                    .ok_or_else(|| format!("ConfigMap {name} has no {CONFIGMAP_KEY:?} key"))?
            }
        };
        MemberSet::parse(&text).map_err(|e| e.to_string())
    }

    /// Reads the list, retrying every `every` until it succeeds or `limit` passes.
    pub async fn first_read(
        &self,
        every: Duration,
        limit: Duration,
    ) -> Result<MemberSet, BrokerError> {
        let deadline = Instant::now() + limit;
        loop {
            match self.read().await {
                Ok(set) => return Ok(set),
                Err(e) if Instant::now() >= deadline => {
                    return Err(BrokerError::Membership(format!(
                        "no usable member list within {limit:?}: {e}"
                    )));
                }
                Err(e) => tracing::warn!(error = %e, "member list not readable yet"),
            }
            tokio::time::sleep(every).await;
        }
    }
}

/// Re-reads the list every `every` and applies changes until `stop`.
pub async fn poll(
    cluster: Arc<Cluster>,
    source: Source,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut failing = false;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        match source.read().await {
            Ok(set) => {
                failing = false;
                cluster.apply(set);
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "cannot read the member list; keeping the last one");
            }
            Err(_) => {}
        }
    }
}
