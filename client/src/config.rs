//! [`ClientConfig`]: where to connect, whom to trust, who the client is and how big the pools
//! and QUIC windows are. Pool sizes and windows come from the client's [`Profile`]
//! (`profile.rs`).

use std::time::Duration;

use crate::credentials::{ADDRESS_FILE, CA_FILE, Credentials, CredentialsDir};
use crate::profile::Profile;
use crate::trust::Trust;
use crate::tuning::{ClientTuning, TransportTuning};
use crate::window::{MAX_PUBLISH_WINDOW, MIN_PUBLISH_WINDOW};

/// Default port of the broker's QUIC listener.
pub const DEFAULT_PORT: u16 = starling_proto::DEFAULT_QUIC_PORT;

/// Default of [`ClientConfig::publish_window_bytes`]: 8 MiB per publish stream.
pub const DEFAULT_PUBLISH_WINDOW: u64 = 8 * 1024 * 1024;

/// Default [`ClientConfig::cache_stream_depth`].
pub const DEFAULT_CACHE_STREAM_DEPTH: u32 = 64;

/// Largest accepted [`ClientConfig::cache_stream_depth`]: a stream's queue holds 1024 requests,
/// so a deeper stream would only make callers wait for room in it.
pub const MAX_CACHE_STREAM_DEPTH: u32 = 1024;

/// Everything [`Client::connect`](crate::Client::connect) needs.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// `host:port` of the broker; DNS names are resolved on every (re)connect.
    /// A bare host gets the default port 7400.
    pub server: String,
    /// TLS server name (SNI and certificate name check). Default: the host part
    /// of `server`, or `localhost` when that is an IP address.
    pub server_name: Option<String>,
    /// How the server certificate is checked.
    pub trust: Trust,
    /// Performance profile the pool sizes and windows came from.
    pub profile: Profile,
    /// Connection and stream pool sizes.
    pub tuning: ClientTuning,
    /// QUIC windows and timers.
    pub transport: TransportTuning,
    /// Name sent to the broker in the handshake (shows up in its logs).
    pub client_name: String,
    /// Limit on connecting plus handshaking one connection.
    pub connect_timeout: Duration,
    /// Limit on one request (an acked publish, a subscribe, a cache op), and on how long a
    /// fire-and-forget publish waits for room in its stream's queue and publish window.
    pub request_timeout: Duration,
    /// Most bytes of fire-and-forget publishes one publish stream keeps written but not yet
    /// acknowledged by the broker; a publish past it waits. One publish in each quarter window
    /// asks for the broker's ack (at the broker's `ack_level`), and its answer frees the bytes
    /// before it. It bounds how long a fast publisher's messages queue at the broker (about
    /// this many bytes per stream, instead of up to the broker's stream receive window) and
    /// what a client holds for a slow broker. `None`: unbounded, bounded only by QUIC flow
    /// control. Default [`DEFAULT_PUBLISH_WINDOW`]; accepted: [`MIN_PUBLISH_WINDOW`] (64 KiB)
    /// to [`MAX_PUBLISH_WINDOW`] (1 GiB). Acked publishes are bounded by their callers
    /// instead.
    pub publish_window_bytes: Option<u64>,
    /// Cache operations one cache stream carries at once before the next stream of the pool
    /// is used. Streams fill in order, the first connection's first, so a client with fewer
    /// operations in flight than this uses one stream of one connection, where requests and
    /// answers share writes and datagrams; the pool's other streams and connections open only
    /// when more operations are in flight at once. The pool's size (`cache_conn_pool` ×
    /// `cache_streams_per_conn`) stays the limit: past `depth` on every stream, operations go
    /// to the least loaded one. A stream's operations are answered in order, so a slow one
    /// (a key forwarded to another member) delays those behind it on its stream. `1`: one
    /// operation per stream while a stream is free, the most parallel and the most datagrams.
    /// Default [`DEFAULT_CACHE_STREAM_DEPTH`]; accepted: 1 to [`MAX_CACHE_STREAM_DEPTH`].
    pub cache_stream_depth: u32,
    /// Route each topic and cache key straight to the cluster member that owns it (learned
    /// with `ClusterInfo` from the first server). Off: every request goes to `server`, which
    /// forwards what it does not own.
    pub cluster_routing: bool,
    /// How often a routing client re-reads the cluster's membership.
    pub cluster_refresh: Duration,
    /// Who the client is to the broker (see [`Credentials`]); `Debug` never shows a token or
    /// a private key.
    pub credentials: Credentials,
}

impl ClientConfig {
    /// A config for `server` with the balanced profile.
    pub fn new(server: impl Into<String>, trust: Trust) -> Self {
        let profile = Profile::Balanced;
        ClientConfig {
            server: server.into(),
            server_name: None,
            trust,
            profile,
            tuning: profile.pools(),
            transport: profile.transport(),
            client_name: format!("starling-client/{}", env!("CARGO_PKG_VERSION")),
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            publish_window_bytes: Some(DEFAULT_PUBLISH_WINDOW),
            cache_stream_depth: DEFAULT_CACHE_STREAM_DEPTH,
            cluster_routing: true,
            cluster_refresh: Duration::from_secs(5),
            credentials: Credentials::None,
        }
    }

    /// Sends every request to `server` only, which forwards what it does not own.
    pub fn without_cluster_routing(mut self) -> Self {
        self.cluster_routing = false;
        self
    }

    /// Authenticates with `credentials`: a token sent in the handshake, or a client
    /// certificate presented in TLS.
    pub fn with_credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// Sets [`ClientConfig::publish_window_bytes`] (`None`: unbounded).
    pub fn with_publish_window(mut self, bytes: Option<u64>) -> Self {
        self.publish_window_bytes = bytes;
        self
    }

    /// Sets [`ClientConfig::cache_stream_depth`].
    pub fn with_cache_stream_depth(mut self, depth: u32) -> Self {
        self.cache_stream_depth = depth;
        self
    }

    /// Switches to `profile`, re-resolving pool sizes and QUIC windows.
    pub fn with_profile(mut self, profile: Profile) -> Self {
        self.profile = profile;
        self.tuning = profile.pools();
        self.transport = profile.transport();
        self
    }

    /// Sets the TLS server name.
    pub fn with_server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Sets the name sent in the handshake.
    pub fn with_client_name(mut self, name: impl Into<String>) -> Self {
        self.client_name = name.into();
        self
    }

    /// Checks the pool sizes, timeouts and datagram sizes.
    pub(crate) fn validate(&self) -> Result<(), crate::ClientError> {
        let (min_mtu, max_mtu) = starling_proto::quic::QUIC_MTU_RANGE;
        let path = &self.transport.path;
        for (name, value) in [("initial_mtu", path.initial_mtu), ("max_mtu", path.max_mtu)] {
            if !(min_mtu..=max_mtu).contains(&value) {
                return Err(crate::ClientError::Config(format!(
                    "transport.path.{name} must be between {min_mtu} and {max_mtu} (the broker's \
                     quic_initial_mtu / quic_max_mtu_discovery bounds), got {value}"
                )));
            }
        }
        if path.initial_mtu > path.max_mtu {
            return Err(crate::ClientError::Config(format!(
                "transport.path.initial_mtu ({}) must not exceed max_mtu ({})",
                path.initial_mtu, path.max_mtu
            )));
        }
        let t = &self.tuning;
        let pools = [
            ("pub_conn_pool", t.pub_conn_pool),
            ("pub_streams_per_conn", t.pub_streams_per_conn),
            ("event_conn_pool", t.event_conn_pool),
            ("cache_conn_pool", t.cache_conn_pool),
            ("cache_streams_per_conn", t.cache_streams_per_conn),
        ];
        for (name, value) in pools {
            if value == 0 {
                return Err(crate::ClientError::Config(format!(
                    "{name} must be at least 1"
                )));
            }
        }
        if let Some(w) = self.publish_window_bytes
            && !(MIN_PUBLISH_WINDOW..=MAX_PUBLISH_WINDOW).contains(&w)
        {
            return Err(crate::ClientError::Config(format!(
                "publish_window_bytes must be between {MIN_PUBLISH_WINDOW} and \
                 {MAX_PUBLISH_WINDOW} (or None for no window), got {w}"
            )));
        }
        if !(1..=MAX_CACHE_STREAM_DEPTH).contains(&self.cache_stream_depth) {
            return Err(crate::ClientError::Config(format!(
                "cache_stream_depth must be between 1 and {MAX_CACHE_STREAM_DEPTH}, got {}",
                self.cache_stream_depth
            )));
        }
        if self.connect_timeout.is_zero()
            || self.request_timeout.is_zero()
            || self.cluster_refresh.is_zero()
        {
            return Err(crate::ClientError::Config(
                "timeouts must be greater than zero".into(),
            ));
        }
        Ok(())
    }
}

impl CredentialsDir {
    /// A client config for the directory alone: its `address`, its `ca.crt` and its
    /// credentials. Fails when the directory has no `address` or no `ca.crt` (build the
    /// [`ClientConfig`] yourself and add [`ClientConfig::with_credentials`] then).
    pub fn into_config(self) -> Result<ClientConfig, crate::ClientError> {
        let address = self.address.ok_or_else(|| {
            crate::ClientError::Config(format!(
                "the credentials directory has no `{ADDRESS_FILE}` file: give the server address"
            ))
        })?;
        let trust = self.trust.ok_or_else(|| {
            crate::ClientError::Config(format!(
                "the credentials directory has no `{CA_FILE}` file: choose how to trust the server"
            ))
        })?;
        Ok(ClientConfig::new(address, trust).with_credentials(self.credentials))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_profile_reresolves_pools_and_windows() {
        let cfg = ClientConfig::new("h:1", Trust::Insecure).with_profile(Profile::Throughput);
        assert_eq!(cfg.profile, Profile::Throughput);
        assert_eq!(cfg.tuning, ClientTuning::for_profile(Profile::Throughput));
        assert_eq!(cfg.transport, Profile::Throughput.transport());
        assert_eq!(cfg.transport.event_stream_recv_window, 128 << 20);
        let back = cfg.with_profile(Profile::Latency);
        assert_eq!(back.tuning.pub_conn_pool, 2);
        assert_eq!(back.transport.event_conn_recv_window, 64 << 20);
    }

    #[test]
    fn validate_rejects_datagram_sizes_quinn_would_lose() {
        let mut cfg = ClientConfig::new("127.0.0.1:7400", Trust::Insecure);
        cfg.transport.path.max_mtu = 6550;
        assert!(cfg.validate().is_ok());
        cfg.transport.path.max_mtu = 8952;
        let err = cfg.validate().unwrap_err().to_string();
        assert!(
            err.contains("max_mtu must be between 1200 and 6550"),
            "{err}"
        );
        cfg.transport.path.max_mtu = 1452;
        cfg.transport.path.initial_mtu = 1500;
        let err = cfg.validate().unwrap_err().to_string();
        assert!(err.contains("initial_mtu (1500) must not exceed"), "{err}");
    }

    #[test]
    fn validate_rejects_empty_pools() {
        let mut cfg = ClientConfig::new("h:1", Trust::Insecure);
        assert!(cfg.validate().is_ok());
        cfg.tuning.cache_streams_per_conn = 0;
        let err = cfg.validate().map_err(|e| e.to_string());
        assert_eq!(
            err,
            Err("invalid configuration: cache_streams_per_conn must be at least 1".into())
        );
    }

    #[test]
    fn validate_bounds_the_cache_stream_depth() {
        let mut cfg = ClientConfig::new("h:1", Trust::Insecure);
        assert_eq!(cfg.cache_stream_depth, DEFAULT_CACHE_STREAM_DEPTH);
        for ok in [1, 64, MAX_CACHE_STREAM_DEPTH] {
            cfg = cfg.with_cache_stream_depth(ok);
            assert!(cfg.validate().is_ok(), "{ok}");
        }
        for bad in [0, MAX_CACHE_STREAM_DEPTH + 1, u32::MAX] {
            cfg = cfg.with_cache_stream_depth(bad);
            let err = cfg.validate().unwrap_err().to_string();
            assert!(
                err.contains("cache_stream_depth must be between 1 and 1024"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn validate_bounds_the_publish_window() {
        let mut cfg = ClientConfig::new("h:1", Trust::Insecure);
        assert_eq!(cfg.publish_window_bytes, Some(DEFAULT_PUBLISH_WINDOW));
        for ok in [None, Some(64 * 1024), Some(1 << 30)] {
            cfg.publish_window_bytes = ok;
            assert!(cfg.validate().is_ok(), "{ok:?}");
        }
        for bad in [0, 64 * 1024 - 1, (1 << 30) + 1] {
            cfg = cfg.with_publish_window(Some(bad));
            let err = cfg.validate().unwrap_err().to_string();
            assert!(
                err.contains("publish_window_bytes must be between 65536 and 1073741824"),
                "{err}"
            );
        }
    }

    #[test]
    fn credentials_are_kept_by_the_other_settings() {
        let cfg = ClientConfig::new("h:1", Trust::Insecure);
        assert_eq!(cfg.credentials, Credentials::None);
        let cfg = cfg
            .with_credentials(Credentials::token("t"))
            .without_cluster_routing()
            .with_publish_window(None)
            .with_profile(Profile::Latency);
        assert!(!cfg.cluster_routing);
        assert_eq!(cfg.publish_window_bytes, None);
        assert_eq!(cfg.credentials, Credentials::Token("t".into()));
    }

    #[test]
    fn fingerprint_hex_builds_trust() {
        let hex = "ab".repeat(32);
        assert_eq!(
            Trust::fingerprint_hex(&hex).ok(),
            Some(Trust::Fingerprint([0xab; 32]))
        );
    }
}
