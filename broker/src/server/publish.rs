//! Publish streams and the per-connection publish pipeline.
//!
//! A publish stream's reader decodes `Publish`/`PublishBatch` frames (reading
//! `publish_chunk_bytes` at a time) and hands each request to one of the connection's
//! `pub_workers_per_conn` workers, chosen by topic hash so one connection's messages to one
//! topic stay in order. Each worker's queue holds `pub_queue_depth / workers` requests; when it
//! is full the reader stops reading and QUIC flow control pushes back on the publisher.
//! Acks go back on the same stream through one writer task per stream.

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use starling_proto::{AckMode, ErrorCode, Frame, ReadError, features, read_frame};
use tokio::sync::{Semaphore, mpsc};

use crate::health::Phase;
use crate::pubsub::ack::{AckItem, AckToken};
use crate::pubsub::topic::TopicMsg;
use crate::server::{Ctx, reply};

struct Work {
    topic: String,
    msg: TopicMsg,
}

/// The publish workers of one connection. Cheap to clone; workers start on first use.
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<tokio::sync::OnceCell<Vec<mpsc::Sender<Work>>>>,
    ctx: Arc<Ctx>,
    hasher: ahash::RandomState,
    conn_id: u64,
    granted: u64,
}

impl Publisher {
    /// The pipeline of connection `conn_id`, which was granted the `granted` feature bits.
    pub fn new(ctx: Arc<Ctx>, conn_id: u64, granted: u64) -> Self {
        Publisher {
            inner: Arc::new(tokio::sync::OnceCell::new()),
            ctx,
            hasher: ahash::RandomState::with_seeds(7, 11, 13, 17),
            conn_id,
            granted,
        }
    }

    async fn workers(&self) -> &Vec<mpsc::Sender<Work>> {
        self.inner
            .get_or_init(|| async {
                let n = self.ctx.cfg.pub_workers_per_conn.max(1) as usize;
                let depth = (self.ctx.cfg.pub_queue_depth as usize / n).max(1);
                (0..n)
                    .map(|_| {
                        let (tx, mut rx) = mpsc::channel::<Work>(depth);
                        let topics = Arc::clone(&self.ctx.topics);
                        tokio::spawn(async move {
                            while let Some(w) = rx.recv().await {
                                topics.publish(&w.topic, w.msg).await;
                            }
                        });
                        tx
                    })
                    .collect()
            })
            .await
    }

    /// Queues one request for its topic's worker, waiting while that worker's queue is full.
    async fn submit(&self, topic: String, msg: TopicMsg) -> Result<(), TopicMsg> {
        let workers = self.workers().await;
        let i = (self.hasher.hash_one(topic.as_str()) as usize) % workers.len().max(1);
        match workers.get(i) {
            Some(tx) => tx.send(Work { topic, msg }).await.map_err(|e| e.0.msg),
            None => Err(msg),
        }
    }
}

/// Serves a publish stream whose first frame is `first`.
pub async fn serve(
    ctx: Arc<Ctx>,
    publisher: Publisher,
    first: Frame,
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: BytesMut,
) {
    let (ack_tx, ack_rx) = mpsc::unbounded_channel::<AckItem>();
    let permits = Arc::new(Semaphore::new(ctx.cfg.pub_queue_depth.max(1) as usize));
    let writer = tokio::spawn(write_acks(Arc::clone(&ctx), send, ack_rx));
    let read_chunk = ctx.cfg.publish_chunk_bytes as usize;
    let mut next = Some(first);
    loop {
        let frame = match next.take() {
            Some(f) => f,
            None => match read_frame(&mut recv, &mut buf, &ctx.decoder, read_chunk).await {
                Ok(Some(f)) => f,
                Ok(None) | Err(ReadError::Io(_)) => break,
                Err(e) => {
                    if let Some((code, message)) = reply::read_error_reply(&e) {
                        send_error(&ctx, &ack_tx, &permits, 0, code, message).await;
                    }
                    break;
                }
            },
        };
        let (request_id, ack, topic, payloads) = match frame {
            Frame::Publish(p) => (p.request_id, p.ack, p.topic, vec![p.payload]),
            Frame::PublishBatch(p) if publisher.granted & features::BATCH_PUBLISH == 0 => {
                let msg = "the BATCH_PUBLISH feature was not requested in Hello";
                send_error(
                    &ctx,
                    &ack_tx,
                    &permits,
                    p.request_id,
                    ErrorCode::InvalidRequest,
                    msg,
                )
                .await;
                continue;
            }
            Frame::PublishBatch(p) => (p.request_id, p.ack, p.topic, p.payloads),
            Frame::Ping(p) => {
                if let Ok(permit) = Arc::clone(&permits).acquire_owned().await {
                    let _ = ack_tx.send((Frame::Pong(p), permit));
                }
                continue;
            }
            other => {
                let (code, msg) = reply::unexpected(&other, "publish");
                send_error(
                    &ctx,
                    &ack_tx,
                    &permits,
                    reply::request_id(&other),
                    code,
                    msg,
                )
                .await;
                continue;
            }
        };
        if ctx.health.phase() == Phase::Draining {
            if ack == AckMode::Ack {
                send_error(
                    &ctx,
                    &ack_tx,
                    &permits,
                    request_id,
                    ErrorCode::Unavailable,
                    "broker is draining",
                )
                .await;
            }
            continue;
        }
        let count = payloads.len() as u32;
        let bytes: usize = payloads.iter().map(Bytes::len).sum();
        ctx.metrics.publish_requests.inc();
        ctx.metrics.published_messages.inc_by(count.into());
        ctx.metrics.published_bytes.inc_by(bytes as u64);

        let token = match ack {
            AckMode::Ack => match Arc::clone(&permits).acquire_owned().await {
                Ok(permit) => Some(AckToken::new(request_id, count, ack_tx.clone(), permit)),
                Err(_) => None,
            },
            AckMode::None => None,
        };
        let (commit_ack, receipt_ack) = if ctx.cfg.ack_on_commit {
            (token, None)
        } else {
            (None, token)
        };
        if publisher
            .submit(
                topic,
                TopicMsg {
                    payloads,
                    ack: commit_ack,
                },
            )
            .await
            .is_err()
        {
            break;
        }
        if let Some(t) = receipt_ack {
            t.ack();
        }
    }
    drop(ack_tx);
    // Pending commit acks still hold senders; the writer ends once they are all completed.
    let _ = writer.await;
    tracing::trace!(conn = publisher.conn_id, "publish stream closed");
}

async fn send_error(
    ctx: &Ctx,
    tx: &mpsc::UnboundedSender<AckItem>,
    permits: &Arc<Semaphore>,
    request_id: u64,
    code: ErrorCode,
    message: impl Into<String>,
) {
    ctx.metrics
        .protocol_errors
        .with_label_values(&[code.name()])
        .inc();
    if let Ok(permit) = Arc::clone(permits).acquire_owned().await {
        let frame = Frame::Error(starling_proto::ErrorFrame {
            request_id,
            code,
            message: message.into(),
        });
        let _ = tx.send((frame, permit));
    }
}

/// Writes acks (and errors) to the stream, coalescing whatever is ready into one write.
async fn write_acks(
    ctx: Arc<Ctx>,
    mut send: quinn::SendStream,
    mut rx: mpsc::UnboundedReceiver<AckItem>,
) {
    let mut out = BytesMut::new();
    let mut held = Vec::new();
    while let Some((frame, permit)) = rx.recv().await {
        let mut acks = 0u64;
        let mut push = |frame: Frame, out: &mut BytesMut| {
            if matches!(frame, Frame::PublishAck(_)) {
                acks += 1;
            }
            frame.encode(out);
        };
        push(frame, &mut out);
        held.push(permit);
        while held.len() < 1024 {
            match rx.try_recv() {
                Ok((frame, permit)) => {
                    push(frame, &mut out);
                    held.push(permit);
                }
                Err(_) => break,
            }
        }
        if send.write_all(&out).await.is_err() {
            return;
        }
        ctx.metrics.publish_acks.inc_by(acks);
        out.clear();
        held.clear();
    }
    let _ = send.finish();
}
