//! One client connection: the version/feature handshake on the first stream, then a task per
//! stream, routed by the stream's first frame.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use starling_config::BrokerConfig;
use starling_proto::{
    ErrorCode, Frame, FrameDecoder, HelloOk, PROTOCOL_VERSION, ReadError, features, read_frame,
    write_frame,
};
use tokio::sync::watch;
use tracing::Instrument;

use crate::cluster::{Cluster, Role};
use crate::metrics::Metrics;
use crate::server::admit::Slot;
use crate::server::link::Link;
use crate::server::{cache, publish, reply, subscribe};

/// What a connection uses: its own few handles, and those of the stream handlers it routes
/// streams to.
pub struct Handles {
    /// The effective config (handshake, first-frame timeout, receive windows).
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// The cluster (the peer token, the epoch, `ClusterInfo`).
    pub cluster: Arc<Cluster>,
    /// Name sent in `HelloOk`.
    pub server_id: String,
    /// Connection id source.
    pub next_conn_id: AtomicU64,
    /// The publish streams' handles.
    pub publish: Arc<publish::Handles>,
    /// The subscription streams' handles.
    pub subscribe: Arc<subscribe::Handles>,
    /// The cache streams' handles.
    pub cache: Arc<cache::Handles>,
}

/// Application close codes sent with CONNECTION_CLOSE.
pub mod close_code {
    /// Normal close by the broker (shutdown).
    pub const SHUTDOWN: u32 = 0;
    /// The handshake failed.
    pub const HANDSHAKE_FAILED: u32 = 1;
}

/// How long a new connection has to complete the Starling handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Features this broker offers. `AUTH_TOKEN` is granted only to a peer presenting the
/// cluster token; `CLUSTER` marks a routing client.
pub const OFFERED_FEATURES: u64 =
    features::BATCH_PUBLISH | features::CACHE | features::CLUSTER | features::AUTH_TOKEN;

/// Serves one incoming connection until it closes or the broker stops.
/// `slots` count the connection among the admitted ones until this returns, and among the
/// handshakes in progress until the Starling handshake is over.
pub async fn serve_connection(
    h: Arc<Handles>,
    incoming: quinn::Incoming,
    slots: (Slot, Slot),
    stop: watch::Receiver<bool>,
) {
    let (_admitted, handshaking) = slots;
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "QUIC handshake failed");
            return;
        }
    };
    let conn_id = h.next_conn_id.fetch_add(1, Ordering::Relaxed);
    let remote = conn.remote_address();
    // Every log line of this connection and of its streams carries the id and the address once,
    // through this span.
    let span = tracing::info_span!("conn", id = conn_id, %remote);
    established(h, conn, conn_id, handshaking, stop)
        .instrument(span)
        .await;
}

/// Serves an established QUIC connection: the Starling handshake, then one task per stream,
/// each in a `stream` span under the connection's.
async fn established(
    h: Arc<Handles>,
    conn: quinn::Connection,
    conn_id: u64,
    handshaking: Slot,
    mut stop: watch::Receiver<bool>,
) {
    h.metrics.connections.inc();
    h.metrics.connections_total.inc();
    let is_cache = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol)
        .is_some_and(|p| p == starling_proto::alpn::CACHE);
    if is_cache && let Ok(w) = quinn::VarInt::from_u64(h.cfg.cache_conn_recv_window) {
        conn.set_receive_window(w);
    }
    tracing::debug!(is_cache, "connection open");

    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake(&h, &conn)).await;
    drop(handshaking);
    match handshake {
        Ok(Ok(granted)) => {
            let role = Role::from_granted(granted);
            let publisher = publish::Publisher::new(Arc::clone(&h.publish), granted, role);
            let link = Link {
                id: conn_id,
                quic: conn.clone(),
                granted,
                role,
            };
            loop {
                tokio::select! {
                    stream = conn.accept_bi() => match stream {
                        Ok((send, recv)) => {
                            let h = Arc::clone(&h);
                            let publisher = publisher.clone();
                            let span = tracing::debug_span!("stream", id = send.id().index());
                            tokio::spawn(
                                route_stream(h, link.clone(), publisher, send, recv)
                                    .instrument(span),
                            );
                        }
                        Err(e) => {
                            tracing::debug!(error = %e, "connection closed");
                            break;
                        }
                    },
                    _ = stop.changed() => break,
                }
            }
        }
        Ok(Err(reason)) => {
            tracing::info!(%reason, "handshake refused");
            // Give the Error frame a moment to reach the client before closing.
            tokio::time::sleep(Duration::from_millis(50)).await;
            conn.close(close_code::HANDSHAKE_FAILED.into(), reason.as_bytes());
        }
        Err(_) => {
            tracing::info!("handshake timed out");
            conn.close(close_code::HANDSHAKE_FAILED.into(), b"handshake timeout");
        }
    }
    h.metrics.connections.dec();
}

/// Reads `Hello` on the first stream and answers `HelloOk` (returning the granted features), or
/// an `Error` and the reason.
async fn handshake(h: &Handles, conn: &quinn::Connection) -> Result<u64, String> {
    let (mut send, mut recv) = conn.accept_bi().await.map_err(|e| e.to_string())?;
    let mut buf = BytesMut::new();
    let frame = read_frame(&mut recv, &mut buf, &h.decoder, 4096).await;
    let hello = match frame {
        Ok(Some(Frame::Hello(h))) => h,
        Ok(Some(other)) => {
            let (code, msg) = (
                ErrorCode::InvalidRequest,
                format!("expected Hello, got {}", other.name()),
            );
            reply::error(&mut send, &h.metrics, 0, code, msg.clone()).await;
            return Err(msg);
        }
        Ok(None) => return Err("stream closed before Hello".into()),
        Err(e) => {
            let msg = e.to_string();
            reply::read_failed(&mut send, &h.metrics, &e).await;
            return Err(msg);
        }
    };
    let Some(version) = hello.negotiate_version() else {
        let msg = format!(
            "client speaks protocol versions {}..={}, broker speaks {PROTOCOL_VERSION}",
            hello.min_version, hello.max_version
        );
        reply::error(
            &mut send,
            &h.metrics,
            0,
            ErrorCode::UnsupportedVersion,
            msg.clone(),
        )
        .await;
        let _ = send.finish();
        return Err(msg);
    };
    let mut granted = hello.features & OFFERED_FEATURES;
    if granted & features::AUTH_TOKEN != 0 {
        let presented = hello.auth_token.as_deref().unwrap_or_default();
        if !h.cluster.token_matches(presented) {
            let msg = "not a member of this cluster: the peer token does not match".to_string();
            reply::error(
                &mut send,
                &h.metrics,
                0,
                ErrorCode::Unauthorized,
                msg.clone(),
            )
            .await;
            let _ = send.finish();
            return Err(msg);
        }
        // A peer is served as itself, never routed.
        granted &= !features::CLUSTER;
    }
    let ok = Frame::HelloOk(HelloOk {
        version,
        features: granted,
        server_id: h.server_id.clone(),
        max_frame_bytes: h.cfg.max_frame_bytes,
        epoch: h.cluster.epoch(),
    });
    write_frame(&mut send, &ok)
        .await
        .map_err(|e| e.to_string())?;
    let _ = send.finish();
    tracing::debug!(client = %loggable_name(&hello.client_name), version, granted, "handshake complete");
    Ok(granted)
}

/// Longest prefix of a client's self-chosen name (in characters) that reaches the logs.
const LOGGED_NAME_CHARS: usize = 64;

/// A client's self-chosen `Hello.client_name` as it may appear in a log line: at most
/// [`LOGGED_NAME_CHARS`] characters, with newlines, other control characters and quotes escaped,
/// so that a name can neither forge a log line nor flood the log.
fn loggable_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .take(LOGGED_NAME_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    if name.chars().nth(LOGGED_NAME_CHARS).is_some() {
        out.push('…');
    }
    out
}

/// Closes a stream whose first frame did not arrive in time: an `Error` frame saying so, then
/// the stream is finished and its receive side stopped, which releases whatever partial frame
/// it had buffered.
async fn first_frame_timed_out(
    h: &Handles,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    after: Duration,
) {
    h.metrics.streams_timed_out.inc();
    let msg = format!("no complete first frame within {} ms", after.as_millis());
    reply::error(&mut send, &h.metrics, 0, ErrorCode::InvalidRequest, msg).await;
    let _ = send.finish();
    let _ = recv.stop(quinn::VarInt::from_u32(u32::from(
        ErrorCode::InvalidRequest.as_u16(),
    )));
}

/// Reads a stream's first frame (within `stream_first_frame_timeout_ms`) and hands the stream to
/// the matching handler. A stream that stays open for Pings or cluster-info requests waits for
/// its next request without a limit: it is one of the connection's `max_concurrent_streams`.
async fn route_stream(
    h: Arc<Handles>,
    link: Link,
    publisher: publish::Publisher,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let mut buf = BytesMut::new();
    let read_chunk = h.cfg.publish_chunk_bytes as usize;
    let first_frame_timeout = Duration::from_millis(h.cfg.stream_first_frame_timeout_ms);
    let mut first = true;
    loop {
        let read = read_frame(&mut recv, &mut buf, &h.decoder, read_chunk);
        let frame = if first {
            first = false;
            match tokio::time::timeout(first_frame_timeout, read).await {
                Ok(read) => read,
                Err(_) => {
                    return first_frame_timed_out(&h, send, recv, first_frame_timeout).await;
                }
            }
        } else {
            read.await
        };
        let frame = match frame {
            Ok(Some(f)) => f,
            Ok(None) => {
                let _ = send.finish();
                return;
            }
            Err(ReadError::Io(_)) => return,
            Err(e) => {
                reply::read_failed(&mut send, &h.metrics, &e).await;
                return;
            }
        };
        match frame {
            Frame::Publish(_) | Frame::PublishBatch(_) => {
                return publish::serve_publish_stream(
                    Arc::clone(&h.publish),
                    publisher,
                    frame,
                    send,
                    recv,
                    buf,
                )
                .await;
            }
            Frame::Subscribe(s) => {
                return subscribe::serve_subscription(
                    Arc::clone(&h.subscribe),
                    link,
                    s,
                    send,
                    recv,
                    buf,
                )
                .await;
            }
            Frame::CachePut(_) | Frame::CacheGet(_) | Frame::CacheDelete(_)
                if link.granted & features::CACHE == 0 =>
            {
                let msg = "the CACHE feature was not requested in Hello";
                reply::error(
                    &mut send,
                    &h.metrics,
                    reply::request_id(&frame),
                    ErrorCode::InvalidRequest,
                    msg,
                )
                .await;
            }
            Frame::CachePut(_) | Frame::CacheGet(_) | Frame::CacheDelete(_) => {
                return cache::serve_cache_stream(
                    Arc::clone(&h.cache),
                    link.role,
                    frame,
                    send,
                    recv,
                    buf,
                )
                .await;
            }
            Frame::Ping(p) => {
                if write_frame(&mut send, &Frame::Pong(p)).await.is_err() {
                    return;
                }
            }
            Frame::ClusterInfoRequest(r) => {
                let info = Frame::ClusterInfo(h.cluster.info(r.request_id));
                if write_frame(&mut send, &info).await.is_err() {
                    return;
                }
            }
            other => {
                let (code, msg) = reply::unexpected(&other, "new");
                reply::error(&mut send, &h.metrics, reply::request_id(&other), code, msg).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::loggable_name;

    #[test]
    fn a_client_name_cannot_forge_or_flood_log_lines() {
        assert_eq!(loggable_name("starling-cli/0.1"), "starling-cli/0.1");
        let forged = "x\n2026-11-24T00:00:00Z  INFO admin logged in\r\u{1b}[2J";
        let logged = loggable_name(forged);
        assert!(!logged.contains('\n') && !logged.contains('\r') && !logged.contains('\u{1b}'));
        assert!(logged.starts_with("x\\n2026"), "{logged}");
        let long = "a".repeat(10_000);
        assert_eq!(loggable_name(&long), format!("{}…", "a".repeat(64)));
    }
}
