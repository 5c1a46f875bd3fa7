//! Publish streams: decode, check, hand over.
//!
//! A publish stream's reader decodes `Publish`/`PublishBatch` frames (reading
//! `publish_chunk_bytes` at a time) and takes each request through three steps:
//! `classify` (a request, a ping, or a frame refused on this stream), `plan` (published
//! here, forwarded to the topic's owner, or refused with `Moved`) and submit (to one of the
//! connection's `pub_workers_per_conn` workers, see [`workers`], chosen by topic hash so one
//! connection's messages to one topic stay in order). Each worker's queue holds
//! `pub_queue_depth / workers` requests; when it is full the reader stops reading and QUIC flow
//! control pushes back on the publisher. Acks go back on the same stream ([`replies`]); a
//! `persisted` ack on a durable topic is charged to the broker's pending-ack budget
//! (`pubsub::pending_acks`, with the connection's share) before its request is handed on, and
//! waits for its log's fsync outside the stream's request window.
//!
//! In a cluster, a publish for a topic another member owns goes through the same worker (so
//! its order is kept) and is forwarded over the peer link; an acked one is acked only when the
//! owner acked it. A peer that sends an acked publish for a topic this broker does not own
//! (their views of the membership differ for a moment) is refused with `Moved`, so no ack is
//! ever given for a message not enqueued at the current owner. A request accepted here as the
//! owner that reaches its worker after a membership change moved the topic goes to the new
//! owner instead of the local topic (see `cluster::forward`).

pub mod budget;
pub mod replies;
pub mod workers;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_access::Operation;
use starling_config::{AckLevel, BrokerConfig};
use starling_placement::Kind;
use starling_proto::request::{is_inbox, reply_to};
use starling_proto::{
    AckMode, ErrorCode, Frame, FrameDecoder, IndexedHeaders, MSG_ID, Ping, ReadError, features,
    headers_len, msg_id,
};

use crate::cluster::forward::Forwarder;
use crate::cluster::replica_link::replica_id;
use crate::cluster::{Cluster, Member, Role, Route};
use crate::health::{Health, Phase};
use crate::metrics::{Limit, Metrics, idle_stream};
use crate::pubsub::ack::AckToken;
use crate::pubsub::topic::{TopicMsg, Topics};
use crate::server::frames::{Allowance, FrameBuf, read_frame_within};
use crate::server::reply;
use crate::state::{PublishGate, Subscriptions};
use budget::{Budget, InFlight};
use replies::Replies;
pub use workers::Publisher;
use workers::{Job, WorkersGone};

/// What a publish stream's handler and its connection's workers use.
pub struct Handles {
    /// The effective config (queue depths, chunk size, `ack_level`).
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// Lifecycle state (publishes are refused while draining).
    pub health: Arc<Health>,
    /// Topic registry.
    pub topics: Arc<Topics>,
    /// Who owns each topic.
    pub cluster: Arc<Cluster>,
    /// Publishes for topics other members own.
    pub forward: Forwarder,
    /// The in-flight count and byte budget.
    pub gate: Arc<PublishGate>,
    /// Live subscriptions (whether a request has responders).
    pub subscriptions: Arc<Subscriptions>,
}

/// One decoded publish request.
struct Request {
    request_id: u64,
    ack: AckMode,
    topic: String,
    payloads: Vec<Bytes>,
    /// The headers of the payloads that have any, by index (`HEADERS` only).
    headers: Vec<IndexedHeaders>,
}

/// What a frame on a publish stream is.
enum Classified {
    /// A publish request.
    Request(Request),
    /// A ping, answered with a pong.
    Ping(Ping),
    /// A frame this stream does not take, answered with an error.
    Refused {
        request_id: u64,
        code: ErrorCode,
        message: String,
    },
}

/// Tells a request from a ping and from a frame this stream does not take.
fn classify(frame: Frame, granted: u64) -> Classified {
    match frame {
        Frame::Publish(p) if !p.headers.is_empty() && granted & features::HEADERS == 0 => {
            no_headers(p.request_id)
        }
        Frame::PublishBatch(p) if !p.headers.is_empty() && granted & features::HEADERS == 0 => {
            no_headers(p.request_id)
        }
        Frame::Publish(p) => Classified::Request(Request {
            request_id: p.request_id,
            ack: p.ack,
            topic: p.topic,
            payloads: vec![p.payload],
            headers: if p.headers.is_empty() {
                Vec::new()
            } else {
                vec![IndexedHeaders {
                    index: 0,
                    headers: p.headers,
                }]
            },
        }),
        Frame::PublishBatch(p) if granted & features::BATCH_PUBLISH == 0 => Classified::Refused {
            request_id: p.request_id,
            code: ErrorCode::InvalidRequest,
            message: "the BATCH_PUBLISH feature was not requested in Hello".into(),
        },
        Frame::PublishBatch(p) => Classified::Request(Request {
            request_id: p.request_id,
            ack: p.ack,
            topic: p.topic,
            payloads: p.payloads,
            headers: p.headers,
        }),
        Frame::Ping(p) => Classified::Ping(p),
        other => {
            let (code, message) = reply::unexpected(&other, "publish");
            Classified::Refused {
                request_id: reply::request_id(&other),
                code,
                message,
            }
        }
    }
}

/// A publish carrying headers on a connection not granted `HEADERS` (a peer's, or a client
/// that did not ask): refused rather than delivered without them.
fn no_headers(request_id: u64) -> Classified {
    Classified::Refused {
        request_id,
        code: ErrorCode::InvalidRequest,
        message: "message headers need the HEADERS feature, which this connection was not granted"
            .into(),
    }
}

/// Why a request's headers are refused: the error to answer with.
struct HeaderRefusal {
    code: ErrorCode,
    message: String,
}

/// Checks a request's headers (none passes): each message within `max_headers_per_message`
/// and `max_header_bytes_per_message` (`LimitExceeded`, counted). A durable topic's log keeps
/// them (`durable::record`), a replicated topic's Raft entry too (`starling_replica::Batch`);
/// a forwarded publish and a relayed batch carry them between members. Returns the encoded
/// bytes of all the request's headers, which its publish budget charge includes.
fn check_headers(h: &Handles, req: &Request) -> Result<usize, HeaderRefusal> {
    if req.headers.is_empty() {
        return Ok(0);
    }
    let max_count = h.cfg.max_headers_per_message as usize;
    let max_bytes = h.cfg.max_header_bytes_per_message as usize;
    let mut total = 0usize;
    for entry in &req.headers {
        if entry.headers.len() > max_count {
            h.metrics.limit_refused(Limit::HeadersPerMessage);
            return Err(HeaderRefusal {
                code: ErrorCode::LimitExceeded,
                message: format!(
                    "message {} has {} headers, more than this broker allows \
                     (max_headers_per_message = {max_count})",
                    entry.index,
                    entry.headers.len()
                ),
            });
        }
        let bytes = headers_len(&entry.headers);
        if bytes > max_bytes {
            h.metrics.limit_refused(Limit::HeaderBytesPerMessage);
            return Err(HeaderRefusal {
                code: ErrorCode::LimitExceeded,
                message: format!(
                    "message {} has {bytes} bytes of headers, more than this broker allows \
                     (max_header_bytes_per_message = {max_bytes})",
                    entry.index
                ),
            });
        }
        check_msg_id(h, entry)?;
        total = total.saturating_add(bytes);
    }
    Ok(total)
}

/// Checks a message's id (the `Starling-Msg-Id` header, publish de-duplication), if it has
/// one: not empty (`InvalidRequest`) and within `max_msg_id_bytes` (`LimitExceeded`,
/// counted). The topic task keeps the window (`pubsub::dedup`).
fn check_msg_id(h: &Handles, entry: &IndexedHeaders) -> Result<(), HeaderRefusal> {
    let Some(id) = msg_id(&entry.headers) else {
        return Ok(());
    };
    if id.is_empty() {
        return Err(HeaderRefusal {
            code: ErrorCode::InvalidRequest,
            message: format!("message {} has an empty {MSG_ID}", entry.index),
        });
    }
    let max = h.cfg.max_msg_id_bytes as usize;
    if id.len() > max {
        h.metrics.limit_refused(Limit::MsgIdBytes);
        return Err(HeaderRefusal {
            code: ErrorCode::LimitExceeded,
            message: format!(
                "message {} has a {}-byte {MSG_ID}, longer than this broker allows \
                 (max_msg_id_bytes = {max})",
                entry.index,
                id.len()
            ),
        });
    }
    Ok(())
}

/// Checks each message's payload against its topic's `max_message_bytes`, when the topic's
/// policy (the topics document, `durable::policy`) sets one below `max_frame_bytes` (which
/// the decoder enforces for every topic): a larger one refuses the whole request with
/// `LimitExceeded`, counted, before anything of it is handed on (so nothing of it is stored).
fn check_message_size(h: &Handles, req: &Request) -> Result<(), String> {
    let Some(max) = h.topics.max_message_bytes(&req.topic) else {
        return Ok(());
    };
    let Some((index, payload)) = req
        .payloads
        .iter()
        .enumerate()
        .find(|(_, p)| p.len() > max as usize)
    else {
        return Ok(());
    };
    h.metrics.limit_refused(Limit::MessageBytes);
    Err(format!(
        "message {index} has a {}-byte payload, more than topic `{}` allows \
         (max_message_bytes = {max})",
        payload.len(),
        req.topic
    ))
}

/// Whether the connection may publish to `topic` as a reply: it is a reply inbox named by a
/// request recently delivered to the connection (its permissions are checked first; a
/// publish they allow needs no grant).
fn may_reply(h: &Handles, publisher: &Publisher, topic: &str) -> bool {
    is_inbox(topic) && h.topics.inboxes().may_reply(publisher.conn_id(), topic)
}

/// Whether `req` is a request: one message with a `reply-to` header, on a connection granted
/// `REQUEST`.
fn is_request(publisher: &Publisher, req: &Request) -> bool {
    publisher.granted() & features::REQUEST != 0
        && req.payloads.len() == 1
        && req
            .headers
            .first()
            .is_some_and(|first| reply_to(&first.headers).is_some())
}

/// A request ([`is_request`]) is refused with `NoResponders` when nothing subscribes to its
/// topic now: a subscription naming the topic, or a wildcard one reaching it. Decided by the
/// topic's owner, which sees every subscriber (the other members' relays and pattern feeds
/// subscribe there): a member that forwards the request passes the owner's answer on.
/// Counted in `starling_requests_total` and `starling_no_responders_total` at the owner.
fn check_request(h: &Handles, publisher: &Publisher, req: &Request) -> Result<(), String> {
    if !is_request(publisher, req)
        || h.cluster.route(Kind::Topic, req.topic.as_bytes()) != Route::Local
    {
        return Ok(());
    }
    h.metrics.requests.inc();
    if h.subscriptions.has_topic(&req.topic) || h.topics.pattern_subscribed(&req.topic) {
        return Ok(());
    }
    h.metrics.no_responders.inc();
    Err(format!("no subscriber on topic `{}`", req.topic))
}

/// Where a request goes.
enum Plan {
    /// Into the local topic; routed here in the view of this membership epoch.
    Local(u64),
    /// To the topic's owner.
    Forward(Member),
    /// Refused with `Moved`: a peer's acked publish for a topic `owner` owns.
    Moved(Member),
}

/// Where a request for `topic` from a connection of `role` goes, in the current view. A
/// replicated topic's publish goes to its Raft leader when a replica here knows it (the
/// placement owner, one of the replicas, otherwise).
fn plan(cluster: &Cluster, topics: &Topics, role: Role, ack: AckMode, topic: &str) -> Plan {
    let (route, epoch) = cluster.route_at(Kind::Topic, topic.as_bytes());
    if topics.is_replicated(topic)
        && let Some(leader) = topics.replication().leaders.get(topic)
    {
        if leader == replica_id(cluster.self_id()) {
            return Plan::Local(epoch);
        }
        let view = cluster.view();
        if let Some(m) = view
            .current
            .members()
            .iter()
            .find(|m| replica_id(&m.id) == leader)
        {
            return match (role, ack) {
                // Brokers without a replica send a replicated topic's publishes to its
                // placement owner, which need not lead it (after a leader change or a replica
                // move): the owner passes them on to the leader, one hop; any other replica
                // refuses them (never forwarded twice there).
                (Role::Peer, AckMode::Ack) if route == Route::Local => Plan::Forward(m.clone()),
                (Role::Peer, AckMode::Ack) => Plan::Moved(m.clone()),
                (Role::Peer, AckMode::None) => Plan::Local(epoch),
                _ => Plan::Forward(m.clone()),
            };
        }
    }
    match route {
        Route::Local => Plan::Local(epoch),
        // A peer is served here (never forwarded twice), but views differ for a moment: never
        // ack what the owner did not enqueue.
        Route::Peer(owner) if role == Role::Peer => match ack {
            AckMode::Ack => Plan::Moved(owner),
            AckMode::None => Plan::Local(epoch),
        },
        Route::Peer(owner) => Plan::Forward(owner),
    }
}

/// Serves a publish stream whose first frame is `first`; every request's topic is checked
/// against the connection's access (a refused one is answered with `Forbidden`, acked or not,
/// and the stream goes on).
pub async fn serve_publish_stream(
    h: Arc<Handles>,
    publisher: Publisher,
    allowance: Allowance,
    first: Frame,
    send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    mut buf: FrameBuf,
) {
    let depth = h.cfg.pub_queue_depth.max(1) as usize;
    let (replies, writer) = Replies::start(Arc::clone(&h.metrics), send, depth);
    let read_chunk = h.cfg.publish_chunk_bytes as usize;
    let idle = Duration::from_millis(h.cfg.stream_idle_timeout_ms);
    let mut next = Some(first);
    loop {
        let frame = match next.take() {
            Some(f) => f,
            None => {
                // A frame already buffered (small frames arrive many to a read) is taken without
                // arming the idle timer; only a read that has to wait for the client is timed.
                let buffered = match buf.decode(&h.decoder) {
                    Ok(Some(f)) => Some(Ok(Some(f))),
                    Ok(None) => None,
                    Err(e) => Some(Err(ReadError::Decode(e))),
                };
                let read = match buffered {
                    Some(read) => Ok(read),
                    None => {
                        let read = read_frame_within(
                            &mut recv, &mut buf, &h.decoder, read_chunk, &allowance,
                        );
                        tokio::time::timeout(idle, read).await
                    }
                };
                let Ok(read) = read else {
                    h.metrics
                        .streams_idle_closed
                        .with_label_values(&[idle_stream::PUBLISH])
                        .inc();
                    let (code, message) = reply::idle(idle);
                    replies.error(0, code, message).await;
                    let _ = recv.stop(reply::stop_code(code));
                    break;
                };
                match read {
                    Ok(Some(f)) => f,
                    Ok(None) | Err(ReadError::Io(_)) => break,
                    Err(e) => {
                        reply::count_limit(&h.metrics, &e);
                        if let Some((code, message)) = reply::read_error_reply(&e) {
                            replies.error(0, code, message).await;
                        }
                        break;
                    }
                }
            }
        };
        let req = match classify(frame, publisher.granted()) {
            Classified::Request(req) => req,
            Classified::Ping(p) => {
                replies.pong(p).await;
                continue;
            }
            Classified::Refused {
                request_id,
                code,
                message,
            } => {
                replies.error(request_id, code, message).await;
                continue;
            }
        };
        if let Err(denied) = publisher
            .access()
            .check(Operation::Publish, req.topic.as_bytes())
            && !may_reply(&h, &publisher, &req.topic)
        {
            h.metrics.forbidden(&denied);
            let why = denied.to_string();
            replies
                .error(req.request_id, ErrorCode::Forbidden, why)
                .await;
            continue;
        }
        if let Err(why) = check_request(&h, &publisher, &req) {
            replies
                .error(req.request_id, ErrorCode::NoResponders, why)
                .await;
            continue;
        }
        if let Err(why) = check_message_size(&h, &req) {
            replies
                .error(req.request_id, ErrorCode::LimitExceeded, why)
                .await;
            continue;
        }
        let header_bytes = match check_headers(&h, &req) {
            Ok(bytes) => bytes,
            Err(refusal) => {
                replies
                    .error(req.request_id, refusal.code, refusal.message)
                    .await;
                continue;
            }
        };
        // What a client's request holds in memory counts against the broker-wide budget (its
        // bytes and each payload's handles, `budget::charge`, and its headers at their encoded
        // size); a member's was counted where it entered the cluster.
        let bytes: usize = req.payloads.iter().map(Bytes::len).sum();
        let budget = if publisher.role() == Role::Peer {
            None
        } else {
            let charged = budget::charge(bytes, req.payloads.len()).saturating_add(header_bytes);
            match Budget::take(&h.gate, &h.metrics, charged).await {
                Some(b) => Some(b),
                None => break,
            }
        };
        // Counted before the drain check, so a drain that starts now waits for this request.
        let in_flight = InFlight::new(&h.gate, budget);
        if h.health.phase() == Phase::Draining {
            // Refused whatever the ack mode: a fire-and-forget publisher learns of the refusal
            // too (protocol §6), and a publish window's ack request gets its answer.
            let why = "broker is draining";
            replies
                .error(req.request_id, ErrorCode::Unavailable, why)
                .await;
            continue;
        }
        h.metrics.publish_requests.inc();
        let submitted = match plan(&h.cluster, &h.topics, publisher.role(), req.ack, &req.topic) {
            Plan::Moved(owner) => {
                h.metrics
                    .cluster_moved
                    .with_label_values(&["publish"])
                    .inc();
                let why = format!(
                    "topic owned by {}; the sender's membership is stale",
                    owner.id
                );
                replies.error(req.request_id, ErrorCode::Moved, why).await;
                continue;
            }
            Plan::Forward(owner) => {
                let request = is_request(&publisher, &req);
                submit_forward(&replies, &publisher, req, owner, request, in_flight).await
            }
            Plan::Local(epoch) => {
                submit_local(&h, &replies, &publisher, req, bytes, epoch, in_flight).await
            }
        };
        if submitted.is_err() {
            break;
        }
    }
    drop(replies);
    // Pending commit acks still hold senders; the writer ends once they are all completed.
    let _ = writer.await;
    tracing::trace!("publish stream closed");
}

/// Hands a request to the worker that forwards it to the topic's owner. A `request`
/// ([`is_request`]) without an ack still learns the owner's refusal (`NoResponders`), as it
/// would at the owner: it is forwarded acked, and only a refusal is answered.
async fn submit_forward(
    replies: &Replies,
    publisher: &Publisher,
    req: Request,
    owner: Member,
    request: bool,
    in_flight: InFlight,
) -> Result<(), WorkersGone> {
    let count = req.payloads.len() as u32;
    let token = match req.ack {
        AckMode::Ack => replies.token(req.request_id, count, None).await,
        AckMode::None if request => replies
            .token(req.request_id, count, None)
            .await
            .map(AckToken::refusals_only),
        AckMode::None => None,
    };
    let job = Job::Forward {
        owner,
        payloads: req.payloads,
        headers: req.headers,
        ack: token,
    };
    publisher.submit(req.topic, job, in_flight).await
}

/// Hands a request to the worker that publishes it into the local topic, unless `max_topics`
/// refuses the topic; acks it on receipt, at commit or once persisted, by `ack_level`.
async fn submit_local(
    h: &Handles,
    replies: &Replies,
    publisher: &Publisher,
    req: Request,
    bytes: usize,
    epoch: u64,
    in_flight: InFlight,
) -> Result<(), WorkersGone> {
    if let Err(limit) = h.topics.reserve(&req.topic) {
        // Refused before it is counted or acked; without an ack the refusal counter is the
        // only trace.
        h.metrics.limit_refused(Limit::Topics);
        if req.ack == AckMode::Ack {
            let why = limit.to_string();
            replies
                .error(req.request_id, ErrorCode::LimitExceeded, why)
                .await;
        }
        return Ok(());
    }
    let count = req.payloads.len() as u32;
    // Counted where the topic lives, so a cluster's sum counts each message once (a forwarded
    // one is counted in `starling_cluster_forwarded_total` on the way).
    h.metrics.published_messages.inc_by(count.into());
    h.metrics.published_bytes.inc_by(bytes as u64);
    // A `persisted` ack on a single-copy durable topic will wait for its log's fsync: it is
    // charged to the pending-ack budget first (waiting for room there, before it takes its
    // place in the request window), and gives its window place back once in the log's wait
    // list. A replicated topic's waits for its Raft commit and keeps its window place.
    let pending = if req.ack == AckMode::Ack
        && h.cfg.ack_level == AckLevel::Persisted
        && h.topics.is_durable(&req.topic)
        && !h.topics.is_replicated(&req.topic)
    {
        h.gate.pending_acks.take(publisher.pending_share()).await
    } else {
        None
    };
    let token = match req.ack {
        AckMode::Ack => replies.token(req.request_id, count, pending).await,
        AckMode::None => None,
    };
    // `persisted` waits in the topic task for its durable log (on a durable topic; on any
    // other topic it completes at commit, as `committed` does).
    let (commit_ack, receipt_ack) = match h.cfg.ack_level {
        AckLevel::Received => (None, token),
        AckLevel::Committed => (token, None),
        AckLevel::Persisted => (
            token.map(|mut t| {
                t.persisted = true;
                t
            }),
            None,
        ),
    };
    let with_headers = req.headers.len() as u64;
    h.metrics.header_messages.inc_by(with_headers);
    let msg = TopicMsg {
        payloads: req.payloads,
        headers: req.headers,
        ack: commit_ack,
        origin: None,
        hold: None,
    };
    publisher
        .submit(req.topic, Job::Local(msg, epoch), in_flight)
        .await?;
    if let Some(t) = receipt_ack {
        t.ack();
    }
    Ok(())
}
