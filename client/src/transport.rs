//! QUIC plumbing: the client endpoint and the per-kind quinn client configs
//! (ALPN plus transport windows, timers and path settings, [`crate::PathTuning`]).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use quinn::{IdleTimeout, TransportConfig, VarInt};

use crate::ClientError;
use crate::config::ClientConfig;
use crate::tls::{ALPN_CACHE, ALPN_PUBSUB, quic_crypto};
use crate::tuning::TransportTuning;

/// What a connection is used for; decides ALPN and windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnKind {
    /// Publish connections (ALPN `starling/1`).
    Publish,
    /// Subscription connections (ALPN `starling/1`).
    Events,
    /// Cache connections (ALPN `starling-cache/1`).
    Cache,
}

impl ConnKind {
    /// Name for logs.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ConnKind::Publish => "publish",
            ConnKind::Events => "events",
            ConnKind::Cache => "cache",
        }
    }
}

/// The TLS settings of the three connection kinds and the transport tuning; the quinn client
/// config of one connection is made [`QuicConfigs::for_kind`] and its server's address, so
/// its path settings follow the route to that server ([`crate::PathTuning::towards`]).
#[derive(Clone)]
pub(crate) struct QuicConfigs {
    pubsub: Arc<quinn::crypto::rustls::QuicClientConfig>,
    cache: Arc<quinn::crypto::rustls::QuicClientConfig>,
    tuning: TransportTuning,
}

impl QuicConfigs {
    /// Builds TLS settings from the client config and checks that its transport settings
    /// make a transport config.
    pub(crate) fn new(cfg: &ClientConfig) -> Result<Self, ClientError> {
        let configs = QuicConfigs {
            pubsub: quic_crypto(&cfg.trust, &cfg.credentials, ALPN_PUBSUB)?,
            cache: quic_crypto(&cfg.trust, &cfg.credentials, ALPN_CACHE)?,
            tuning: cfg.transport,
        };
        for kind in [ConnKind::Publish, ConnKind::Cache] {
            let (stream, conn) = configs.windows(kind);
            transport(&configs.tuning, stream, conn)?;
        }
        Ok(configs)
    }

    /// The (stream, connection) receive windows of `kind`.
    fn windows(&self, kind: ConnKind) -> (u64, u64) {
        let t = &self.tuning;
        match kind {
            ConnKind::Publish | ConnKind::Events => {
                (t.event_stream_recv_window, t.event_conn_recv_window)
            }
            ConnKind::Cache => (t.cache_stream_recv_window, t.cache_conn_recv_window),
        }
    }

    /// The config for a connection of `kind` to `server`.
    pub(crate) fn for_kind(
        &self,
        kind: ConnKind,
        server: SocketAddr,
    ) -> Result<quinn::ClientConfig, ClientError> {
        let crypto = match kind {
            ConnKind::Publish | ConnKind::Events => Arc::clone(&self.pubsub),
            ConnKind::Cache => Arc::clone(&self.cache),
        };
        let mut tuning = self.tuning;
        tuning.path = tuning.path.towards(server);
        let (stream, conn) = self.windows(kind);
        let mut config = quinn::ClientConfig::new(crypto);
        config.transport_config(Arc::new(transport(&tuning, stream, conn)?));
        Ok(config)
    }
}

/// Transport parameters: receive windows, keep-alive, idle timeout and the path settings.
pub(crate) fn transport(
    t: &TransportTuning,
    stream_window: u64,
    conn_window: u64,
) -> Result<TransportConfig, ClientError> {
    let varint = |name: &str, v: u64| {
        VarInt::from_u64(v).map_err(|_| ClientError::Config(format!("{name} {v} is too large")))
    };
    let idle = IdleTimeout::try_from(t.idle_timeout)
        .map_err(|_| ClientError::Config("idle timeout is too large".into()))?;
    let mut tc = TransportConfig::default();
    tc.stream_receive_window(varint("stream receive window", stream_window)?)
        .receive_window(varint("connection receive window", conn_window)?)
        .keep_alive_interval(Some(t.keep_alive_interval))
        .max_idle_timeout(Some(idle));
    if let Some(window) = t.send_window {
        tc.send_window(window);
    }
    t.path.apply(&mut tc);
    Ok(tc)
}

/// A client endpoint bound to an ephemeral port of the server address's family, with the
/// tuning's UDP socket buffers.
pub(crate) fn endpoint_for(
    server: SocketAddr,
    t: &TransportTuning,
) -> Result<quinn::Endpoint, ClientError> {
    let local: SocketAddr = if server.is_ipv6() {
        (Ipv6Addr::UNSPECIFIED, 0).into()
    } else {
        (Ipv4Addr::UNSPECIFIED, 0).into()
    };
    let (endpoint, _) = t.path.endpoint(local, None).map_err(ClientError::Io)?;
    Ok(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Profile;
    use crate::Trust;

    #[test]
    fn every_profile_builds_transport_configs() {
        for p in Profile::ALL {
            let cfg = ClientConfig::new("127.0.0.1:1", Trust::Insecure).with_profile(*p);
            assert!(QuicConfigs::new(&cfg).is_ok(), "{p}");
        }
    }

    #[test]
    fn oversized_window_is_a_config_error() {
        let t = TransportTuning::for_profile(Profile::Balanced);
        assert!(matches!(
            transport(&t, u64::MAX, 1),
            Err(ClientError::Config(_))
        ));
    }
}
