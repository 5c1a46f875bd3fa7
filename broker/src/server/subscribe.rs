//! Subscription streams: `Subscribe` → `SubscribeOk`, then EventBatches written by the
//! subscriber's writer lane until the client unsubscribes, finishes the stream or disconnects.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::BytesMut;
use starling_proto::{ErrorCode, Frame, Subscribe, SubscribeOk, read_frame, write_frame};

use crate::pubsub::subscriber::Subscriber;
use crate::server::{Ctx, reply};

/// Serves a subscription stream whose first frame was `req`.
pub async fn serve(
    ctx: Arc<Ctx>,
    conn_id: u64,
    req: Subscribe,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: BytesMut,
) {
    if ctx.health.phase() != crate::health::Phase::Serving {
        let msg = "broker is not serving (starting or draining)";
        reply::error(
            &mut send,
            &ctx.metrics,
            req.request_id,
            ErrorCode::Unavailable,
            msg,
        )
        .await;
        let _ = send.finish();
        return;
    }
    let id = ctx.next_sub_id.fetch_add(1, Ordering::Relaxed);
    let lane = ctx.lanes.picker.pick(id, conn_id);
    let sub = Arc::new(Subscriber::new(
        id,
        conn_id,
        lane,
        Arc::from(req.topic.as_str()),
        ctx.cfg.slow_subscriber_policy,
        ctx.cfg.subscriber_queue_capacity as usize,
        send,
        Arc::clone(&ctx.metrics),
    ));
    {
        // Register before answering, so every publish the client makes after `SubscribeOk`
        // reaches it; hold the stream so no EventBatch can overtake `SubscribeOk`.
        let mut stream = sub.stream.lock().await;
        ctx.subscribers.lock().insert(id, Arc::clone(&sub));
        ctx.topics.subscribe(Arc::clone(&sub));
        ctx.metrics.subscriptions.inc();
        let ok = Frame::SubscribeOk(SubscribeOk {
            request_id: req.request_id,
            subscription_id: id,
        });
        if write_frame(&mut *stream, &ok).await.is_err() {
            drop(stream);
            ctx.subscribers.lock().remove(&id);
            ctx.topics.unsubscribe(&sub);
            ctx.metrics.subscriptions.dec();
            return;
        }
    }
    tracing::debug!(id, topic = %req.topic, lane, "subscribed");

    loop {
        match read_frame(&mut recv, &mut buf, &ctx.decoder, 4096).await {
            Ok(Some(Frame::Unsubscribe(u))) if u.subscription_id == id => break,
            Ok(Some(Frame::Ping(p))) => {
                let mut stream = sub.stream.lock().await;
                if write_frame(&mut *stream, &Frame::Pong(p)).await.is_err() {
                    break;
                }
            }
            Ok(Some(other)) => {
                let (code, msg) = reply::unexpected(&other, "subscription");
                let mut stream = sub.stream.lock().await;
                reply::error(
                    &mut stream,
                    &ctx.metrics,
                    reply::request_id(&other),
                    code,
                    msg,
                )
                .await;
            }
            Ok(None) | Err(_) => break,
        }
    }
    ctx.subscribers.lock().remove(&id);
    ctx.topics.unsubscribe(&sub);
    ctx.metrics.subscriptions.dec();
    let _ = sub.stream.lock().await.finish();
    tracing::debug!(id, "unsubscribed");
}
