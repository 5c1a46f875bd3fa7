//! Cache streams: `CachePut`/`CacheGet`/`CacheDelete` requests answered in order on the same
//! stream.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use starling_proto::{CacheOk, CacheValue, ErrorCode, ErrorFrame, Frame, ReadError, read_frame};

use crate::server::{Ctx, reply};

/// Serves a cache stream whose first frame is `first`.
pub async fn serve(
    ctx: Arc<Ctx>,
    first: Frame,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: BytesMut,
) {
    let mut out = BytesMut::new();
    let mut pending = Some(first);
    loop {
        if let Some(frame) = pending.take() {
            answer(&ctx, frame).encode(&mut out);
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

fn answer(ctx: &Ctx, frame: Frame) -> Frame {
    let ops = &ctx.metrics.cache_ops;
    match frame {
        Frame::CachePut(p) => {
            let ttl = (p.ttl_ms > 0).then(|| Duration::from_millis(p.ttl_ms));
            match ctx.cache.put(p.key, p.value, ttl) {
                Ok(()) => {
                    ops.with_label_values(&["put", "ok"]).inc();
                    Frame::CacheOk(CacheOk {
                        request_id: p.request_id,
                        existed: false,
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
