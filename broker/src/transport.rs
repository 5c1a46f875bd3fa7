//! Builds the quinn endpoint configuration from the broker config: windows, stream limits,
//! idle timeout and keep-alive.

use std::sync::Arc;
use std::time::Duration;

use quinn::{IdleTimeout, TransportConfig, VarInt};
use starling_config::BrokerConfig;

use crate::error::{BrokerError, TlsError};
use crate::tls::TlsMaterial;

fn varint(field: &'static str, v: u64) -> Result<VarInt, BrokerError> {
    VarInt::from_u64(v).map_err(|_| BrokerError::TooLarge {
        field,
        value: v,
        quic: true,
    })
}

/// The transport parameters every client connection gets.
pub fn transport_config(cfg: &BrokerConfig) -> Result<TransportConfig, BrokerError> {
    let mut t = TransportConfig::default();
    t.max_concurrent_bidi_streams(VarInt::from_u32(cfg.max_concurrent_streams));
    t.max_concurrent_uni_streams(VarInt::from_u32(0));
    t.stream_receive_window(varint(
        "event_stream_recv_window",
        cfg.event_stream_recv_window,
    )?);
    t.receive_window(varint(
        "event_conn_recv_window",
        cfg.event_conn_recv_window,
    )?);
    t.send_window(cfg.event_send_window);
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
    Ok(t)
}

/// The quinn server config: TLS 1.3 material plus [`transport_config`].
pub fn server_config(
    cfg: &BrokerConfig,
    tls: &TlsMaterial,
) -> Result<quinn::ServerConfig, BrokerError> {
    let crypto = quinn::crypto::rustls::QuicServerConfig::try_from(tls.server_config()?)
        .map_err(TlsError::from)?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
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
}
