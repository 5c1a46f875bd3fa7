//! Harness for the end-to-end suite: a kube client for the cluster named by `KUBECONFIG`,
//! one namespace per test, BrokerCluster and BrokerUser helpers, pod and HTTP probes, and the
//! Rust SDK pointed at a BrokerCluster's client Service, authenticated as a BrokerUser (brokers
//! require authentication by default, and the suite runs with it on).
//!
//! The suite needs a real cluster with the operator installed (`make e2e` brings one up on this
//! machine). Without `KUBECONFIG` every test fails with a message saying so: an e2e test that
//! silently passes without a cluster would prove nothing.

pub mod credentials;
pub mod http;
pub mod kube_env;
pub mod pod_logs;
pub mod replicas;
pub mod topics;
pub mod users;
pub mod wait;

pub use kube_env::{Env, TestNamespace};

use std::time::Duration;

/// Default time limit for a BrokerCluster to become Ready on a 2-core node.
pub const READY_TIMEOUT: Duration = Duration::from_secs(180);

/// Errors of the harness. Tests mostly `expect` them with context.
#[derive(Debug, thiserror::Error)]
pub enum E2eError {
    /// The environment is not set up for e2e.
    #[error("e2e environment: {0}")]
    Env(String),
    /// An API server call failed.
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    /// A condition was not reached in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
    /// An HTTP probe failed.
    #[error("http {0}")]
    Http(String),
}
