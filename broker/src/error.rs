//! The broker library's error type.

use std::net::SocketAddr;

/// Why the broker could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration is unusable.
    #[error("config: {0}")]
    Config(String),
    /// TLS material could not be loaded or generated.
    #[error("tls: {0}")]
    Tls(String),
    /// A listener could not bind.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The cluster's member list could not be read.
    #[error("cluster membership: {0}")]
    Membership(String),
    /// Metrics registration failed.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

impl From<starling_config::ConfigError> for BrokerError {
    fn from(e: starling_config::ConfigError) -> Self {
        BrokerError::Config(e.to_string())
    }
}
