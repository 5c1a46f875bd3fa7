//! Builds the quinn endpoint configuration from the broker config: windows, stream limits,
//! idle timeout and keep-alive, plus the path settings the SDK applies too (datagram sizes,
//! congestion controller, ACK frequency: `starling_client::PathTuning`, filled from the
//! broker's knobs by [`crate::client_settings::path_tuning`]). A connection granted
//! less than the configured windows (see `server::buffers`) gets [`transport_config_with`] its
//! [`Windows`]. [`listener`] binds the QUIC listener's UDP socket with the configured kernel
//! buffers.

use std::sync::Arc;
use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};
use starling_client::{PathTuning, UdpBuffers};
use starling_config::BrokerConfig;

use crate::client_settings::path_tuning;

use crate::error::{BrokerError, TlsError};
use crate::tls::{ClientCa, TlsMaterial};

fn varint(field: &'static str, v: u64) -> Result<VarInt, BrokerError> {
    VarInt::from_u64(v).map_err(|_| BrokerError::TooLarge {
        field,
        value: v,
        quic: true,
    })
}

/// The two connection-level windows a connection is granted (bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Windows {
    /// The connection receive window.
    pub recv: u64,
    /// The connection send window.
    pub send: u64,
}

impl Windows {
    /// The configured windows of event connections.
    pub fn configured(cfg: &BrokerConfig) -> Windows {
        Windows {
            recv: cfg.event_conn_recv_window,
            send: cfg.event_send_window,
        }
    }

    /// Both windows together: what the grant takes of the budget.
    pub fn total(self) -> u64 {
        self.recv.saturating_add(self.send)
    }
}

/// The transport parameters a client connection gets with the configured windows and path
/// settings (the discovery bound not yet settled by a peer's route).
pub fn transport_config(cfg: &BrokerConfig) -> Result<TransportConfig, BrokerError> {
    transport_config_with(cfg, Windows::configured(cfg), &path_tuning(cfg))
}

/// The transport parameters of a connection granted `windows` on a path tuned by `path` (the
/// broker's [`PathTuning`] `towards` the connection's peer); a stream's receive window is at
/// most the connection's.
pub fn transport_config_with(
    cfg: &BrokerConfig,
    windows: Windows,
    path: &PathTuning,
) -> Result<TransportConfig, BrokerError> {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(cfg.max_concurrent_streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(0));
    t.stream_receive_window(varint(
        "event_stream_recv_window",
        cfg.event_stream_recv_window.min(windows.recv),
    )?);
    t.receive_window(varint("event_conn_recv_window", windows.recv)?);
    t.send_window(windows.send);
    let idle = IdleTimeout::try_from(Duration::from_millis(cfg.idle_timeout_ms)).map_err(|_| {
        BrokerError::TooLarge {
            field: "idle_timeout_ms",
            value: cfg.idle_timeout_ms,
            quic: false,
        }
    })?;
    t.max_idle_timeout(Some(idle));
    t.keep_alive_interval(match cfg.keep_alive_interval_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    });
    path.apply(&mut t);
    Ok(t)
}

/// The QUIC listener: an endpoint serving `server` on `quic_listen`, its UDP socket with the
/// `udp_recv_buffer_bytes`/`udp_send_buffer_bytes` asked of the kernel, and what the kernel
/// granted (a capped buffer is logged as a warning, once).
pub fn listener(
    cfg: &BrokerConfig,
    server: quinn::ServerConfig,
) -> Result<(quinn::Endpoint, UdpBuffers), BrokerError> {
    path_tuning(cfg)
        .endpoint(cfg.quic_listen, Some(server))
        .map_err(|source| BrokerError::Bind {
            addr: cfg.quic_listen,
            source,
        })
}

/// The QUIC crypto config of `tls` (and client certificates verified against `client_ca`).
pub fn server_crypto(
    tls: &TlsMaterial,
    client_ca: Option<&ClientCa>,
) -> Result<Arc<quinn::crypto::rustls::QuicServerConfig>, BrokerError> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls.server_config(client_ca)?)
        .map_err(TlsError::from)?;
    Ok(Arc::new(crypto))
}

/// The quinn server config: TLS 1.3 material plus [`transport_config`], asking for no client
/// certificate.
pub fn server_config(
    cfg: &BrokerConfig,
    tls: &TlsMaterial,
) -> Result<quinn::ServerConfig, BrokerError> {
    server_config_with(cfg, tls, None)
}

/// [`server_config`], verifying client certificates against `client_ca` when given.
pub fn server_config_with(
    cfg: &BrokerConfig,
    tls: &TlsMaterial,
    client_ca: Option<&ClientCa>,
) -> Result<quinn::ServerConfig, BrokerError> {
    let mut server = quinn::ServerConfig::with_crypto(server_crypto(tls, client_ca)?);
    server.transport_config(Arc::new(transport_config(cfg)?));
    Ok(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_config::Profile;

    #[test]
    fn every_profile_builds_a_transport() {
        for p in Profile::ALL {
            assert!(transport_config(&p.config()).is_ok(), "{p}");
        }
    }

    #[test]
    fn path_knobs_reach_the_transport_and_the_defaults_are_quinns_but_the_bound() {
        let show = |cfg: &BrokerConfig| format!("{:?}", transport_config(cfg).expect("transport"));
        let quinn = format!("{:?}", TransportConfig::default());
        // The profiles' path settings are quinn's defaults except the discovery bound, 6550
        // (capped per connection by the route, `PathTuning::towards`); at quinn's 1452 they
        // are quinn's throughout.
        let mut at_quinns_bound = Profile::Balanced.config();
        at_quinns_bound.quic_max_mtu_discovery = 1452;
        let defaults = show(&at_quinns_bound);
        assert!(
            show(&Profile::Balanced.config()).contains("upper_bound: 6550"),
            "the profile's discovery bound"
        );
        // From `initial_mtu` to `ack_frequency_config`, quinn's Debug lists the path settings.
        let path = |text: &str| {
            text.split_once("initial_mtu")
                .and_then(|(_, rest)| rest.split_once("persistent_congestion_threshold"))
                .map(|(path, _)| path.to_string())
        };
        assert!(path(&quinn).is_some(), "{quinn}");
        assert_eq!(path(&defaults), path(&quinn));
        let mut cfg = Profile::Balanced.config();
        cfg.quic_initial_mtu = 1400;
        cfg.quic_max_mtu_discovery = 6550;
        cfg.quic_ack_eliciting_threshold = Some(4);
        cfg.quic_max_ack_delay_us = Some(5_000);
        let set = show(&cfg);
        for part in [
            "initial_mtu: 1400",
            "upper_bound: 6550",
            "ack_eliciting_threshold: 4",
            "max_ack_delay: Some(5ms)",
        ] {
            assert!(set.contains(part), "{part} missing from {set}");
        }
    }
}
