//! The broker library's error type.

use std::net::SocketAddr;
use std::path::PathBuf;

use crate::cluster::source::SourceError;

/// Why the broker could not start or run.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The configuration is unusable.
    #[error("config: {0}")]
    Config(#[from] starling_config::ConfigError),
    /// A config value does not fit the QUIC transport.
    #[error("config: {field}: {value} is too large{}", if *.quic { " for QUIC" } else { "" })]
    TooLarge {
        /// The config key.
        field: &'static str,
        /// Its value.
        value: u64,
        /// Whether the limit is a QUIC variable-length integer's.
        quic: bool,
    },
    /// Clustering without a certificate every member shares.
    #[error(
        "config: clustering needs the same TLS certificate on every member: set tls_cert_file and tls_key_file"
    )]
    ClusterWithoutSharedTls,
    /// Clustering with a client CA but no peer certificate: the other members would refuse this
    /// broker's links.
    #[error(
        "config: a cluster whose brokers verify client certificates (auth_client_ca_file) needs cluster_peer_cert_file and cluster_peer_key_file: members grant PEER only to the peer certificate"
    )]
    ClusterWithoutPeerCertificate,
    /// TLS material could not be loaded or generated.
    #[error("tls: {0}")]
    Tls(#[from] TlsError),
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
    Membership(#[from] SourceError),
    /// `auth_mode: required` without a users document: nobody could connect.
    #[error("config: {0}")]
    NoUsersSource(#[from] crate::auth::NoUsersSource),
    /// The config's worst case does not fit the cgroup's memory limit.
    #[error("memory: {0}")]
    MemoryFit(#[from] starling_config::memory::MemoryFitError),
    /// The users document could not be read at start.
    #[error("users document: {0}")]
    Users(#[from] crate::auth::source::UsersSourceError),
    /// The topics document (`topics_file`) is missing or invalid at start.
    #[error("topics document: {0}")]
    Topics(#[from] crate::durable::topics_file::TopicsFileError),
    /// Metrics registration failed.
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}

/// Why the TLS material could not be loaded, generated or configured.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("{}: {source}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The certificate file holds no certificate.
    #[error("{}: no CERTIFICATE block found", .0.display())]
    NoCertificate(PathBuf),
    /// The key file holds no private key.
    #[error("{}: no private key block found", .0.display())]
    NoKey(PathBuf),
    /// The client CA verifier could not be built.
    #[error("client CA: {0}")]
    ClientVerifier(#[from] rustls::server::VerifierBuilderError),
    /// A self-signed certificate could not be generated.
    #[error("{0}")]
    Generate(#[from] rcgen::Error),
    /// rustls refused the material or the settings.
    #[error("{0}")]
    Rustls(#[from] rustls::Error),
    /// The rustls config cannot serve QUIC.
    #[error("{0}")]
    Quic(#[from] quinn::crypto::rustls::NoInitialCipherSuite),
}
