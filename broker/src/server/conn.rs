//! One client connection: the version/feature handshake on the first stream (see
//! `server::handshake`), then a task per stream, routed by the stream's first frame
//! to its handler.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use starling_config::BrokerConfig;
use starling_proto::{ErrorCode, Frame, FrameDecoder, ReadError, features, write_frame};
use tokio::sync::watch;
use tracing::Instrument;

use crate::auth::{Auth, CLOSE_REVOKED};
use crate::cluster::{Cluster, Role};
use crate::metrics::Metrics;
use crate::server::admit::Slot;
use crate::server::buffers::Grant;
use crate::server::frames::{FrameBuf, read_frame_within};
use crate::server::link::Link;
use crate::server::{cache, handshake, log_transfer, publish, reply, subscribe};

/// What a connection uses: its own few handles, and those of the stream handlers it routes
/// streams to.
pub struct Handles {
    /// The effective config (handshake, first-frame timeout, receive windows).
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// The cluster (the epoch, `ClusterInfo`).
    pub cluster: Arc<Cluster>,
    /// Identities and permissions.
    pub auth: Arc<Auth>,
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
    /// The log transfer requests' handles.
    pub log_transfer: Arc<log_transfer::Handles>,
}

/// Application close codes sent with CONNECTION_CLOSE.
pub mod close_code {
    /// Normal close by the broker (shutdown).
    pub const SHUTDOWN: u32 = 0;
    /// The handshake failed.
    pub const HANDSHAKE_FAILED: u32 = 1;
    /// The connection's user was removed from the users table.
    pub const REVOKED: u32 = crate::auth::CLOSE_REVOKED;
}

/// How long a new connection has to complete the Starling handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves one accepted connection until it closes or the broker stops.
/// `slots` count the connection among the admitted ones until this returns, and among the
/// handshakes in progress until the Starling handshake is over; `grant` holds its windows
/// against the connection buffer budget until this returns.
pub async fn serve_connection(
    h: Arc<Handles>,
    connecting: quinn::Connecting,
    grant: Grant,
    slots: (Slot, Slot),
    stop: watch::Receiver<bool>,
) {
    let (_admitted, handshaking) = slots;
    let conn = match connecting.await {
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
    established(h, conn, conn_id, &grant, handshaking, stop)
        .instrument(span)
        .await;
}

/// Serves an established QUIC connection: the Starling handshake, then one task per stream,
/// each in a `stream` span under the connection's.
async fn established(
    h: Arc<Handles>,
    conn: quinn::Connection,
    conn_id: u64,
    grant: &Grant,
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
    // A cache connection's receive window is widened (or narrowed) to its own, never past what
    // the connection was granted.
    let cache_window = h.cfg.cache_conn_recv_window.min(grant.windows().recv);
    if is_cache && let Ok(w) = quinn::VarInt::from_u64(cache_window) {
        conn.set_receive_window(w);
    }
    tracing::debug!(is_cache, "connection open");

    let context = handshake::Context {
        decoder: &h.decoder,
        metrics: &h.metrics,
        cluster: &h.cluster,
        auth: &h.auth,
        server_id: &h.server_id,
        max_frame_bytes: h.cfg.max_frame_bytes,
    };
    let greeting = handshake::handshake(&conn, &context, grant.allowance());
    let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, greeting).await;
    drop(handshaking);
    match handshake {
        Ok(Ok((granted, principal))) => {
            let (access, _registered) = match h.auth.admit(conn_id, &principal, &conn) {
                Ok(admitted) => admitted,
                Err(revoked) => {
                    conn.close(CLOSE_REVOKED.into(), revoked.to_string().as_bytes());
                    h.metrics.connections.dec();
                    return;
                }
            };
            let role = Role::from_granted(granted);
            let publisher =
                publish::Publisher::new(Arc::clone(&h.publish), granted, role, access.clone());
            let link = Link {
                id: conn_id,
                quic: conn.clone(),
                granted,
                role,
                allowance: grant.allowance().clone(),
                subscriptions: Arc::default(),
                access,
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
            conn.close(
                close_code::HANDSHAKE_FAILED.into(),
                reason.to_string().as_bytes(),
            );
        }
        Err(_) => {
            tracing::info!("handshake timed out");
            conn.close(close_code::HANDSHAKE_FAILED.into(), b"handshake timeout");
        }
    }
    h.metrics.connections.dec();
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
    let mut buf = FrameBuf::new();
    let read_chunk = h.cfg.publish_chunk_bytes as usize;
    let first_frame_timeout = Duration::from_millis(h.cfg.stream_first_frame_timeout_ms);
    let mut first = true;
    loop {
        let read = read_frame_within(&mut recv, &mut buf, &h.decoder, read_chunk, &link.allowance);
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
                    link.allowance.clone(),
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
                    link,
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
            Frame::LogRead(_) | Frame::LogClaim(_) => {
                if log_transfer::serve_log_request(&h.log_transfer, &link, frame, &mut send)
                    .await
                    .is_err()
                {
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
