//! Durable consumer streams (docs/consumers.md): `ConsumerOpen` → checks → `ConsumerOk`, then
//! the consumer's deliveries (`ConsumerMessage`) written as its task sends them, and the
//! member's `ConsumerAck`s read and handed to the task, until either side ends the stream.
//! The member leaves its consumer when the stream ends (its connection closed, it finished
//! the stream, or a read failed): what it held is redelivered to another member at once.
//!
//! Checked before anything is created: the connection was granted `CONSUMERS`, the broker is
//! serving, the topic is durable and not replicated (`InvalidRequest`: replicated topics'
//! consumers are not built yet), this broker owns it in a cluster (otherwise `Moved` for a
//! routing client or a peer, which follows it to the owner, and `InvalidRequest` naming the
//! owner for a plain one), the user may subscribe to the topic and publish to the dead-letter topic
//! (`Forbidden`), and `max_ack_pending` is within `max_consumer_ack_pending`
//! (`LimitExceeded`).

use std::sync::Arc;

use starling_access::Operation;
use starling_config::BrokerConfig;
use starling_placement::Kind;
use starling_proto::{
    ConsumerAckOp, ConsumerOk, ConsumerOpen, ErrorCode, Frame, FrameDecoder, Moved, Ping, features,
    write_frame,
};
use starling_pubsub::consumer::{AckOp, Policy};
use tokio::sync::Semaphore;

use crate::cluster::{Cluster, Member, Role, Route};
use crate::consumer::{Command, Consumers, JoinError, JoinRequest, MemberMsg, Settings};
use crate::health::{Health, Phase};
use crate::metrics::{Limit, Metrics};
use crate::pubsub::topic::Topics;
use crate::server::frames::{FrameBuf, read_frame_within};
use crate::server::link::Link;
use crate::server::reply;

/// What a consumer stream's handler uses.
pub struct Handles {
    /// The effective config (`max_consumer_ack_pending`, the read chunk).
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// Lifecycle state.
    pub health: Arc<Health>,
    /// Topic registry (which topics are durable, replicated).
    pub topics: Arc<Topics>,
    /// Who owns each topic.
    pub cluster: Arc<Cluster>,
    /// The consumers loaded here.
    pub consumers: Arc<Consumers>,
}

/// Why a `ConsumerOpen` is not served here.
enum Refused {
    /// Answered with `Error`.
    Error(ErrorCode, String),
    /// Answered with `Moved`: a routing client or a peer asked a member that does not own the
    /// topic.
    Moved(Member),
}

fn check(h: &Handles, link: &Link, req: &ConsumerOpen) -> Result<(), Refused> {
    let invalid = |msg: String| Err(Refused::Error(ErrorCode::InvalidRequest, msg));
    if link.granted & features::CONSUMERS == 0 {
        return invalid("the CONSUMERS feature was not requested in Hello".into());
    }
    if h.health.phase() != Phase::Serving {
        return Err(Refused::Error(
            ErrorCode::Unavailable,
            "broker is not serving (starting or draining)".into(),
        ));
    }
    if !h.topics.is_durable(&req.topic) {
        return invalid(format!(
            "`{}` is not a durable topic: consumers read a durable topic's log (durable_topics)",
            req.topic
        ));
    }
    if h.topics.is_replicated(&req.topic) {
        return invalid(format!(
            "unsupported: `{}` is replicated (durable_replicas > 1), and consumers of replicated topics are not built yet",
            req.topic
        ));
    }
    if let Route::Peer(owner) = h.cluster.route(Kind::Topic, req.topic.as_bytes()) {
        if link.role != Role::Plain {
            // A routing client follows it to the owner (as with a subscription).
            h.metrics
                .cluster_moved
                .with_label_values(&["consume"])
                .inc();
            return Err(Refused::Moved(owner));
        }
        return invalid(format!(
            "unsupported here: consumers are served at the topic's owner only; `{}` is owned by {} ({})",
            req.topic, owner.id, owner.addr
        ));
    }
    if let Err(denied) = link
        .access
        .check(Operation::Subscribe, req.topic.as_bytes())
    {
        h.metrics.forbidden(&denied);
        return Err(Refused::Error(ErrorCode::Forbidden, denied.to_string()));
    }
    if let Some(dl) = &req.dead_letter {
        if *dl == req.topic {
            return invalid("the dead-letter topic is the consumer's own topic".into());
        }
        if let Err(denied) = link.access.check(Operation::Publish, dl.as_bytes()) {
            h.metrics.forbidden(&denied);
            return Err(Refused::Error(ErrorCode::Forbidden, denied.to_string()));
        }
    }
    if req.max_ack_pending > h.cfg.max_consumer_ack_pending {
        h.metrics.limit_refused(Limit::ConsumerAckPending);
        return Err(Refused::Error(
            ErrorCode::LimitExceeded,
            format!(
                "max_ack_pending {} is above max_consumer_ack_pending {}",
                req.max_ack_pending, h.cfg.max_consumer_ack_pending
            ),
        ));
    }
    Ok(())
}

fn join_refusal(h: &Handles, e: &JoinError) -> ErrorCode {
    match e {
        JoinError::TooManyConsumers { .. } => {
            h.metrics.limit_refused(Limit::ConsumersPerTopic);
            ErrorCode::LimitExceeded
        }
        JoinError::TooManyMembers { .. } => {
            h.metrics.limit_refused(Limit::ConsumerMembers);
            ErrorCode::LimitExceeded
        }
        JoinError::Mismatch { .. } => ErrorCode::InvalidRequest,
        JoinError::Unavailable { .. } => ErrorCode::Unavailable,
    }
}

/// Serves a consumer member's stream whose first frame was `req`.
pub async fn serve_consumer(
    h: Arc<Handles>,
    link: Link,
    req: ConsumerOpen,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: FrameBuf,
) {
    match check(&h, &link, &req) {
        Ok(()) => {}
        Err(Refused::Error(code, why)) => {
            reply::error(&mut send, &h.metrics, req.request_id, code, why).await;
            let _ = send.finish();
            return;
        }
        Err(Refused::Moved(owner)) => {
            let moved = Frame::Moved(Moved {
                request_id: req.request_id,
                epoch: h.cluster.epoch(),
                owner: owner.addr,
            });
            let _ = write_frame(&mut send, &moved).await;
            let _ = send.finish();
            return;
        }
    }
    let join = JoinRequest {
        topic: req.topic.clone(),
        consumer: req.consumer.clone(),
        settings: Settings {
            policy: Policy {
                ack_wait_ms: req.ack_wait_ms,
                max_deliver: req.max_deliver,
                backoff_ms: req.backoff_ms.clone(),
                max_ack_pending: req.max_ack_pending,
            },
            dead_letter: req.dead_letter.clone(),
        },
        start: req.start,
    };
    let mut member = match h.consumers.join(join).await {
        Ok(m) => m,
        Err(e) => {
            let code = join_refusal(&h, &e);
            reply::error(&mut send, &h.metrics, req.request_id, code, e.to_string()).await;
            let _ = send.finish();
            return;
        }
    };
    let ok = Frame::ConsumerOk(ConsumerOk {
        request_id: req.request_id,
        member_id: member.id,
    });
    if write_frame(&mut send, &ok).await.is_err() {
        return;
    }
    tracing::debug!(topic = %req.topic, consumer = %req.consumer, member = member.id, "consumer member joined");
    let (id, acks) = (member.id, member.tx.clone());
    let read_chunk = h.cfg.publish_chunk_bytes as usize;
    // Answers read from the member and not yet applied by the task: at most its
    // `max_ack_pending` (bounded by `max_consumer_ack_pending`); past that the reader waits,
    // and QUIC flow control stops the member.
    let in_flight = Arc::new(Semaphore::new(req.max_ack_pending.max(1) as usize));
    // Pings read from the member, answered by the writer (the stream's one writer); a few at
    // most wait, past that the reader does too.
    let (pong_tx, mut pong_rx) = tokio::sync::mpsc::channel::<Ping>(4);
    let reader = async {
        loop {
            let Ok(permit) = Arc::clone(&in_flight).acquire_owned().await else {
                return None;
            };
            match read_frame_within(&mut recv, &mut buf, &h.decoder, read_chunk, &link.allowance)
                .await
            {
                Ok(Some(Frame::ConsumerAck(a))) => {
                    let op = match a.op {
                        ConsumerAckOp::Ack => AckOp::Ack,
                        ConsumerAckOp::Nak { delay_ms } => AckOp::Nak { delay_ms },
                        ConsumerAckOp::InProgress => AckOp::InProgress,
                        ConsumerAckOp::Term => AckOp::Term,
                    };
                    let cmd = Command::Ack {
                        member: id,
                        position: a.position,
                        op,
                        permit,
                    };
                    if acks.send(cmd).is_err() {
                        return None;
                    }
                }
                Ok(Some(Frame::Ping(p))) => {
                    if pong_tx.send(p).await.is_err() {
                        return None;
                    }
                }
                Ok(Some(other)) => return Some(reply::unexpected(&other, "consumer")),
                Ok(None) => return None,
                Err(e) => return reply::read_error_reply(&e),
            }
        }
    };
    let with_headers = link.granted & features::HEADERS != 0;
    let writer = async {
        loop {
            let frame = tokio::select! {
                msg = member.rx.recv() => match msg {
                    Some(MemberMsg::Deliver(mut m)) => {
                        // A member's headers only on a connection granted them.
                        if !with_headers {
                            m.headers.clear();
                        }
                        Frame::ConsumerMessage(m)
                    }
                    Some(MemberMsg::End(code, why)) => return Some((code, why)),
                    None => return None,
                },
                Some(p) = pong_rx.recv() => Frame::Pong(p),
            };
            if write_frame(&mut send, &frame).await.is_err() {
                return None;
            }
        }
    };
    let end = tokio::select! {
        end = reader => end,
        end = writer => end,
    };
    if let Some((code, why)) = end {
        reply::error(&mut send, &h.metrics, req.request_id, code, why).await;
    }
    let _ = send.finish();
    drop(member);
    tracing::debug!(topic = %req.topic, consumer = %req.consumer, member = id, "consumer member left");
}
