//! Publish streams and the per-connection publish pipeline.
//!
//! A publish stream's reader decodes `Publish`/`PublishBatch` frames (reading
//! `publish_chunk_bytes` at a time) and hands each request to one of the connection's
//! `pub_workers_per_conn` workers, chosen by topic hash so one connection's messages to one
//! topic stay in order. Each worker's queue holds `pub_queue_depth / workers` requests; when it
//! is full the reader stops reading and QUIC flow control pushes back on the publisher.
//! Acks go back on the same stream through one writer task per stream.
//!
//! In a cluster, a publish for a topic another member owns goes through the same worker (so
//! its order is kept) and is forwarded over the peer link; an acked one is acked only when the
//! owner acked it. A peer that sends an acked publish for a topic this broker does not own
//! (their views of the membership differ for a moment) is refused with `Moved`, so no ack is
//! ever given for a message not enqueued at the current owner. A request accepted here as the
//! owner that reaches its worker after a membership change moved the topic goes to the new
//! owner instead of the local topic (see `publish_local`).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::{Bytes, BytesMut};
use starling_proto::{AckMode, ErrorCode, Frame, ReadError, features, read_frame};
use tokio::sync::{Semaphore, mpsc};
use tracing::Instrument;

use starling_placement::Kind;

use crate::cluster::{Member, Role, Route};
use crate::health::Phase;
use crate::metrics::Limit;
use crate::pubsub::ack::{AckItem, AckToken};
use crate::pubsub::topic::TopicMsg;
use crate::server::{Ctx, reply};

struct Work {
    topic: String,
    job: Job,
    /// Held until the job reached its topic or owner.
    in_flight: InFlight,
}

/// Counts one publish request in `Ctx::publishes_in_flight` from before the drain check until
/// it has reached its topic (or its owner): a drain waits for the count to reach zero before it
/// flushes the topics, so nothing acked on receipt is still on its way when streams finish. It
/// also holds the request's bytes of `max_inflight_publish_bytes` ([`Budget`]) until then.
pub struct InFlight {
    ctx: Arc<Ctx>,
    /// Released with the request (dropped with it).
    _budget: Option<Budget>,
}

impl InFlight {
    fn new(ctx: &Arc<Ctx>, budget: Option<Budget>) -> InFlight {
        ctx.publishes_in_flight.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        InFlight {
            ctx: Arc::clone(ctx),
            _budget: budget,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.ctx.publishes_in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A publish request's share of `max_inflight_publish_bytes`: its payload bytes (at least 1,
/// at most the whole budget), held from when its frame was read until it reached its topic or
/// owner, and counted in `starling_publish_inflight_bytes` meanwhile.
pub struct Budget {
    _permit: tokio::sync::OwnedSemaphorePermit,
    gauge: prometheus::IntGauge,
    bytes: i64,
}

impl Budget {
    /// Takes `bytes` of the budget, waiting (and counting the wait) while it is exhausted, so the
    /// stream is not read meanwhile and QUIC flow control holds its client back. `None` once
    /// the budget is closed (never, in practice).
    async fn take(ctx: &Ctx, bytes: usize) -> Option<Budget> {
        let whole = usize::try_from(ctx.cfg.max_inflight_publish_bytes).unwrap_or(usize::MAX);
        let n = u32::try_from(bytes.clamp(1, whole.max(1))).unwrap_or(u32::MAX);
        let sem = Arc::clone(&ctx.publish_budget);
        let permit = match Arc::clone(&sem).try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(tokio::sync::TryAcquireError::NoPermits) => {
                ctx.metrics.publish_budget_waits.inc();
                sem.acquire_many_owned(n).await.ok()?
            }
            Err(tokio::sync::TryAcquireError::Closed) => return None,
        };
        let gauge = ctx.metrics.publish_inflight_bytes.clone();
        gauge.add(i64::from(n));
        Some(Budget {
            _permit: permit,
            gauge,
            bytes: i64::from(n),
        })
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.gauge.sub(self.bytes);
    }
}

enum Job {
    /// Publish into the local topic; routed here in the view of this membership epoch.
    Local(TopicMsg, u64),
    /// Forward to the topic's owner.
    Forward {
        owner: Member,
        payloads: Vec<Bytes>,
        ack: Option<AckToken>,
    },
}

/// The publish workers of one connection. Cheap to clone; workers start on first use.
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<tokio::sync::OnceCell<Vec<mpsc::Sender<Work>>>>,
    ctx: Arc<Ctx>,
    hasher: ahash::RandomState,
    granted: u64,
    role: Role,
}

impl Publisher {
    /// The pipeline of a connection that was granted the `granted` feature bits.
    pub fn new(ctx: Arc<Ctx>, granted: u64, role: Role) -> Self {
        Publisher {
            inner: Arc::new(tokio::sync::OnceCell::new()),
            ctx,
            hasher: ahash::RandomState::with_seeds(7, 11, 13, 17),
            granted,
            role,
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
                        let ctx = Arc::clone(&self.ctx);
                        tokio::spawn(
                            async move {
                                while let Some(w) = rx.recv().await {
                                    match w.job {
                                        Job::Local(msg, epoch) => {
                                            publish_local(&ctx, &w.topic, msg, epoch).await
                                        }
                                        Job::Forward {
                                            owner,
                                            payloads,
                                            ack,
                                        } => forward(&ctx, &w.topic, owner, payloads, ack).await,
                                    }
                                    drop(w.in_flight);
                                }
                            }
                            // The span of the stream that started them, under the connection's.
                            .instrument(tracing::Span::current()),
                        );
                        tx
                    })
                    .collect()
            })
            .await
    }

    /// Queues one request for its topic's worker, waiting while that worker's queue is full.
    async fn submit(&self, topic: String, job: Job, in_flight: InFlight) -> Result<(), ()> {
        let workers = self.workers().await;
        let i = (self.hasher.hash_one(topic.as_str()) as usize) % workers.len().max(1);
        match workers.get(i) {
            Some(tx) => tx
                .send(Work {
                    topic,
                    job,
                    in_flight,
                })
                .await
                .map_err(|_| ()),
            None => Err(()),
        }
    }
}

/// Publishes a request this broker accepted as the topic's owner into the local topic, unless
/// the membership changed since and another member owns the topic now: then it goes to that
/// owner, where the topic's subscribers are headed (a former owner ends its peers' subscriptions
/// shortly after it learns of a change, so what it numbered later would reach nobody). An
/// `ack_on_commit` ack completes when the new owner acks; a message already acked on receipt
/// is published here after all if the new owner does not take it.
async fn publish_local(ctx: &Arc<Ctx>, topic: &str, msg: TopicMsg, epoch: u64) {
    if ctx.cluster.is_clustered()
        && ctx.cluster.epoch() != epoch
        && let Route::Peer(owner) = ctx.cluster.route(Kind::Topic, topic.as_bytes())
    {
        if msg.ack.is_some() {
            return forward(ctx, topic, owner, msg.payloads, msg.ack).await;
        }
        match relocate(ctx, topic, &owner, msg.payloads.clone()).await {
            Ok(()) => return,
            Err(why) => {
                tracing::debug!(%topic, owner = %owner.id, %why, "publish kept here: the new owner did not take it");
            }
        }
    }
    ctx.topics.publish(topic, msg).await;
}

/// Hands already-acked messages to the topic's new owner and waits for its ack.
async fn relocate(
    ctx: &Arc<Ctx>,
    topic: &str,
    owner: &Member,
    payloads: Vec<Bytes>,
) -> Result<(), String> {
    let client = ctx.peers.client(owner).await.map_err(|e| e.to_string())?;
    let acked = client
        .publish_batch_pipelined(topic, payloads)
        .await
        .map_err(|e| e.to_string())?;
    acked.await.map_err(|e| e.to_string())?;
    ctx.metrics
        .cluster_forwarded
        .with_label_values(&["publish"])
        .inc();
    Ok(())
}

/// Forwards one request to the topic's owner; an acked one is acked when the owner acks it.
async fn forward(
    ctx: &Arc<Ctx>,
    topic: &str,
    owner: Member,
    payloads: Vec<Bytes>,
    ack: Option<AckToken>,
) {
    let fail = |ack: Option<AckToken>, why: String| {
        ctx.metrics
            .cluster_forward_failures
            .with_label_values(&["publish"])
            .inc();
        match ack {
            Some(token) => token.refuse(ErrorCode::Unavailable, why),
            None => tracing::debug!(%topic, %why, "forwarded publish dropped"),
        }
    };
    let client = match ctx.peers.client(&owner).await {
        Ok(c) => c,
        Err(e) => return fail(ack, e.to_string()),
    };
    ctx.metrics
        .cluster_forwarded
        .with_label_values(&["publish"])
        .inc();
    match ack {
        None => {
            if let Err(e) = client.publish_batch(topic, payloads, false).await {
                let why = ctx.peers.failed(&owner, &e).await.to_string();
                fail(None, why);
            }
        }
        Some(token) => match client.publish_batch_pipelined(topic, payloads).await {
            Ok(acked) => {
                let ctx = Arc::clone(ctx);
                tokio::spawn(async move {
                    match acked.await {
                        Ok(()) => token.ack(),
                        Err(e) => {
                            if e.is_link_failure() {
                                ctx.peers.failed(&owner, &e).await;
                            }
                            ctx.metrics
                                .cluster_forward_failures
                                .with_label_values(&["publish"])
                                .inc();
                            let why = format!("not acked by the owner {}: {e}", owner.id);
                            token.refuse(ErrorCode::Unavailable, why);
                        }
                    }
                });
            }
            Err(e) => {
                let why = ctx.peers.failed(&owner, &e).await.to_string();
                fail(Some(token), why);
            }
        },
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
        // Bytes read from a client count against the broker-wide budget; a member's were
        // counted where they entered the cluster.
        let bytes: usize = payloads.iter().map(Bytes::len).sum();
        let budget = if publisher.role == Role::Peer {
            None
        } else {
            match Budget::take(&ctx, bytes).await {
                Some(b) => Some(b),
                None => break,
            }
        };
        // Counted before the drain check, so a drain that starts now waits for this request.
        let in_flight = InFlight::new(&ctx, budget);
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
        ctx.metrics.publish_requests.inc();

        let (route, epoch) = ctx.cluster.route_at(Kind::Topic, topic.as_bytes());
        let owner = match route {
            Route::Local => None,
            Route::Peer(owner) => Some(owner),
        };
        if let Some(owner) = owner {
            if publisher.role == Role::Peer {
                // Views differ for a moment: never ack what the owner did not enqueue.
                if ack == AckMode::Ack {
                    ctx.metrics
                        .cluster_moved
                        .with_label_values(&["publish"])
                        .inc();
                    let why = format!(
                        "topic owned by {}; the sender's membership is stale",
                        owner.id
                    );
                    send_error(&ctx, &ack_tx, &permits, request_id, ErrorCode::Moved, why).await;
                    continue;
                }
            } else {
                let token = match ack {
                    AckMode::Ack => match Arc::clone(&permits).acquire_owned().await {
                        Ok(permit) => {
                            Some(AckToken::new(request_id, count, ack_tx.clone(), permit))
                        }
                        Err(_) => None,
                    },
                    AckMode::None => None,
                };
                let job = Job::Forward {
                    owner,
                    payloads,
                    ack: token,
                };
                if publisher.submit(topic, job, in_flight).await.is_err() {
                    break;
                }
                continue;
            }
        }

        if let Err(limit) = ctx.topics.reserve(&topic) {
            // Refused before it is counted or acked; without an ack the refusal counter is
            // the only trace.
            ctx.metrics.limit_refused(Limit::Topics);
            if ack == AckMode::Ack {
                let why = limit.to_string();
                send_error(
                    &ctx,
                    &ack_tx,
                    &permits,
                    request_id,
                    ErrorCode::LimitExceeded,
                    why,
                )
                .await;
            }
            continue;
        }
        // Counted where the topic lives, so a cluster's sum counts each message once (a
        // forwarded one is counted in `starling_cluster_forwarded_total` on the way).
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
                Job::Local(
                    TopicMsg {
                        payloads,
                        ack: commit_ack,
                        origin: None,
                    },
                    epoch,
                ),
                in_flight,
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
    tracing::trace!("publish stream closed");
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
