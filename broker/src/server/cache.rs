//! Cache streams: `CachePut`/`CacheGet`/`CacheDelete` requests answered in order on the same
//! stream.
//!
//! In a cluster, a request for a key another member owns is forwarded for a plain client,
//! answered with `Moved` for a routing client, and served here for a peer (a forwarded request
//! or a hand-off push; a peer's put of a key this broker does not own wakes the hand-off so
//! the entry moves on to its owner). A miss at the owner during the hand-off window asks the
//! member that held the key before (see `cluster::handoff`). Going to another member is the
//! cluster side's job (`cluster::forward`); this module only decides that it happens.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_access::Operation;
use starling_placement::Kind;
use starling_proto::{
    CacheGet, CacheOk, CacheValue, ErrorCode, Frame, FrameDecoder, Moved, ReadError,
};

use crate::auth::Access;
use crate::cache::Cache;
use crate::cluster::forward::{CacheAnswer, CacheOp, CacheRefusal, Forwarder};
use crate::cluster::handoff::Handoff;
use crate::cluster::{Cluster, Member, Role, Route};
use crate::health::{Health, Phase};
use crate::metrics::{Metrics, idle_stream};
use crate::server::frames::{FrameBuf, read_frame_within};
use crate::server::link::Link;
use crate::server::reply;

/// What a cache stream's handler uses.
pub struct Handles {
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// Lifecycle state (writes are refused while draining).
    pub health: Arc<Health>,
    /// The local cache.
    pub cache: Arc<Cache>,
    /// Who owns each key.
    pub cluster: Arc<Cluster>,
    /// Requests for keys other members own.
    pub forward: Forwarder,
    /// Woken when a peer stores a key this broker does not own.
    pub handoff: Arc<Handoff>,
    /// `stream_idle_timeout_ms`.
    pub idle_timeout: Duration,
}

/// Serves a cache stream of connection `link` whose first frame is `first`: answers each
/// request in order. A get is checked against the connection's access as `cache_read`, a put
/// or delete as `cache_write`; a refused one is answered with `Forbidden` and the stream goes
/// on.
pub async fn serve_cache_stream(
    h: Arc<Handles>,
    link: Link,
    first: Frame,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: FrameBuf,
) {
    let (role, access, allowance) = (link.role, link.access, link.allowance);
    let idle = h.idle_timeout;
    let mut out = BytesMut::new();
    let mut pending = Some(first);
    loop {
        if let Some(frame) = pending.take() {
            answer(&h, role, &access, frame).await.encode(&mut out);
        }
        // Answer every request already buffered before writing, so pipelined requests share
        // one write.
        match buf.decode(&h.decoder) {
            Ok(Some(frame)) => {
                pending = Some(frame);
                if out.len() < 64 * 1024 {
                    continue;
                }
            }
            Ok(None) => {}
            Err(e) => {
                let _ = send.write_all(&out).await;
                reply::read_failed(&mut send, &h.metrics, &ReadError::Decode(e)).await;
                return;
            }
        }
        if !out.is_empty() {
            if send.write_all(&out).await.is_err() {
                return;
            }
            out.clear();
        }
        if pending.is_some() {
            continue;
        }
        let read = read_frame_within(&mut recv, &mut buf, &h.decoder, 16 * 1024, &allowance);
        let Ok(read) = tokio::time::timeout(idle, read).await else {
            h.metrics
                .streams_idle_closed
                .with_label_values(&[idle_stream::CACHE])
                .inc();
            let (code, message) = reply::idle(idle);
            reply::error(&mut send, &h.metrics, 0, code, message).await;
            let _ = send.finish();
            let _ = recv.stop(reply::stop_code(code));
            return;
        };
        match read {
            Ok(Some(frame)) => pending = Some(frame),
            Ok(None) => break,
            Err(ReadError::Io(_)) => return,
            Err(e) => {
                reply::read_failed(&mut send, &h.metrics, &e).await;
                return;
            }
        }
    }
    let _ = send.finish();
}

/// The cache key a request is about.
fn key_of(frame: &Frame) -> Option<&Bytes> {
    match frame {
        Frame::CachePut(p) => Some(&p.key),
        Frame::CacheGet(g) => Some(&g.key),
        Frame::CacheDelete(d) => Some(&d.key),
        _ => None,
    }
}

/// The permission a cache request needs.
fn operation_of(frame: &Frame) -> Option<Operation> {
    match frame {
        Frame::CacheGet(_) => Some(Operation::CacheRead),
        Frame::CachePut(_) | Frame::CacheDelete(_) => Some(Operation::CacheWrite),
        _ => None,
    }
}

async fn answer(h: &Handles, role: Role, access: &Access, frame: Frame) -> Frame {
    if let (Some(op), Some(key)) = (operation_of(&frame), key_of(&frame))
        && let Err(denied) = access.check(op, key)
    {
        h.metrics.forbidden(&denied);
        let request_id = reply::request_id(&frame);
        return error(h, request_id, ErrorCode::Forbidden, denied.to_string());
    }
    if let Frame::CachePut(p) = &frame
        && h.health.phase() == Phase::Draining
    {
        // What is written now would leave with this process (its entries are being handed
        // off), so refuse it rather than lose it.
        let msg = "broker is draining; write again in a moment".to_string();
        return error(h, p.request_id, ErrorCode::Unavailable, msg);
    }
    let route = key_of(&frame).map(|k| h.cluster.route(Kind::CacheKey, k));
    match (route, role) {
        (Some(Route::Peer(owner)), Role::Plain) => return forward(h, owner, frame).await,
        (Some(Route::Peer(owner)), Role::Routed) => {
            h.metrics.cluster_moved.with_label_values(&["cache"]).inc();
            return Frame::Moved(Moved {
                request_id: reply::request_id(&frame),
                epoch: h.cluster.epoch(),
                owner: owner.addr,
            });
        }
        (Some(Route::Peer(_)), Role::Peer) if matches!(frame, Frame::CachePut(_)) => {
            h.handoff.wake();
        }
        _ => {}
    }
    let pull_from = match (&frame, role) {
        (Frame::CacheGet(g), Role::Plain | Role::Routed) => h
            .cluster
            .handoff_source(Kind::CacheKey, &g.key)
            .map(|holder| (holder, g.key.clone())),
        _ => None,
    };
    let local = answer_locally(h, frame);
    match (local, pull_from) {
        (Frame::CacheValue(v), Some((holder, key))) if v.value.is_none() => {
            pull(h, v.request_id, holder, key).await
        }
        (local, _) => local,
    }
}

/// A miss at the owner during the hand-off window: the previous holder's value, if any. A
/// holder that cannot be asked makes the answer `Unavailable`, never a false "absent"; and as
/// the holder deletes a pushed entry only after this broker stored it, a holder's "absent"
/// sends the request back to the local store once more.
async fn pull(h: &Handles, request_id: u64, holder: Member, key: Bytes) -> Frame {
    match h.forward.pull(&holder, key.clone()).await {
        Ok(Some(value)) => Frame::CacheValue(CacheValue {
            request_id,
            value: Some(value),
        }),
        Ok(None) => answer_locally(h, Frame::CacheGet(CacheGet { request_id, key })),
        Err(why) => error(
            h,
            request_id,
            ErrorCode::Unavailable,
            format!(
                "the key's previous holder {} cannot be asked: {why}",
                holder.id
            ),
        ),
    }
}

/// Forwards a plain client's request to the key's owner.
async fn forward(h: &Handles, owner: Member, frame: Frame) -> Frame {
    let request_id = reply::request_id(&frame);
    let op = match frame {
        Frame::CachePut(p) => CacheOp::Put {
            key: p.key,
            value: p.value,
            ttl: (p.ttl_ms > 0).then(|| Duration::from_millis(p.ttl_ms)),
        },
        Frame::CacheGet(g) => CacheOp::Get { key: g.key },
        Frame::CacheDelete(d) => CacheOp::Delete { key: d.key },
        other => return answer_locally(h, other),
    };
    match h.forward.cache(&owner, op).await {
        Ok(CacheAnswer::Value(value)) => Frame::CacheValue(CacheValue { request_id, value }),
        Ok(CacheAnswer::Existed(existed)) => Frame::CacheOk(CacheOk {
            request_id,
            existed,
        }),
        Err(CacheRefusal::Owner { code, message }) => error(h, request_id, code, message),
        Err(CacheRefusal::Unavailable(why)) => {
            error(h, request_id, ErrorCode::Unavailable, why.to_string())
        }
    }
}

fn answer_locally(h: &Handles, frame: Frame) -> Frame {
    let ops = &h.metrics.cache_ops;
    match frame {
        Frame::CachePut(p) => {
            let ttl = (p.ttl_ms > 0).then(|| Duration::from_millis(p.ttl_ms));
            match h.cache.put(p.key, p.value, ttl) {
                Ok(existed) => {
                    ops.with_label_values(&["put", "ok"]).inc();
                    Frame::CacheOk(CacheOk {
                        request_id: p.request_id,
                        existed,
                    })
                }
                Err(e) => {
                    ops.with_label_values(&["put", "refused"]).inc();
                    error(h, p.request_id, ErrorCode::InvalidRequest, e.to_string())
                }
            }
        }
        Frame::CacheGet(g) => {
            let value = h.cache.get(&g.key);
            ops.with_label_values(&["get", if value.is_some() { "hit" } else { "miss" }])
                .inc();
            Frame::CacheValue(CacheValue {
                request_id: g.request_id,
                value,
            })
        }
        Frame::CacheDelete(d) => {
            let existed = h.cache.delete(&d.key);
            ops.with_label_values(&["delete", if existed { "ok" } else { "absent" }])
                .inc();
            Frame::CacheOk(CacheOk {
                request_id: d.request_id,
                existed,
            })
        }
        Frame::Ping(p) => Frame::Pong(p),
        other => {
            let (code, msg) = reply::unexpected(&other, "cache");
            error(h, reply::request_id(&other), code, msg)
        }
    }
}

fn error(h: &Handles, request_id: u64, code: ErrorCode, message: String) -> Frame {
    reply::counted_error(&h.metrics, request_id, code, message)
}
