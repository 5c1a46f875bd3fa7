//! `starling bench quic-limit`: the ceiling. A tiny quinn echo/sink server
//! and a client in this process, on loopback, with the broker's TLS and
//! transport settings (a self-signed certificate from the broker's own
//! `TlsMaterial`, the broker's `server_config` and `listener`, and the client windows of
//! the profile). Measures one-stream bulk throughput and echo round trips;
//! no Starling framing, batching or fan-out is involved.
//!
//! Both endpoints take their path settings (socket buffers, `quic_initial_mtu`,
//! `quic_max_mtu_discovery`) from one composed broker config through
//! [`PathTuning`], as the broker's listener and the SDK's endpoints do.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::{Connection, Endpoint, VarInt};
use rustls::pki_types::CertificateDer;
use starling_broker::client_settings::{path_tuning, sdk_profile};
use starling_broker::tls::{TlsMaterial, default_names};
use starling_client::{ALPN_PUBSUB, PathTuning, TransportTuning};
use starling_config::{BrokerConfig, ConfigOverrides, Profile, compose};
use tokio::sync::mpsc;

use super::args::QuicLimitArgs;
use super::error::BenchError;
use super::result::{
    Latency, MtuChange, QuicPathStats, QuicStats, RunConfig, RunResult, new_histogram,
};

/// First byte of a stream: bulk sink.
const MODE_BULK: u8 = b'B';
/// First byte of a stream: echo.
const MODE_ECHO: u8 = b'E';

fn quic<E: std::fmt::Display>(what: &'static str) -> impl Fn(E) -> BenchError {
    move |e| BenchError::Quic(format!("{what}: {e}"))
}

/// Measures bulk throughput and round trips; see the module docs.
pub(crate) async fn run(a: &QuicLimitArgs, profile: Profile) -> Result<RunResult, BenchError> {
    if a.payload == 0 || a.rtt_payload == 0 || a.rtt_count == 0 || a.duration.is_zero() {
        return Err(BenchError::Usage(
            "--payload, --rtt-payload, --rtt-count and --duration must be greater than zero".into(),
        ));
    }
    let config = RunConfig {
        payload: Some(a.payload),
        duration_s: Some(a.duration.as_secs_f64()),
        count: Some(u64::from(a.rtt_count)),
        profile: Some(profile.to_string()),
        ..RunConfig::default()
    };
    let cfg = broker_config(a, profile)?;
    let path = path_tuning(&cfg);
    let mut result = RunResult::new("quic-limit", true, &a.name, "quic-limit", config);
    let (server, cert) = server(&cfg)?;
    let addr = server.local_addr().map_err(quic("server address"))?;
    let (accepted, mut accepted_rx) = mpsc::unbounded_channel();
    let serving = tokio::spawn(accept_loop(server.clone(), accepted));
    // The SDK settles each connection's datagram sizes towards its server's route.
    let client = client(profile, &path.towards(addr), cert)?;
    let conn = client
        .connect(addr, "localhost")
        .map_err(quic("connect"))?
        .await
        .map_err(quic("handshake"))?;
    let server_conn = accepted_rx
        .recv()
        .await
        .ok_or_else(|| BenchError::Quic("the server accepted no connection".into()))?;

    let (stop, stopped) = tokio::sync::oneshot::channel();
    let sampler = tokio::spawn(sample_mtu(conn.clone(), stopped));
    let (bytes, secs) = bulk(&conn, a.payload, a.duration).await?;
    let _ = stop.send(());
    let mut bulk_path = path_stats(&conn, &server_conn);
    bulk_path.mtu_changes = sampler.await.map_err(quic("MTU sampler"))?;
    let rtt = echo(&conn, a.rtt_payload, a.rtt_count).await?;
    conn.close(VarInt::from_u32(0), b"done");
    server.close(VarInt::from_u32(0), b"done");
    serving.abort();
    let _ = tokio::time::timeout(Duration::from_secs(1), client.wait_idle()).await;

    let mb_per_s = bytes as f64 / secs / 1e6;
    result.elapsed_s = secs;
    result.delivered_mb_per_s = mb_per_s;
    result.delivered_msgs_per_s = bytes as f64 / secs / a.payload as f64;
    result.latency_us = rtt;
    result.quic = Some(QuicStats {
        bulk_bytes: bytes,
        bulk_mb_per_s: mb_per_s,
        write_bytes: a.payload,
        rtt_us: rtt,
        rtt_payload: a.rtt_payload,
        socket_buffer: a.socket_buffer,
        initial_mtu: path.initial_mtu,
        max_mtu: path.max_mtu,
        bulk_path: Some(bulk_path.clone()),
    });
    // Printed here (stderr) so `--output json` keeps one JSON object on stdout.
    eprintln!(
        "  path         initial_mtu {} · max_mtu {} (accepts {}) · after bulk: current_mtu {} · \
         sent {} pkts / {} datagrams in {} sends · lost {} pkts ({} B) · {} congestion events · \
         cwnd {} B · rtt {:.0} µs · mtu probes {} sent {} lost · {} black holes · MTU (ms→bytes) {}",
        path.initial_mtu,
        path.max_mtu,
        path.max_udp_payload(),
        bulk_path.current_mtu,
        bulk_path.sent_packets,
        bulk_path.tx_datagrams,
        bulk_path.tx_ios,
        bulk_path.lost_packets,
        bulk_path.lost_bytes,
        bulk_path.congestion_events,
        bulk_path.cwnd,
        bulk_path.rtt_us,
        bulk_path.mtu_probes_sent,
        bulk_path.mtu_probes_lost,
        bulk_path.black_holes,
        bulk_path
            .mtu_changes
            .iter()
            .map(|c| format!("{:.0}→{}", c.ms, c.mtu))
            .collect::<Vec<_>>()
            .join(" "),
    );
    Ok(result)
}

/// The broker config both endpoints are built from: the profile with `--socket-buffer`,
/// `--initial-mtu` and `--max-mtu` as knob overrides, validated as the broker validates its
/// config, listening on an ephemeral loopback port.
pub(crate) fn broker_config(
    a: &QuicLimitArgs,
    profile: Profile,
) -> Result<BrokerConfig, BenchError> {
    let buffer = a.socket_buffer.map(|b| b as u64);
    let overrides = ConfigOverrides {
        quic_listen: Some(SocketAddr::from(([127, 0, 0, 1], 0))),
        quic_initial_mtu: a.initial_mtu,
        quic_max_mtu_discovery: a.max_mtu,
        udp_recv_buffer_bytes: buffer,
        udp_send_buffer_bytes: buffer,
        ..ConfigOverrides::default()
    };
    let cfg = compose(profile, None, &overrides);
    cfg.validate()
        .map_err(|e| BenchError::Usage(format!("--initial-mtu/--max-mtu/--socket-buffer: {e}")))?;
    Ok(cfg)
}

/// Samples `conn`'s MTU every 5 ms until `stop`; returns each change, the first one being the
/// MTU at the start.
async fn sample_mtu(
    conn: Connection,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Vec<MtuChange> {
    let start = Instant::now();
    let mut changes: Vec<MtuChange> = Vec::new();
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    loop {
        tokio::select! {
            _ = &mut stop => return changes,
            _ = tick.tick() => {}
        }
        let stats = conn.stats();
        let p = stats.path;
        if changes.last().is_none_or(|c| c.mtu != p.current_mtu) {
            changes.push(MtuChange {
                ms: start.elapsed().as_secs_f64() * 1e3,
                mtu: p.current_mtu,
                lost_packets: p.lost_packets,
                black_holes: p.black_holes_detected,
                tx_bytes: stats.udp_tx.bytes,
            });
        }
    }
}

/// The sender's path statistics and the receiver's datagram count, as quinn reports them.
fn path_stats(sender: &Connection, receiver: &Connection) -> QuicPathStats {
    let s = sender.stats();
    let r = receiver.stats();
    QuicPathStats {
        current_mtu: s.path.current_mtu,
        sent_packets: s.path.sent_packets,
        lost_packets: s.path.lost_packets,
        lost_bytes: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
        cwnd: s.path.cwnd,
        rtt_us: s.path.rtt.as_secs_f64() * 1e6,
        mtu_probes_sent: s.path.sent_plpmtud_probes,
        mtu_probes_lost: s.path.lost_plpmtud_probes,
        black_holes: s.path.black_holes_detected,
        tx_datagrams: s.udp_tx.datagrams,
        tx_ios: s.udp_tx.ios,
        tx_bytes: s.udp_tx.bytes,
        rx_datagrams: r.udp_rx.datagrams,
        rx_side_lost_packets: r.path.lost_packets,
        mtu_changes: Vec::new(),
    }
}

/// The broker's listener (`starling_broker::transport::listener`: the config's UDP buffers
/// and datagram sizes) with the broker's TLS and transport config.
fn server(cfg: &BrokerConfig) -> Result<(Endpoint, CertificateDer<'static>), BenchError> {
    let material = TlsMaterial::self_signed(default_names()).map_err(quic("certificate"))?;
    let cert = material
        .chain
        .first()
        .cloned()
        .ok_or_else(|| BenchError::Quic("no certificate generated".into()))?;
    let server_config =
        starling_broker::transport::server_config(cfg, &material).map_err(quic("server config"))?;
    let (endpoint, _) =
        starling_broker::transport::listener(cfg, server_config).map_err(quic("listener"))?;
    Ok((endpoint, cert))
}

/// A client endpoint trusting `cert`, with the SDK's publish-connection windows and `path`
/// (its endpoint and transport settings, as the SDK applies them).
fn client(
    profile: Profile,
    path: &PathTuning,
    cert: CertificateDer<'static>,
) -> Result<Endpoint, BenchError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(cert).map_err(quic("trust"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(quic("tls"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    crypto.alpn_protocols = vec![ALPN_PUBSUB.to_vec()];
    let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).map_err(quic("tls"))?;
    let t = TransportTuning::for_profile(sdk_profile(profile));
    let varint = |v: u64| VarInt::from_u64(v).map_err(quic("window"));
    let mut transport = quinn::TransportConfig::default();
    transport
        .stream_receive_window(varint(t.event_stream_recv_window)?)
        .receive_window(varint(t.event_conn_recv_window)?)
        .keep_alive_interval(Some(t.keep_alive_interval));
    path.apply(&mut transport);
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    let (mut endpoint, _) = path
        .endpoint(SocketAddr::from(([127, 0, 0, 1], 0)), None)
        .map_err(quic("endpoint"))?;
    endpoint.set_default_client_config(cfg);
    Ok(endpoint)
}

/// Serves every connection; each accepted connection is also sent on `accepted` (for its
/// statistics).
async fn accept_loop(endpoint: Endpoint, accepted: mpsc::UnboundedSender<Connection>) {
    while let Some(incoming) = endpoint.accept().await {
        let accepted = accepted.clone();
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
            let _ = accepted.send(conn.clone());
            while let Ok((send, recv)) = conn.accept_bi().await {
                tokio::spawn(serve_stream(send, recv));
            }
        });
    }
}

/// Bulk: count bytes to the end, answer the count. Echo: send back every chunk.
async fn serve_stream(mut send: quinn::SendStream, mut recv: quinn::RecvStream) {
    let mut mode = [0u8; 1];
    if recv.read_exact(&mut mode).await.is_err() {
        return;
    }
    match mode[0] {
        MODE_BULK => {
            let mut total = 0u64;
            while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, false).await {
                total += chunk.bytes.len() as u64;
            }
            let _ = send.write_all(&total.to_be_bytes()).await;
            let _ = send.finish();
        }
        MODE_ECHO => {
            while let Ok(Some(chunk)) = recv.read_chunk(usize::MAX, true).await {
                if send.write_chunk(chunk.bytes).await.is_err() {
                    return;
                }
            }
            let _ = send.finish();
        }
        _ => {}
    }
}

/// Writes `write`-byte chunks on one stream for `duration`; returns the bytes
/// the server counted and the seconds until it answered.
async fn bulk(
    conn: &quinn::Connection,
    write: usize,
    duration: Duration,
) -> Result<(u64, f64), BenchError> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(quic("open stream"))?;
    let chunk = Bytes::from(vec![0x5a; write]);
    let start = Instant::now();
    send.write_all(&[MODE_BULK]).await.map_err(quic("write"))?;
    while start.elapsed() < duration {
        send.write_chunk(chunk.clone())
            .await
            .map_err(quic("write"))?;
    }
    send.finish().map_err(quic("finish"))?;
    let mut count = [0u8; 8];
    recv.read_exact(&mut count)
        .await
        .map_err(quic("read count"))?;
    let secs = start.elapsed().as_secs_f64();
    Ok((u64::from_be_bytes(count), secs))
}

/// `count` echo round trips of `size` bytes on one stream.
async fn echo(conn: &quinn::Connection, size: usize, count: u32) -> Result<Latency, BenchError> {
    let (mut send, mut recv) = conn.open_bi().await.map_err(quic("open stream"))?;
    send.write_all(&[MODE_ECHO]).await.map_err(quic("write"))?;
    let message = vec![0x5a; size];
    let mut back = vec![0u8; size];
    let mut h = new_histogram();
    for _ in 0..count {
        let t0 = Instant::now();
        send.write_all(&message).await.map_err(quic("write"))?;
        recv.read_exact(&mut back)
            .await
            .map_err(quic("read echo"))?;
        let ns = u64::try_from(t0.elapsed().as_nanos()).unwrap_or(u64::MAX);
        h.saturating_record(ns.max(1));
    }
    let _ = send.finish();
    Ok(Latency::from_ns(&h))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(initial_mtu: Option<u16>, max_mtu: Option<u16>) -> QuicLimitArgs {
        QuicLimitArgs {
            payload: 16_384,
            duration: Duration::from_secs(1),
            rtt_count: 1,
            rtt_payload: 256,
            socket_buffer: None,
            max_mtu,
            initial_mtu,
            json: None,
            name: "quic-limit".into(),
        }
    }

    fn path(initial_mtu: Option<u16>, max_mtu: Option<u16>) -> Result<PathTuning, String> {
        broker_config(&args(initial_mtu, max_mtu), Profile::Balanced)
            .map(|c| path_tuning(&c))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn mtu_options_default_to_the_profile_and_are_validated_as_the_broker_does() {
        let t = path(None, None).expect("defaults");
        assert_eq!(
            (t.initial_mtu, t.max_mtu, t.max_udp_payload()),
            (1200, 6550, 6550)
        );
        let ethernet = path(None, Some(1452)).expect("quinn's bound");
        assert_eq!(ethernet.max_udp_payload(), 1472);
        let jumbo = path(None, Some(6550)).expect("jumbo");
        assert_eq!((jumbo.initial_mtu, jumbo.max_mtu), (1200, 6550));
        assert_eq!(
            jumbo.max_udp_payload(),
            6550,
            "the endpoints accept what is probed for"
        );
        let both = path(Some(6550), Some(6550)).expect("initial = max");
        assert_eq!(both.initial_mtu, 6550);
        assert!(
            path(Some(1199), None)
                .unwrap_err()
                .contains("quic_initial_mtu")
        );
        assert!(
            path(None, Some(6551))
                .unwrap_err()
                .contains("quic_max_mtu_discovery: must be between 1200 and 6550")
        );
        assert!(path(None, Some(6550)).is_ok());
        let msg = path(Some(1500), Some(1452)).unwrap_err();
        assert!(
            msg.contains("quic_initial_mtu: (1500) must not exceed quic_max_mtu_discovery (1452)"),
            "{msg}"
        );
    }

    /// The default path settings on real QUIC endpoints over loopback: discovery goes past
    /// Ethernet's 1472 because the route carries far more (`quic_max_mtu_from_route`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_default_settings_reach_large_datagrams_on_loopback() {
        let mut a = args(None, None);
        a.duration = Duration::from_millis(500);
        let result = run(&a, Profile::Balanced).await.expect("quic-limit run");
        let path = result
            .quic
            .and_then(|q| q.bulk_path)
            .expect("bulk path stats");
        assert!(
            path.current_mtu > 1472,
            "current MTU {} after 500 ms of bulk on loopback",
            path.current_mtu
        );
    }

    #[test]
    fn the_socket_buffer_option_sets_both_udp_buffers() {
        let mut a = args(None, None);
        a.socket_buffer = Some(4 << 20);
        let t = path_tuning(&broker_config(&a, Profile::Balanced).expect("config"));
        assert_eq!(
            (t.udp_recv_buffer_bytes, t.udp_send_buffer_bytes),
            (4 << 20, 4 << 20)
        );
    }
}
