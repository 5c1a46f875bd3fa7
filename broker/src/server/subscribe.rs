//! Subscription streams: `Subscribe` → `SubscribeOk`, then EventBatches written by the
//! subscriber's writer lane until the client unsubscribes, finishes the stream or disconnects.
//! A `Subscribe` with a resume position first gets the topic's retained events from there on
//! (see `pubsub::retained`), or its durable log's when the retained tail does not reach back.
//! One from a time (`start_time_ms`, needs the `SUBSCRIBE_FROM_TIME` feature) starts at the
//! first batch stamped at or after it, found by the topic's task and then served the same way.
//!
//! In a cluster, a subscription for a topic another member owns is served here all the same
//! for a plain client (an upstream subscription at the owner feeds the local topic; a new one
//! starts where the subscription asked, position or time, or where the local topic's relay
//! stopped; a resume position the local retained tail does not reach back to is first fed
//! from the owner by a catch-up of its own, `cluster::catchup`; a live one is answered only
//! once the upstream is subscribed at the owner, so every publish made after its `SubscribeOk`
//! reaches it), answered
//! with `Moved` for a routing client or a peer, and ended with a `Moved` error when a
//! membership change moves the topic away from this broker while a routing client or a peer
//! is subscribed (they resume at the new owner), after a short grace and a drain of what this
//! broker accepted as the owner.
//!
//! A `Subscribe` whose topic is a pattern (`orders.*`, `orders.>`; on a connection granted the
//! `WILDCARDS` feature) is a wildcard subscription: live only, allowed when the user may
//! subscribe to every topic the pattern can match, within
//! `max_wildcard_subscriptions_per_connection`, served by the topic registry (every matching
//! topic, existing or created later), each batch after a `BatchTopic`. In a cluster the
//! topics it matches have many owners: the local topics serve the ones this broker owns, and
//! a feed (`cluster::fan_in`) holds one subscription of the same pattern at every other
//! member, which serves it the topics it owns; the `SubscribeOk` waits (a few seconds at
//! most) until those are open, so a publish made after it reaches the subscriber. A
//! client's reply inbox (`_INBOX.<token>.>`) and a queue group of a pattern are fed the same
//! way, so request/reply and pattern groups work across members. A peer's pattern
//! subscription (one member's feed) is served here, for the topics this broker owns, and is
//! not counted against `max_wildcard_subscriptions_per_connection`.
//!
//! A `Subscribe` with a group name (on a connection granted `QUEUE_GROUPS`) joins that queue
//! group of its topic or pattern (docs/queue-groups.md): live only, the same `subscribe`
//! permission as a plain one, within `max_groups_per_subject` and `max_group_members`; each
//! batch goes to one member of the group. In a cluster a group is served by the topic's owner
//! alone, so its members share one copy of every event wherever they connected: a routing
//! client or a peer is sent there with `Moved` like any subscription, and a plain client's
//! group subscription at another member is fed from the owner (`cluster::fan_in`: one member
//! of the owner's group per such client, following the owner). When a membership change moves
//! the topic away, the routing clients' and peers' group subscriptions here end with `Moved`,
//! so they meet again at the new owner; a plain client's stays, fed from the new owner.

use std::sync::Arc;
use std::time::Duration;

use starling_access::{Operation, Pattern};
use starling_config::BrokerConfig;
use starling_placement::Kind;
use starling_proto::request::{inbox_token, is_inbox, valid_inbox_token};
use starling_proto::{
    ErrorCode, Frame, FrameDecoder, Moved, Position, StartAt, Subscribe, SubscribeOk, features,
    is_subscription_pattern, write_frame,
};
use tokio::sync::oneshot;

use crate::auth::Access;
use crate::cluster::fan_in::{FanIn, Feed};
use crate::cluster::upstream::Upstreams;
use crate::cluster::{Cluster, Member, Role, Route};
use crate::health::{Health, Phase};
use crate::metrics::{Limit, Metrics};
use crate::pubsub::groups::{GroupBudget, GroupLimit, Membership};
use crate::pubsub::lanes::Lanes;
use crate::pubsub::subscriber::{Identity, QueuePolicy, Subscriber};
use crate::pubsub::topic::Topics;
use crate::server::admit::Slot;
use crate::server::frames::{Allowance, FrameBuf, read_frame_within};
use crate::server::link::Link;
use crate::server::quic_sink::QuicSink;
use crate::server::reply;
use crate::state::{Registered, Subscriptions};

/// What a subscription stream's handler uses.
pub struct Handles {
    /// The effective config (subscriber queue and policy, `max_subscriptions`).
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// Lifecycle state (no subscriptions unless serving).
    pub health: Arc<Health>,
    /// Topic registry.
    pub topics: Arc<Topics>,
    /// Writer lanes (a subscriber is pinned to one).
    pub lanes: Arc<Lanes>,
    /// Who owns each topic.
    pub cluster: Arc<Cluster>,
    /// Subscriptions held at topic owners for local subscribers.
    pub upstreams: Arc<Upstreams>,
    /// Feeds of pattern subscriptions from the other members.
    pub fan_in: Arc<FanIn>,
    /// Live subscriptions.
    pub subscriptions: Arc<Subscriptions>,
    /// The queue groups' budgets.
    pub groups: Arc<GroupBudget>,
}

/// Longest a subscription ended by an owner change waits for its queue to be written.
const KICK_DRAIN: Duration = Duration::from_secs(2);
/// How long a subscription ended by an owner change keeps receiving before its topic is
/// flushed: publishes this broker accepted as the owner just before the change reach the topic
/// within it.
const KICK_GRACE: Duration = Duration::from_millis(250);

/// Why a `Subscribe` is answered at once instead of served.
enum Refusal {
    /// With a typed error.
    Error(ErrorCode, String),
    /// With `Moved`: a routing client or a peer subscribes at the topic's owner.
    Moved(Member),
}

/// The pattern of a wildcard subscription, when `req` is one (see the module doc); a
/// pattern that does not parse is refused.
fn wildcard(link: &Link, req: &Subscribe) -> Result<Option<Pattern>, Refusal> {
    if link.granted & features::WILDCARDS == 0 || !is_subscription_pattern(&req.topic) {
        return Ok(None);
    }
    Pattern::parse(&req.topic).map(Some).map_err(|e| {
        Refusal::Error(
            ErrorCode::InvalidRequest,
            format!("not a valid subscription pattern: {e}"),
        )
    })
}

/// Checks a wildcard `Subscribe`: live only, and the user may subscribe to every topic the
/// pattern can match.
fn check_wildcard(
    h: &Handles,
    link: &Link,
    req: &Subscribe,
    pattern: &Pattern,
) -> Result<(), Refusal> {
    if req.start != StartAt::Live {
        let msg = "a wildcard subscription is live only: no resume position or start time";
        return Err(Refusal::Error(ErrorCode::InvalidRequest, msg.into()));
    }
    if let Err(denied) = link.access.check_pattern(Operation::Subscribe, pattern) {
        h.metrics.forbidden(&denied);
        return Err(Refusal::Error(ErrorCode::Forbidden, denied.to_string()));
    }
    Ok(())
}

/// Checks a subscription under `_INBOX` (a requester's reply inbox, docs/subjects.md): live,
/// naming `_INBOX.<token>.…` with a valid token, which the connection then holds (one per
/// connection; another connection's is refused with `Forbidden`). The user's `subscribe`
/// rules do not apply: a requester may always subscribe to its own inbox. Its pattern, when
/// it is a wildcard one (fed from every member in a cluster); a single inbox topic another
/// member owns is relayed here for a plain client and answered with `Moved` for a routing
/// one, like any topic.
fn check_inbox(h: &Handles, link: &Link, req: &Subscribe) -> Result<Option<Pattern>, Refusal> {
    let invalid = |msg: &str| Err(Refusal::Error(ErrorCode::InvalidRequest, msg.into()));
    if req.start != StartAt::Live {
        return invalid("a reply inbox subscription is live only");
    }
    let Some(token) = inbox_token(&req.topic).filter(|t| valid_inbox_token(t)) else {
        return invalid(
            "a reply inbox is `_INBOX.<token>.…` with a token of at least 16 ASCII letters or \
             digits",
        );
    };
    if let Err(refused) = h.topics.inboxes().claim(link.id, token) {
        return Err(Refusal::Error(ErrorCode::Forbidden, refused.to_string()));
    }
    let pattern = wildcard(link, req)?;
    if pattern.is_none() {
        to_owner(h, link.role, &req.topic)?;
    }
    if pattern.is_none()
        && let Err(limit) = h.topics.reserve(&req.topic)
    {
        h.metrics.limit_refused(Limit::Topics);
        return Err(Refusal::Error(ErrorCode::LimitExceeded, limit.to_string()));
    }
    Ok(pattern)
}

/// Another member's feed of a requester's inbox, claiming its token here while it lives (see
/// `pubsub::inboxes`): no user here can subscribe to that inbox meanwhile.
struct FeedClaim {
    inboxes: Arc<crate::pubsub::inboxes::Inboxes>,
    token: String,
}

impl Drop for FeedClaim {
    fn drop(&mut self) {
        self.inboxes.release_feed(&self.token);
    }
}

/// For a peer's subscription under `_INBOX` (another member feeding its requester's inbox):
/// the token's claim here, refused (`Forbidden`) when a client here holds it. `None` for
/// every other subscription.
fn claim_fed_inbox(h: &Handles, role: Role, req: &Subscribe) -> Result<Option<FeedClaim>, Refusal> {
    if role != Role::Peer || !is_inbox(&req.topic) {
        return Ok(None);
    }
    let Some(token) = inbox_token(&req.topic).filter(|t| valid_inbox_token(t)) else {
        let msg = "a reply inbox is `_INBOX.<token>.…` with a valid token";
        return Err(Refusal::Error(ErrorCode::InvalidRequest, msg.into()));
    };
    let inboxes = Arc::clone(h.topics.inboxes());
    if let Err(refused) = inboxes.claim_feed(token) {
        h.metrics.inbox_refused.inc();
        return Err(Refusal::Error(ErrorCode::Forbidden, refused.to_string()));
    }
    Ok(Some(FeedClaim {
        inboxes,
        token: token.to_string(),
    }))
}

/// Checks a queue-group `Subscribe` (see the module doc): the connection was granted
/// `QUEUE_GROUPS`, the subscription is live, and it is not a reply inbox.
fn check_group(link: &Link, req: &Subscribe) -> Result<(), Refusal> {
    let invalid = |msg: String| Err(Refusal::Error(ErrorCode::InvalidRequest, msg));
    if req.group.is_none() {
        return Ok(());
    }
    if link.granted & features::QUEUE_GROUPS == 0 {
        return invalid("the QUEUE_GROUPS feature was not requested in Hello".into());
    }
    if req.start != StartAt::Live {
        return invalid(
            "a queue-group subscription is live only: no resume position or start time".into(),
        );
    }
    if is_inbox(&req.topic) {
        return invalid("a reply inbox has no queue groups".into());
    }
    Ok(())
}

/// Checks a `Subscribe` before anything is created for it: a start time comes with the
/// feature it needs, the broker serves, the connection's user may subscribe to the topic (the
/// retained replay included), the topic is not another member's (for a routing client or a
/// peer), and `max_topics` admits it. For a wildcard subscription, [`check_wildcard`] instead
/// of the last three; its pattern is returned.
fn check(h: &Handles, link: &Link, req: &Subscribe) -> Result<Option<Pattern>, Refusal> {
    let (role, access) = (link.role, &link.access);
    if matches!(req.start, StartAt::TimeMs(_)) && link.granted & features::SUBSCRIBE_FROM_TIME == 0
    {
        let msg = "the SUBSCRIBE_FROM_TIME feature was not requested in Hello";
        return Err(Refusal::Error(ErrorCode::InvalidRequest, msg.into()));
    }
    if h.health.phase() != Phase::Serving {
        let msg = "broker is not serving (starting or draining)";
        return Err(Refusal::Error(ErrorCode::Unavailable, msg.into()));
    }
    check_group(link, req)?;
    if is_inbox(&req.topic) && link.role != Role::Peer {
        return check_inbox(h, link, req).inspect_err(|_| h.metrics.inbox_refused.inc());
    }
    if let Some(pattern) = wildcard(link, req)? {
        check_wildcard(h, link, req, &pattern)?;
        return Ok(Some(pattern));
    }
    if let Err(denied) = access.check(Operation::Subscribe, req.topic.as_bytes()) {
        h.metrics.forbidden(&denied);
        return Err(Refusal::Error(ErrorCode::Forbidden, denied.to_string()));
    }
    to_owner(h, role, &req.topic)?;
    if let Err(limit) = h.topics.reserve(&req.topic) {
        h.metrics.limit_refused(Limit::Topics);
        return Err(Refusal::Error(ErrorCode::LimitExceeded, limit.to_string()));
    }
    Ok(None)
}

/// A routing client's or a peer's subscription to one topic another member owns goes there:
/// `Moved` (counted); a plain client's is served here.
fn to_owner(h: &Handles, role: Role, topic: &str) -> Result<(), Refusal> {
    if role != Role::Plain
        && let Route::Peer(owner) = h.cluster.route(Kind::Topic, topic.as_bytes())
    {
        h.metrics
            .cluster_moved
            .with_label_values(&["subscribe"])
            .inc();
        return Err(Refusal::Moved(owner));
    }
    Ok(())
}

/// Answers a refused `Subscribe` and finishes the stream.
async fn refuse(h: &Handles, req: &Subscribe, refusal: Refusal, mut send: quinn::SendStream) {
    match refusal {
        Refusal::Error(code, why) => {
            reply::error(&mut send, &h.metrics, req.request_id, code, why).await;
        }
        Refusal::Moved(owner) => {
            let moved = Frame::Moved(Moved {
                request_id: req.request_id,
                epoch: h.cluster.epoch(),
                owner: owner.addr,
            });
            let _ = write_frame(&mut send, &moved).await;
        }
    }
    let _ = send.finish();
}

/// Serves a subscription stream whose first frame was `req`, until the client unsubscribes,
/// finishes the stream or disconnects, or its topic moves away.
pub async fn serve_subscription(
    h: Arc<Handles>,
    link: Link,
    req: Subscribe,
    send: quinn::SendStream,
    recv: quinn::RecvStream,
    buf: FrameBuf,
) {
    let (conn_id, role) = (link.id, link.role);
    let pattern = match check(&h, &link, &req) {
        Ok(pattern) => pattern,
        Err(refusal) => return refuse(&h, &req, refusal, send).await,
    };
    let _feed_claim = match claim_fed_inbox(&h, role, &req) {
        Ok(claim) => claim,
        Err(refusal) => return refuse(&h, &req, refusal, send).await,
    };
    let id = h.subscriptions.next_id();
    let lane = h.lanes.picker.pick(id, conn_id);
    let sub = Arc::new(Subscriber::new(
        Identity {
            id,
            conn_id,
            lane,
            topic: Arc::from(req.topic.as_str()),
            headers: link.granted & features::HEADERS != 0,
            group: req.group.as_deref().map(Arc::from),
        },
        QueuePolicy {
            policy: h.cfg.slow_subscriber_policy,
            capacity: h.cfg.subscriber_queue_capacity as usize,
        },
        Box::new(QuicSink::new(send, link.quic.clone())),
        Arc::clone(h.lanes.counters()),
        Arc::clone(&h.lanes.queue_budget),
    ));
    let kick = Arc::new(tokio::sync::Notify::new());
    let Some((counted, behind)) = register(&h, &link, &req, &sub, &kick, pattern.as_ref()).await
    else {
        return;
    };
    if let Some(behind) = behind {
        // Fed from the owner first if its topic here holds it back (a relay whose retained
        // tail does not reach back to its resume position, `cluster::catchup`).
        h.upstreams.catch_up(Arc::clone(&sub), behind);
    }
    if role == Role::Plain {
        reconcile_upstreams(&h.upstreams, &h.subscriptions);
    }
    tracing::debug!(id, topic = %req.topic, lane, ?role, start = ?req.start, server = %h.cluster.self_id(), "subscribed");

    let watch = Permissions {
        access: &link.access,
        changes: link.access.changes().filter(|_| !is_inbox(&req.topic)),
        pattern: pattern.as_ref(),
    };
    serve_requests(&h, &req, &sub, &kick, watch, &link.allowance, recv, buf).await;
    forget(&h, &sub, pattern.as_ref());
    if counted.2.is_some() {
        drop(counted);
        h.metrics.queue_group_members.dec();
        h.metrics.queue_groups.set(gauge(h.groups.groups()));
    }
    // Finished after the replies still queued (a `Moved`); nobody waits for the far end.
    drop(sub.end());
    if role == Role::Plain {
        reconcile_upstreams(&h.upstreams, &h.subscriptions);
    }
    tracing::debug!(id, topic = %req.topic, ?role, "subscription ended");
}

/// How long a live subscription to a topic another member owns waits for its upstream to be
/// subscribed at the owner before its `SubscribeOk` (see `register`). Bounded so an
/// unreachable owner delays the answer by at most this: the subscription is then served all
/// the same and gets the owner's events from when its upstream connects.
const UPSTREAM_LIVE_WAIT: Duration = Duration::from_secs(5);

/// Queues `frame` to the subscriber, after whatever is queued (its one writer, the lane,
/// writes it).
async fn send(h: &Handles, sub: &Arc<Subscriber>, frame: &Frame) {
    if sub.reply(frame.to_bytes()).await {
        h.lanes.schedule(Arc::clone(sub)).await;
    }
}

/// A typed error frame, counted.
fn error_frame(h: &Handles, request_id: u64, code: ErrorCode, message: impl Into<String>) -> Frame {
    reply::counted_error(&h.metrics, request_id, code, message)
}

/// Refuses a `Subscribe` past `limit`: counts it, answers `LimitExceeded` with `why` and
/// finishes the stream.
async fn refuse_past_limit(
    h: &Handles,
    sub: &Arc<Subscriber>,
    request_id: u64,
    limit: Limit,
    why: &str,
) {
    h.metrics.limit_refused(limit);
    let error = error_frame(h, request_id, ErrorCode::LimitExceeded, why);
    send(h, sub, &error).await;
    drop(sub.end());
}

/// Registers the subscription (within `max_subscriptions_per_connection` for a client's, and
/// `max_subscriptions`; a client's wildcard one within
/// `max_wildcard_subscriptions_per_connection` too) and its topic's subscriber (a wildcard one
/// with the registry, for every topic its pattern matches, and in a cluster with a feed from
/// every other member), then answers `SubscribeOk`; returns what
/// counts it on its connection (a peer's is not counted) and where its catch-up from the owner
/// starts if the topic holds it back (see `Topics::subscribe`), or `None` when refused (the
/// stream is then done with). Registered before answering, so every publish the client makes
/// after `SubscribeOk` reaches it; `SubscribeOk` is queued before the topic knows the
/// subscriber, so no EventBatch can overtake it.
async fn register(
    h: &Handles,
    link: &Link,
    req: &Subscribe,
    sub: &Arc<Subscriber>,
    kick: &Arc<tokio::sync::Notify>,
    pattern: Option<&Pattern>,
) -> Option<(Counted, Option<oneshot::Receiver<Position>>)> {
    let (id, role) = (sub.id, link.role);
    let wildcard_slot = match pattern {
        // A peer's pattern subscriptions are its member's feeds, one per client subscription
        // there (each counted at that member).
        None => None,
        Some(_) if role == Role::Peer => None,
        Some(_) => {
            let max = h.cfg.max_wildcard_subscriptions_per_connection as usize;
            let Some(slot) = link.wildcards.try_enter(max) else {
                let why = format!(
                    "{max} wildcard subscriptions are open on this connection, the most the \
                     broker allows (max_wildcard_subscriptions_per_connection)"
                );
                let limit = Limit::WildcardSubscriptionsPerConnection;
                refuse_past_limit(h, sub, req.request_id, limit, &why).await;
                return None;
            };
            Some(slot)
        }
    };
    let per_conn = h.cfg.max_subscriptions_per_connection as usize;
    let counted = if role == Role::Peer {
        None
    } else if let Some(slot) = link.subscriptions.try_enter(per_conn) {
        Some(slot)
    } else {
        let why = format!(
            "{per_conn} subscriptions are open on this connection, the most the broker allows \
             (max_subscriptions_per_connection)"
        );
        let limit = Limit::SubscriptionsPerConnection;
        refuse_past_limit(h, sub, req.request_id, limit, &why).await;
        return None;
    };
    let membership = match &req.group {
        None => None,
        Some(group) => match h.groups.join(&req.topic, group) {
            Ok(m) => Some(m),
            Err(refused) => {
                let limit = match refused {
                    GroupLimit::Groups { .. } => Limit::GroupsPerSubject,
                    GroupLimit::Members { .. } => Limit::GroupMembers,
                };
                refuse_past_limit(h, sub, req.request_id, limit, &refused.to_string()).await;
                return None;
            }
        },
    };
    let max = h.cfg.max_subscriptions as usize;
    let entry = Registered {
        sub: Arc::clone(sub),
        role,
        kick: Arc::clone(kick),
        wildcard: pattern.is_some(),
    };
    let admitted = h.subscriptions.admit(id, entry, max);
    if !admitted {
        let why = format!(
            "{max} subscriptions are open, the most this broker allows (max_subscriptions)"
        );
        refuse_past_limit(h, sub, req.request_id, Limit::Subscriptions, &why).await;
        return None;
    }
    if role == Role::Plain
        && pattern.is_none()
        && req.start != StartAt::Live
        && h.cluster.route(Kind::Topic, req.topic.as_bytes()) != Route::Local
    {
        h.upstreams.seed(&req.topic, req.start);
    }
    if role == Role::Plain
        && pattern.is_none()
        && req.start == StartAt::Live
        && h.cluster.route(Kind::Topic, req.topic.as_bytes()) != Route::Local
    {
        // A live subscription to a topic another member owns: its `SubscribeOk` waits until
        // the upstream is subscribed at the owner, so a publish the client makes after it is
        // relayed here (before, an upstream still connecting started after such a publish and
        // the subscriber never got it). A subscription from a position or a time needs no
        // wait: the upstream replays from there.
        reconcile_upstreams(&h.upstreams, &h.subscriptions);
        if !h.upstreams.wait_live(&req.topic, UPSTREAM_LIVE_WAIT).await {
            tracing::debug!(topic = %req.topic, "upstream not yet subscribed at the owner; answering SubscribeOk anyway");
        }
    }
    // A client's pattern subscription in a cluster: fed from every other member as well, and
    // answered once those subscriptions are open (at most `UPSTREAM_LIVE_WAIT`), so a
    // publish the client makes after `SubscribeOk` reaches it wherever its topic lives.
    let feed = match pattern {
        Some(_) if role != Role::Peer => h.fan_in.feed(Arc::clone(sub), &req.topic),
        None if role == Role::Plain && req.group.is_some() => {
            h.fan_in.feed_group(Arc::clone(sub), &req.topic)
        }
        _ => None,
    };
    if let Some(feed) = &feed
        && !feed.wait_live(UPSTREAM_LIVE_WAIT).await
    {
        tracing::debug!(pattern = %req.topic, "not every member's feed is open yet; answering SubscribeOk anyway");
    }
    let ok = Frame::SubscribeOk(SubscribeOk {
        request_id: req.request_id,
        subscription_id: id,
    });
    // `SubscribeOk` goes first in the subscriber's queue (no EventBatch can overtake it), but
    // the lane is scheduled to write it only once the topic has the subscriber: a client that
    // publishes on seeing `SubscribeOk` must find its subscription registered.
    let queued = sub.reply(ok.to_bytes()).await;
    let behind = match pattern {
        Some(pattern) => {
            h.topics.subscribe_pattern(Arc::clone(sub), pattern.clone());
            h.metrics.wildcard_subscriptions.inc();
            None
        }
        // Only a plain client's subscription is served at a broker that does not own its
        // topic.
        None => h
            .topics
            .subscribe(Arc::clone(sub), req.start, role == Role::Plain),
    };
    // Counted before the lane may write `SubscribeOk`: a client that reads the metrics on
    // seeing it finds its subscription (and group membership) counted.
    h.metrics.subscriptions.inc();
    if membership.is_some() {
        h.metrics.queue_group_members.inc();
        h.metrics.queue_groups.set(gauge(h.groups.groups()));
    }
    if queued {
        h.lanes.schedule(Arc::clone(sub)).await;
    }
    if let Some(feed) = &feed {
        feed.go();
    }
    Some(((counted, wildcard_slot, membership, feed), behind))
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// What a subscription holds while it lives: its slot of `max_subscriptions_per_connection`
/// (none for a peer's) and, for a client's wildcard one, of
/// `max_wildcard_subscriptions_per_connection`; for a queue-group one, its place in the
/// group's count; for a client's pattern subscription in a cluster, its feed from the other
/// members (dropping it ends their subscriptions).
type Counted = (Option<Slot>, Option<Slot>, Option<Membership>, Option<Feed>);

/// What an open subscription re-checks when its user's permissions change: a reload that
/// narrows them ends the subscriptions they no longer allow (an inbox subscription is not
/// under the user's `subscribe` rules, so it has no `changes`).
struct Permissions<'a> {
    access: &'a Access,
    changes: Option<tokio::sync::watch::Receiver<u64>>,
    pattern: Option<&'a Pattern>,
}

impl Permissions<'_> {
    /// Returns when the user's permissions were replaced; never for a connection whose
    /// answer cannot change.
    async fn changed(&mut self) {
        let changed = match self.changes.as_mut() {
            Some(rx) => rx.changed().await.is_ok(),
            None => false,
        };
        if !changed {
            // No reload can change this connection's answer (or its registration is gone).
            std::future::pending::<()>().await;
        }
    }

    /// Whether the subscription to `topic` is still allowed.
    fn check(&self, topic: &str) -> Result<(), starling_access::Denied> {
        match self.pattern {
            Some(pattern) => self.access.check_pattern(Operation::Subscribe, pattern),
            None => self.access.check(Operation::Subscribe, topic.as_bytes()),
        }
    }
}

/// Answers the client's requests on a live subscription (pings, its `Unsubscribe`) until it
/// ends, until `kick` ends it with `Moved` after the grace and drain of what this broker
/// accepted as the owner, or until a reload of the users document withdraws the permission it
/// was opened under (`Forbidden`, counted in `starling_auth_subscriptions_withdrawn_total`).
#[allow(clippy::too_many_arguments)]
async fn serve_requests(
    h: &Handles,
    req: &Subscribe,
    sub: &Arc<Subscriber>,
    kick: &tokio::sync::Notify,
    mut permissions: Permissions<'_>,
    allowance: &Allowance,
    mut recv: quinn::RecvStream,
    mut buf: FrameBuf,
) {
    loop {
        let frame = tokio::select! {
            f = read_frame_within(&mut recv, &mut buf, &h.decoder, 4096, allowance) => f,
            () = permissions.changed() => {
                if let Err(denied) = permissions.check(&req.topic) {
                    h.metrics.forbidden(&denied);
                    h.metrics.auth_subscriptions_withdrawn.inc();
                    tracing::info!(id = sub.id, topic = %req.topic, "ending a subscription its user may no longer open");
                    let msg = format!("permission withdrawn: {denied}");
                    send(h, sub, &error_frame(h, req.request_id, ErrorCode::Forbidden, msg)).await;
                    return;
                }
                continue;
            }
            () = kick.notified() => {
                // What this broker accepted as the owner goes out before the `Moved`: the
                // client resumes at the new owner, which never had these events. Publishes
                // routed here just before the change may still be on their way to the topic
                // (acked on receipt): give them a moment, then flush and drain.
                tokio::time::sleep(KICK_GRACE).await;
                h.topics.flush(&req.topic).await;
                let _ = tokio::time::timeout(KICK_DRAIN, sub.wait_empty()).await;
                let msg = "the topic moved to another member; subscribe again";
                send(h, sub, &error_frame(h, req.request_id, ErrorCode::Moved, msg)).await;
                h.metrics.cluster_moved.with_label_values(&["subscribe"]).inc();
                return;
            }
        };
        match frame {
            Ok(Some(Frame::Unsubscribe(u))) if u.subscription_id == sub.id => return,
            Ok(Some(Frame::Ping(p))) => send(h, sub, &Frame::Pong(p)).await,
            Ok(Some(other)) => {
                let (code, msg) = reply::unexpected(&other, "subscription");
                let error = error_frame(h, reply::request_id(&other), code, msg);
                send(h, sub, &error).await;
            }
            Ok(None) | Err(_) => return,
        }
    }
}

/// Ends a subscription for the drain: its stream is finished after what is queued, and this
/// returns once the subscriber acknowledged everything on it (or its sink gave up on it, see
/// `QuicSink`), so closing the connection cannot discard delivered batches.
pub async fn finish_for_drain(sub: Arc<Subscriber>) {
    sub.end().wait().await;
}

fn forget(h: &Handles, sub: &Subscriber, pattern: Option<&Pattern>) {
    h.subscriptions.remove(sub.id);
    match pattern {
        Some(pattern) => {
            h.topics.unsubscribe_pattern(sub, pattern);
            h.metrics.wildcard_subscriptions.dec();
        }
        None => h.topics.unsubscribe(sub),
    }
    h.metrics.subscriptions.dec();
}

/// Makes the upstreams match the plain clients' subscriptions.
fn reconcile_upstreams(upstreams: &Arc<Upstreams>, subscriptions: &Subscriptions) {
    upstreams.reconcile(|| subscriptions.plain_topics());
}

/// After a membership change: ends, with `Moved`, the subscriptions of routing clients and
/// peers whose topic this broker no longer owns, and re-aims the upstream subscriptions.
pub fn on_membership_change(
    subscriptions: &Subscriptions,
    cluster: &Cluster,
    upstreams: &Arc<Upstreams>,
) {
    for kick in subscriptions.moved_away(cluster) {
        kick.notify_one();
    }
    reconcile_upstreams(upstreams, subscriptions);
}
