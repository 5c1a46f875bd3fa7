//! One client connection: the version/feature handshake on the first stream (see
//! `server::handshake`), then a task per stream, routed by the stream's first frame
//! to its handler.
//!
//! Until its `Hello` succeeds a connection is pending (`server::admit`): it holds a pending
//! slot, a small fixed grant (8 KiB windows, one stream, a `Hello` of at most 4 KiB) and has
//! `handshake_timeout_ms` for TLS and `Hello` together. Only then does it reserve its windows
//! from the connection buffer budget (`server::buffers`), which are applied to the live
//! connection together with its stream limit.

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use starling_config::BrokerConfig;
use starling_config::validate::{HANDSHAKE_FRAME_BYTES, PENDING_CONNECTION_WINDOW};
use starling_proto::{ErrorCode, Frame, FrameDecoder, ReadError, features, write_frame};
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::Instrument;

use crate::auth::{Auth, CLOSE_REVOKED, Principal};
use crate::cluster::{Cluster, Role};
use crate::metrics::Metrics;
use crate::server::admit::{PeerSources, PendingSlot, Refusal, Slot};
use crate::server::buffers::{Buffers, Grant};
use crate::server::frames::{Allowance, FrameBuf, read_frame_within};
use crate::server::handshake::HandshakeError;
use crate::server::link::Link;
use crate::server::{
    cache, consume, handshake, log_transfer, publish, replica_rpc, reply, subscribe,
};

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
    /// The Raft RPC streams' handles.
    pub replica_rpc: Arc<replica_rpc::Handles>,
    /// The durable consumer streams' handles.
    pub consume: Arc<consume::Handles>,
}

/// Application close codes sent with CONNECTION_CLOSE.
pub mod close_code {
    /// Normal close by the broker (shutdown).
    pub const SHUTDOWN: u32 = 0;
    /// The handshake failed (or did not complete within `handshake_timeout_ms`).
    pub const HANDSHAKE_FAILED: u32 = 1;
    /// The connection's user was removed from the users table.
    pub const REVOKED: u32 = crate::auth::CLOSE_REVOKED;
    /// The handshake succeeded but `connection_buffer_budget_bytes` had no room for the
    /// connection's windows; the client may try again.
    pub const BUSY: u32 = 3;
}

/// What admission gave a connection attempt, held by its task.
pub struct Admitted {
    /// Counts the connection among the admitted ones until it ends.
    pub connection: Slot,
    /// Counts it among the pending handshakes until its `Hello` succeeded (or it failed).
    pub pending: PendingSlot,
    /// The connection buffer budget its full grant is reserved from after `Hello`.
    pub buffers: Arc<Buffers>,
    /// Where a connection that authenticated as a peer is remembered to have come from.
    pub peer_sources: Arc<PeerSources>,
}

/// Serves one accepted connection until it closes or the broker stops. TLS and `Hello` must
/// both complete within `handshake_timeout_ms` of the attempt's admission.
pub async fn serve_connection(
    h: Arc<Handles>,
    connecting: quinn::Connecting,
    admitted: Admitted,
    stop: watch::Receiver<bool>,
) {
    let deadline = Instant::now() + Duration::from_millis(h.cfg.handshake_timeout_ms);
    let conn = match tokio::time::timeout_at(deadline, connecting).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "QUIC handshake failed");
            return;
        }
        Err(_) => {
            // Dropping `connecting` abandons the handshake and its state.
            h.metrics
                .quic_refused
                .with_label_values(&[Refusal::HandshakeTimeout.label()])
                .inc();
            tracing::debug!("QUIC handshake timed out");
            return;
        }
    };
    let conn_id = h.next_conn_id.fetch_add(1, Ordering::Relaxed);
    let remote = conn.remote_address();
    // Every log line of this connection and of its streams carries the id and the address once,
    // through this span.
    let span = tracing::info_span!("conn", id = conn_id, %remote);
    established(h, conn, conn_id, admitted, deadline, stop)
        .instrument(span)
        .await;
}

/// Applies a full grant to a connection that was accepted with the pending one: its windows
/// (a cache connection's receive window is its own, never past the grant) and its stream limit.
fn apply_grant(cfg: &BrokerConfig, conn: &quinn::Connection, grant: &Grant, is_cache: bool) {
    let windows = grant.windows();
    let recv = match is_cache {
        true => cfg.cache_conn_recv_window.min(windows.recv),
        false => windows.recv,
    };
    if let Ok(w) = quinn::VarInt::from_u64(recv) {
        conn.set_receive_window(w);
    }
    conn.set_send_window(windows.send);
    conn.set_max_concurrent_bi_streams(quinn::VarInt::from_u32(cfg.max_concurrent_streams));
}

/// Serves an established QUIC connection: the Starling handshake (by `deadline`), its full
/// grant, then one task per stream, each in a `stream` span under the connection's.
async fn established(
    h: Arc<Handles>,
    conn: quinn::Connection,
    conn_id: u64,
    admitted: Admitted,
    deadline: Instant,
    mut stop: watch::Receiver<bool>,
) {
    let Admitted {
        connection: _admitted,
        pending,
        buffers,
        peer_sources,
    } = admitted;
    h.metrics.connections.inc();
    h.metrics.connections_total.inc();
    let is_cache = conn
        .handshake_data()
        .and_then(|d| d.downcast::<quinn::crypto::rustls::HandshakeData>().ok())
        .and_then(|d| d.protocol)
        .is_some_and(|p| p == starling_proto::alpn::CACHE);
    tracing::debug!(is_cache, "connection open");

    // Before authentication: a `Hello` of at most `HANDSHAKE_FRAME_BYTES`, read within the
    // pending grant's allowance.
    let hello_decoder = FrameDecoder::new(h.cfg.max_frame_bytes.min(HANDSHAKE_FRAME_BYTES));
    let hello_allowance = Allowance::new(Allowance::bytes(
        PENDING_CONNECTION_WINDOW,
        hello_decoder.max_frame_bytes(),
    ));
    let context = handshake::Context {
        decoder: &hello_decoder,
        metrics: &h.metrics,
        cluster: &h.cluster,
        auth: &h.auth,
        server_id: &h.server_id,
        max_frame_bytes: h.cfg.max_frame_bytes,
    };
    // Once authenticated, the connection's windows come out of the budget and are applied
    // before `HelloOk` is sent.
    let admit = || {
        let grant = buffers.reserve()?;
        apply_grant(&h.cfg, &conn, &grant, is_cache);
        Some(grant)
    };
    let greeting = handshake::handshake(&conn, &context, &hello_allowance, admit);
    let handshake = tokio::time::timeout_at(deadline, greeting).await;
    drop(pending);
    match handshake {
        Ok(Ok((granted, principal, grant))) => {
            if matches!(principal, Principal::Peer) {
                let ip: IpAddr = conn.remote_address().ip();
                peer_sources.learn(ip);
            }
            serve_streams(&h, &conn, conn_id, granted, principal, &grant, &mut stop).await;
            // Its reply inbox and reply grants end with it.
            h.subscribe.topics.inboxes().forget(conn_id);
        }
        Ok(Err(HandshakeError::Busy)) => {
            h.metrics
                .quic_refused
                .with_label_values(&[Refusal::BufferBudget.label()])
                .inc();
            tracing::info!("connection buffer budget full after the handshake");
            tokio::time::sleep(Duration::from_millis(50)).await;
            conn.close(close_code::BUSY.into(), b"connection buffer budget full");
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
            h.metrics
                .quic_refused
                .with_label_values(&[Refusal::HandshakeTimeout.label()])
                .inc();
            tracing::info!("handshake timed out");
            conn.close(close_code::HANDSHAKE_FAILED.into(), b"handshake timeout");
        }
    }
    h.metrics.connections.dec();
}

/// An authenticated connection's streams, each to its own task, until the connection ends or
/// the broker stops.
async fn serve_streams(
    h: &Arc<Handles>,
    conn: &quinn::Connection,
    conn_id: u64,
    granted: u64,
    principal: Principal,
    grant: &Grant,
    stop: &mut watch::Receiver<bool>,
) {
    // A draining broker takes only its peers' new connections (admission lets a peer's
    // address through): anyone else is told it is shutting down.
    if h.publish.health.phase() == crate::health::Phase::Draining
        && !matches!(principal, Principal::Peer)
    {
        conn.close(close_code::SHUTDOWN.into(), b"broker shutting down");
        return;
    }
    let (access, _registered) = match h.auth.admit(conn_id, &principal, conn) {
        Ok(admitted) => admitted,
        Err(revoked) => {
            conn.close(CLOSE_REVOKED.into(), revoked.to_string().as_bytes());
            return;
        }
    };
    // Reply grants are the user's, whichever of its connections a request reached.
    let user_key: Arc<str> = match &principal {
        Principal::User(user, _) => Arc::from(format!("user:{}", user.name())),
        Principal::Peer => Arc::from("peer"),
        Principal::Anonymous => Arc::from("anonymous"),
    };
    h.subscribe.topics.inboxes().bind(conn_id, user_key);
    let role = Role::from_granted(granted);
    let publisher = publish::Publisher::new(
        Arc::clone(&h.publish),
        conn_id,
        granted,
        role,
        access.clone(),
    );
    let link = Link {
        id: conn_id,
        quic: conn.clone(),
        granted,
        role,
        allowance: grant.allowance().clone(),
        subscriptions: Arc::default(),
        wildcards: Arc::default(),
        replica_rpcs: Arc::default(),
        access,
    };
    loop {
        tokio::select! {
            stream = conn.accept_bi() => match stream {
                Ok((send, recv)) => {
                    let h = Arc::clone(h);
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
            Frame::ConsumerOpen(c) => {
                return consume::serve_consumer(Arc::clone(&h.consume), link, c, send, recv, buf)
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
            Frame::ReplicaRpc(rpc) => {
                return replica_rpc::serve_replica_rpc(&h.replica_rpc, &link, rpc, &mut send).await;
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
