//! `starling bench quic-limit`: the ceiling. A tiny quinn echo/sink server
//! and a client in this process, on loopback, with the broker's TLS and
//! transport settings (a self-signed certificate from the broker's own
//! `TlsMaterial`, the broker's `server_config`, and the client windows of
//! the profile). Measures one-stream bulk throughput and echo round trips;
//! no Starling framing, batching or fan-out is involved.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::{Endpoint, VarInt};
use rustls::pki_types::CertificateDer;
use starling_broker::tls::{TlsMaterial, default_names};
use starling_client::{ALPN_PUBSUB, Profile, TransportTuning};
use starling_config::{ConfigOverrides, compose};

use super::args::QuicLimitArgs;
use super::error::BenchError;
use super::result::{Latency, QuicStats, RunConfig, RunResult, new_histogram};

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
    let mut result = RunResult::new("quic-limit", true, &a.name, "quic-limit", config);
    let (server, cert) = server(profile, a.socket_buffer)?;
    let addr = server.local_addr().map_err(quic("server address"))?;
    let serving = tokio::spawn(accept_loop(server.clone()));
    let client = client(profile, cert, a.socket_buffer)?;
    let conn = client
        .connect(addr, "localhost")
        .map_err(quic("connect"))?
        .await
        .map_err(quic("handshake"))?;

    let (bytes, secs) = bulk(&conn, a.payload, a.duration).await?;
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
    });
    Ok(result)
}

/// A UDP socket on 127.0.0.1 with `buffer`-byte kernel buffers (OS default when `None`).
fn socket(buffer: Option<usize>) -> Result<std::net::UdpSocket, BenchError> {
    let sock =
        std::net::UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0))).map_err(quic("bind"))?;
    if let Some(size) = buffer {
        let r = socket2::SockRef::from(&sock);
        r.set_recv_buffer_size(size).map_err(quic("SO_RCVBUF"))?;
        r.set_send_buffer_size(size).map_err(quic("SO_SNDBUF"))?;
    }
    Ok(sock)
}

fn endpoint(
    server: Option<quinn::ServerConfig>,
    buffer: Option<usize>,
) -> Result<Endpoint, BenchError> {
    let runtime =
        quinn::default_runtime().ok_or_else(|| BenchError::Quic("no async runtime".into()))?;
    Endpoint::new(
        quinn::EndpointConfig::default(),
        server,
        socket(buffer)?,
        runtime,
    )
    .map_err(quic("endpoint"))
}

/// A server endpoint on 127.0.0.1 with the broker's TLS and transport config.
fn server(
    profile: Profile,
    buffer: Option<usize>,
) -> Result<(Endpoint, CertificateDer<'static>), BenchError> {
    let material = TlsMaterial::self_signed(default_names()).map_err(quic("certificate"))?;
    let cert = material
        .chain
        .first()
        .cloned()
        .ok_or_else(|| BenchError::Quic("no certificate generated".into()))?;
    let cfg = compose(profile, None, &ConfigOverrides::default());
    let server_config = starling_broker::transport::server_config(&cfg, &material)
        .map_err(quic("server config"))?;
    Ok((endpoint(Some(server_config), buffer)?, cert))
}

/// A client endpoint trusting `cert`, with the SDK's publish-connection windows.
fn client(
    profile: Profile,
    cert: CertificateDer<'static>,
    buffer: Option<usize>,
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
    let t = TransportTuning::for_profile(profile);
    let varint = |v: u64| VarInt::from_u64(v).map_err(quic("window"));
    let mut transport = quinn::TransportConfig::default();
    transport
        .stream_receive_window(varint(t.event_stream_recv_window)?)
        .receive_window(varint(t.event_conn_recv_window)?)
        .keep_alive_interval(Some(t.keep_alive_interval));
    let mut cfg = quinn::ClientConfig::new(Arc::new(crypto));
    cfg.transport_config(Arc::new(transport));
    let mut endpoint = endpoint(None, buffer)?;
    endpoint.set_default_client_config(cfg);
    Ok(endpoint)
}

async fn accept_loop(endpoint: Endpoint) {
    while let Some(incoming) = endpoint.accept().await {
        tokio::spawn(async move {
            let Ok(conn) = incoming.await else { return };
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
