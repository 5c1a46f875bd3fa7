//! Cache streams: `CachePut`/`CacheGet`/`CacheDelete` requests answered in order on the same
//! stream.
//!
//! In a cluster, a request for a key another member owns is forwarded for a plain client,
//! answered with `Moved` for a routing client, and served here for a peer (a forwarded request
//! or a hand-off push; a peer's put of a key this broker does not own wakes the hand-off so
//! the entry moves on to its owner). A miss at the owner during the hand-off window asks the
//! member that held the key before (see `cluster::handoff`).

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_placement::Kind;
use starling_proto::{
    CacheGet, CacheOk, CacheValue, ErrorCode, ErrorFrame, Frame, Moved, ReadError, read_frame,
};

use crate::cluster::{Member, Role, Route};
use crate::server::{Ctx, reply};

/// Serves a cache stream whose first frame is `first`.
pub async fn serve(
    ctx: Arc<Ctx>,
    role: Role,
    first: Frame,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: BytesMut,
) {
    let mut out = BytesMut::new();
    let mut pending = Some(first);
    loop {
        if let Some(frame) = pending.take() {
            answer(&ctx, role, frame).await.encode(&mut out);
        }
        // Answer every request already buffered before writing, so pipelined requests share
        // one write.
        match ctx.decoder.decode(&mut buf) {
            Ok(Some(frame)) => {
                pending = Some(frame);
                if out.len() < 64 * 1024 {
                    continue;
                }
            }
            Ok(None) => {}
            Err(e) => {
                let _ = send.write_all(&out).await;
                reply::read_failed(&mut send, &ctx.metrics, &ReadError::Decode(e)).await;
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
        match read_frame(&mut recv, &mut buf, &ctx.decoder, 16 * 1024).await {
            Ok(Some(frame)) => pending = Some(frame),
            Ok(None) => break,
            Err(ReadError::Io(_)) => return,
            Err(e) => {
                reply::read_failed(&mut send, &ctx.metrics, &e).await;
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

async fn answer(ctx: &Ctx, role: Role, frame: Frame) -> Frame {
    if let Frame::CachePut(p) = &frame
        && ctx.health.phase() == crate::health::Phase::Draining
    {
        // What is written now would leave with this process (its entries are being handed
        // off), so refuse it rather than lose it.
        let msg = "broker is draining; write again in a moment".to_string();
        return error(ctx, p.request_id, ErrorCode::Unavailable, msg);
    }
    let route = key_of(&frame).map(|k| ctx.cluster.route(Kind::CacheKey, k));
    match (route, role) {
        (Some(Route::Peer(owner)), Role::Plain) => return forward(ctx, owner, frame).await,
        (Some(Route::Peer(owner)), Role::Routed) => {
            ctx.metrics
                .cluster_moved
                .with_label_values(&["cache"])
                .inc();
            return Frame::Moved(Moved {
                request_id: reply::request_id(&frame),
                epoch: ctx.cluster.epoch(),
                owner: owner.addr,
            });
        }
        (Some(Route::Peer(_)), Role::Peer) if matches!(frame, Frame::CachePut(_)) => {
            ctx.handoff_wake.notify_one();
        }
        _ => {}
    }
    let pull_from = match (&frame, role) {
        (Frame::CacheGet(g), Role::Plain | Role::Routed) => ctx
            .cluster
            .handoff_source(Kind::CacheKey, &g.key)
            .map(|holder| (holder, g.key.clone())),
        _ => None,
    };
    let local = answer_locally(ctx, frame);
    match (local, pull_from) {
        (Frame::CacheValue(v), Some((holder, key))) if v.value.is_none() => {
            pull(ctx, v.request_id, holder, key).await
        }
        (local, _) => local,
    }
}

/// A miss at the owner during the hand-off window: the previous holder's value, if any. A
/// holder that cannot be asked makes the answer `Unavailable`, never a false "absent"; and as
/// the holder deletes a pushed entry only after this broker stored it, a holder's "absent"
/// sends the request back to the local store once more.
async fn pull(ctx: &Ctx, request_id: u64, holder: Member, key: Bytes) -> Frame {
    let asked = match ctx.peers.client(&holder).await {
        Ok(client) => client
            .cache_get(key.clone())
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    match asked {
        Ok(Some(value)) => {
            ctx.metrics
                .cluster_handoff_keys
                .with_label_values(&["pulled"])
                .inc();
            Frame::CacheValue(CacheValue {
                request_id,
                value: Some(value),
            })
        }
        Ok(None) => answer_locally(ctx, Frame::CacheGet(CacheGet { request_id, key })),
        Err(why) => unavailable(
            ctx,
            request_id,
            format!(
                "the key's previous holder {} cannot be asked: {why}",
                holder.id
            ),
        ),
    }
}

/// Forwards a plain client's request to the key's owner.
async fn forward(ctx: &Ctx, owner: Member, frame: Frame) -> Frame {
    let request_id = reply::request_id(&frame);
    let client = match ctx.peers.client(&owner).await {
        Ok(c) => c,
        Err(e) => return unavailable(ctx, request_id, e.to_string()),
    };
    ctx.metrics
        .cluster_forwarded
        .with_label_values(&["cache"])
        .inc();
    let result = match frame {
        Frame::CachePut(p) => {
            let ttl = (p.ttl_ms > 0).then(|| Duration::from_millis(p.ttl_ms));
            client.cache_put(p.key, p.value, ttl).await.map(|existed| {
                Frame::CacheOk(CacheOk {
                    request_id,
                    existed,
                })
            })
        }
        Frame::CacheGet(g) => client
            .cache_get(g.key)
            .await
            .map(|value| Frame::CacheValue(CacheValue { request_id, value })),
        Frame::CacheDelete(d) => client.cache_delete(d.key).await.map(|existed| {
            Frame::CacheOk(CacheOk {
                request_id,
                existed,
            })
        }),
        other => return answer_locally(ctx, other),
    };
    match result {
        Ok(frame) => frame,
        Err(starling_client::ClientError::Server { code, message }) => {
            error(ctx, request_id, code, message)
        }
        Err(e) => {
            let why = ctx.peers.failed(&owner, &e).await.to_string();
            unavailable(ctx, request_id, why)
        }
    }
}

fn unavailable(ctx: &Ctx, request_id: u64, why: String) -> Frame {
    ctx.metrics
        .cluster_forward_failures
        .with_label_values(&["cache"])
        .inc();
    error(ctx, request_id, ErrorCode::Unavailable, why)
}

fn answer_locally(ctx: &Ctx, frame: Frame) -> Frame {
    let ops = &ctx.metrics.cache_ops;
    match frame {
        Frame::CachePut(p) => {
            let ttl = (p.ttl_ms > 0).then(|| Duration::from_millis(p.ttl_ms));
            match ctx.cache.put(p.key, p.value, ttl) {
                Ok(existed) => {
                    ops.with_label_values(&["put", "ok"]).inc();
                    Frame::CacheOk(CacheOk {
                        request_id: p.request_id,
                        existed,
                    })
                }
                Err(e) => {
                    ops.with_label_values(&["put", "refused"]).inc();
                    error(ctx, p.request_id, ErrorCode::InvalidRequest, e.to_string())
                }
            }
        }
        Frame::CacheGet(g) => {
            let value = ctx.cache.get(&g.key);
            ops.with_label_values(&["get", if value.is_some() { "hit" } else { "miss" }])
                .inc();
            Frame::CacheValue(CacheValue {
                request_id: g.request_id,
                value,
            })
        }
        Frame::CacheDelete(d) => {
            let existed = ctx.cache.delete(&d.key);
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
            error(ctx, reply::request_id(&other), code, msg)
        }
    }
}

fn error(ctx: &Ctx, request_id: u64, code: ErrorCode, message: String) -> Frame {
    ctx.metrics
        .protocol_errors
        .with_label_values(&[code.name()])
        .inc();
    Frame::Error(ErrorFrame {
        request_id,
        code,
        message,
    })
}
