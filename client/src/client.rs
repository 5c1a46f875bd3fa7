//! [`Client`]: the SDK entry point. A cheap-to-clone handle that sends each request to the
//! right broker: the bootstrap broker (`ClientConfig::server`) for a single node, or, in a
//! cluster, the member owning the topic or cache key (see `cluster`), falling back to the
//! bootstrap broker, which forwards, when a member cannot be reached from here.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use starling_placement::Kind;
use starling_proto::{ClusterInfo, Position, StartAt};
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::checks::check_topic;
use crate::cluster::{Router, Target, is_moved};
use crate::config::ClientConfig;
use crate::feed::BATCH_BUFFER;
use crate::handshake::{Role, ServerInfo};
use crate::node::Node;
use crate::subscription::Subscription;

/// Attempts of one request when members answer `Moved` (the membership is re-read between).
const MOVED_ATTEMPTS: usize = 3;

/// A connection to a Starling broker or cluster. Clones share the same pools.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

pub(crate) struct Inner {
    bootstrap: Arc<Node>,
    router: Option<Router>,
    request_timeout: Duration,
    closed: AtomicBool,
    /// The reply inbox of this client's requests.
    inbox: crate::request::Inbox,
}

impl Client {
    /// Connects and handshakes one connection right away, so a bad address, certificate or
    /// protocol version fails here. With `cluster_routing` (the default) it then asks the
    /// broker for the cluster's membership and keeps it fresh; every other connection and
    /// stream is opened on first use.
    pub async fn connect(cfg: ClientConfig) -> Result<Client, ClientError> {
        cfg.validate()?;
        let bootstrap = Arc::new(Node::connect(&cfg, Role::Plain).await?);
        let router = if cfg.cluster_routing {
            match bootstrap.cluster_info().await {
                Ok(info) => Some(Router::new(&cfg, info)),
                Err(e) => {
                    tracing::debug!(error = %e, "no cluster information; not routing");
                    None
                }
            }
        } else {
            None
        };
        let inner = Arc::new(Inner {
            bootstrap,
            router,
            request_timeout: cfg.request_timeout,
            closed: AtomicBool::new(false),
            inbox: crate::request::Inbox::new(),
        });
        if let Some(router) = &inner.router {
            router.warm_up().await;
            tokio::spawn(refresh_loop(Arc::downgrade(&inner), cfg.cluster_refresh));
        }
        Ok(Client { inner })
    }

    /// Publishes one message without waiting for the broker's ack. Returns once
    /// the message is queued on its stream: it waits while the stream is backed up, and while
    /// its stream has a full publish window (`ClientConfig::publish_window_bytes`) not yet
    /// acknowledged by the broker; after the request timeout it fails with
    /// [`ClientError::Timeout`], and the message was not sent.
    pub async fn publish(&self, topic: &str, payload: impl Into<Bytes>) -> Result<(), ClientError> {
        self.publish_one(topic, payload.into(), Vec::new(), false)
            .await
    }

    /// Publishes one message and waits for the broker's ack.
    pub async fn publish_acked(
        &self,
        topic: &str,
        payload: impl Into<Bytes>,
    ) -> Result<(), ClientError> {
        self.publish_one(topic, payload.into(), Vec::new(), true)
            .await
    }

    /// Publishes one message with its headers ([`Message`](crate::Message)); with `acked`,
    /// waits for the broker's ack. Headers need a broker that grants `HEADERS`
    /// ([`ClientError::Unsupported`] otherwise); header names are checked first
    /// ([`ClientError::InvalidHeader`]). A broker refuses headers beyond its
    /// `max_headers_per_message` or `max_header_bytes_per_message` (`LimitExceeded`); a fire-and-forget
    /// publish learns of a refusal on a later call, as with any publish.
    pub async fn publish_message(
        &self,
        topic: &str,
        message: crate::Message,
        acked: bool,
    ) -> Result<(), ClientError> {
        crate::message::check_headers(&message.headers)?;
        self.publish_one(topic, message.payload, message.headers, acked)
            .await
    }

    /// Sends a request and waits up to `timeout` for its reply: `payload` is published to
    /// `topic` with a `reply-to` header naming this client's reply inbox (subscribed on the
    /// first request, `_INBOX.<random token>.>`), and the first reply published there is
    /// returned. [`ClientError::NoResponders`] at once when nothing subscribes to `topic`,
    /// [`ClientError::Timeout`] when no reply came in time. Needs a single broker that grants
    /// `REQUEST` ([`ClientError::Unsupported`] otherwise, nothing sent); a cluster member
    /// refuses requests (they need headers) with `InvalidRequest`.
    pub async fn request(
        &self,
        topic: &str,
        payload: impl Into<Bytes>,
        timeout: Duration,
    ) -> Result<crate::Message, ClientError> {
        let inner = self.open()?;
        if !self
            .server_info()
            .has_feature(starling_proto::features::REQUEST)
        {
            return Err(ClientError::Unsupported(
                "request/reply (the REQUEST feature)".into(),
            ));
        }
        check_topic(topic)?;
        inner
            .inbox
            .ensure(|p| async move { self.subscribe(&p).await })
            .await?;
        let (n, inbox, reply) = inner.inbox.open();
        let message = crate::Message::new(payload).header(starling_proto::REPLY_TO, inbox);
        let sent = self.publish_message(topic, message, true).await;
        let answer = match sent {
            Err(ClientError::Server {
                code: starling_proto::ErrorCode::NoResponders,
                ..
            }) => Err(ClientError::NoResponders(topic.to_string())),
            Err(e) => Err(e),
            Ok(()) => match tokio::time::timeout(timeout, reply).await {
                Ok(Ok(message)) => Ok(message),
                Ok(Err(_)) => Err(ClientError::Closed),
                Err(_) => Err(ClientError::Timeout),
            },
        };
        inner.inbox.close(n);
        answer
    }

    /// Answers request `event` (one with a `reply-to` header, as [`Client::request`] sends):
    /// publishes `payload` to its reply inbox through the broker that delivered the request
    /// (in a cluster, the one its subscription is at) and waits for the broker's ack. The
    /// broker allows it when the request was delivered recently to any connection of this
    /// client's user (the user's `max_reply_inboxes_per_user` latest grants) or the user may publish
    /// there; else
    /// [`ClientError::Forbidden`]. [`ClientError::NotARequest`] for an event without
    /// `reply-to`.
    pub async fn reply(
        &self,
        event: &crate::Event,
        payload: impl Into<Bytes>,
    ) -> Result<(), ClientError> {
        let inbox = starling_proto::request::reply_to(&event.headers)
            .ok_or(ClientError::NotARequest)?
            .to_string();
        let inner = self.open()?;
        check_topic(&inbox)?;
        let payload = payload.into();
        let mut headers = Vec::new();
        crate::trace::inject_current(&mut headers, self.headers_granted());
        // Sent to the broker the request came through (where the subscription was routed),
        // which granted the reply; it forwards the reply to the inbox's owner.
        inner
            .routed(
                Kind::Topic,
                event.subscription.as_bytes(),
                |node: Arc<Node>| {
                    let payload = payload.clone();
                    let inbox = inbox.as_str();
                    let headers = headers.clone();
                    async move { node.publish(inbox, payload, headers, true).await }
                },
            )
            .await
    }

    /// Whether the broker takes message headers (`HEADERS`).
    fn headers_granted(&self) -> bool {
        self.server_info()
            .has_feature(starling_proto::features::HEADERS)
    }

    /// One `Publish` frame, acked or fire-and-forget, with the caller's trace context
    /// (`trace`).
    async fn publish_one(
        &self,
        topic: &str,
        payload: Bytes,
        mut headers: Vec<starling_proto::Header>,
        acked: bool,
    ) -> Result<(), ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        crate::trace::inject_current(&mut headers, self.headers_granted());
        inner
            .routed(Kind::Topic, topic.as_bytes(), |node: Arc<Node>| {
                let payload = payload.clone();
                let headers = headers.clone();
                async move { node.publish(topic, payload, headers, acked).await }
            })
            .await
    }

    /// Publishes several messages to one topic in one frame; with `acked`,
    /// waits for the broker's ack of the whole batch, without it waits as
    /// [`Client::publish`] does (the batch counts against the publish window as a whole).
    pub async fn publish_batch(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
        acked: bool,
    ) -> Result<(), ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        inner
            .routed(Kind::Topic, topic.as_bytes(), |node: Arc<Node>| {
                let payloads = payloads.clone();
                async move { node.publish_batch(topic, payloads, Vec::new(), acked).await }
            })
            .await
    }

    /// Queues an acked batch now and returns a future for its ack, so a caller can keep many
    /// acked batches in flight while their order on the wire stays the call order. Not routed:
    /// it always goes to the bootstrap broker.
    pub async fn publish_batch_pipelined(
        &self,
        topic: &str,
        payloads: Vec<Bytes>,
    ) -> Result<impl Future<Output = Result<(), ClientError>> + Send + 'static, ClientError> {
        self.open()?
            .bootstrap
            .publish_batch_pipelined(topic, payloads, Vec::new())
            .await
    }

    /// Subscribes to `topic`; returns once the broker accepted the subscription. `topic` may
    /// be a pattern (`orders.*`: `*` matches one `.`-separated token; `orders.>`: `>`, last
    /// only, one or more; the language of `docs/subjects.md`): the subscription then gets the
    /// live events of every matching topic, existing or created later, each [`Event::topic`](crate::Event::topic)
    /// naming its own (needs a broker that grants `WILDCARDS`, else
    /// [`ClientError::Unsupported`]; in a cluster the broker it is at gets the matching
    /// topics from every member; a pattern subscription is live only and resubscribes live). The
    /// subscription outlives its stream: when the stream ends without the user asking (the
    /// broker restarted or drained, the topic's owner moved, the connection broke), it
    /// subscribes again at the topic's owner of the moment, resuming from the last event
    /// received, so the events the broker retained meanwhile (`replay_window_ms`) arrive
    /// first and none twice. It ends with an error only when no broker accepts it within three
    /// request timeouts.
    pub async fn subscribe(&self, topic: &str) -> Result<Subscription, ClientError> {
        self.subscribe_from(topic, None).await
    }

    /// Subscribes to `topic`, first receiving the events the broker still retains from
    /// `resume` on (a [`Subscription::resume_point`] of an earlier subscription), then live
    /// events. `None` is [`Client::subscribe`]: live events only.
    pub async fn subscribe_from(
        &self,
        topic: &str,
        resume: Option<Position>,
    ) -> Result<Subscription, ClientError> {
        self.subscribe_at(topic, StartAt::from(resume)).await
    }

    /// Subscribes to `topic` from `since`: first the events stamped at or after it that the
    /// broker still holds (a durable topic's log, else its retained tail), then live events,
    /// with no gap and no duplicate between the two. Times are the owner's wall clock in Unix
    /// milliseconds (`since` is rounded down to a millisecond; a time before 1970 is 0, the
    /// start of everything held): a batch is stamped when the owner appended it to its log,
    /// or, on a topic that is not durable, when it was fanned out. On a topic that is not
    /// durable, a time older than the retained tail (`replay_window_ms`) starts at its oldest
    /// event; a time after the newest event, in the future included, means live events only.
    /// Needs a broker that grants `SUBSCRIBE_FROM_TIME`: an older one gives
    /// [`ClientError::Unsupported`]. Once events arrived, a resubscription resumes from the
    /// last one received, as for every subscription.
    pub async fn subscribe_from_time(
        &self,
        topic: &str,
        since: SystemTime,
    ) -> Result<Subscription, ClientError> {
        self.subscribe_at(topic, StartAt::TimeMs(unix_ms(since)))
            .await
    }

    /// Subscribes to `topic` from `start`: live events only, a resume position
    /// ([`Client::subscribe_from`]) or a time in Unix milliseconds
    /// ([`Client::subscribe_from_time`]).
    pub async fn subscribe_at(
        &self,
        topic: &str,
        start: StartAt,
    ) -> Result<Subscription, ClientError> {
        self.subscribe_with(topic, start, None).await
    }

    /// Joins queue group `group` of `topic_or_pattern` (docs/queue-groups.md): each live event
    /// of the topic (of every topic the pattern matches) goes to one member of the group,
    /// while plain subscribers still get every event. A member whose queue at the broker has
    /// more free room gets the next batch first, so a slow member gets fewer. Live only, at
    /// most once (an event queued to a member that then goes away is lost with it), and it
    /// resubscribes live when its stream ends. `group` is 1 to 64 of `A-Z a-z 0-9 - _ .`
    /// ([`ClientError::InvalidGroup`]). Needs a broker that grants `QUEUE_GROUPS`
    /// ([`ClientError::Unsupported`] otherwise). In a cluster a group of a topic is served
    /// by the topic's owner (the subscription is routed there), and a group of a pattern by
    /// every member for the topics it owns, so members anywhere share the events.
    /// [`Subscription::dropped_events`] is always 0: the gaps between a member's batches
    /// are the other members' events.
    pub async fn subscribe_group(
        &self,
        topic_or_pattern: &str,
        group: &str,
    ) -> Result<Subscription, ClientError> {
        starling_proto::validate_group(group)
            .map_err(|why| ClientError::InvalidGroup(format!("{group:?}: {why}")))?;
        self.subscribe_with(topic_or_pattern, StartAt::Live, Some(group))
            .await
    }

    async fn subscribe_with(
        &self,
        topic: &str,
        start: StartAt,
        group: Option<&str>,
    ) -> Result<Subscription, ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        let first = inner.subscribe_routed(topic, start, group).await?;
        let (tx, rx) = mpsc::channel(BATCH_BUFFER);
        let (stop_tx, stop_rx) = oneshot::channel();
        let id = first.id();
        let give_up = inner.request_timeout.saturating_mul(3);
        tokio::spawn(crate::relay::relay(
            Arc::downgrade(&self.inner),
            topic.to_string(),
            first,
            tx,
            stop_rx,
            give_up,
            start,
            group.map(str::to_string),
        ));
        let sub = Subscription::new(
            id,
            topic.to_string(),
            rx,
            stop_tx,
            inner.request_timeout,
            start.position(),
        );
        Ok(if group.is_some() { sub.in_group() } else { sub })
    }

    /// Joins durable consumer `config.name` of durable topic `topic` as a new member
    /// (docs/consumers.md), creating the consumer (at `config.start`) if it does not exist:
    /// a work queue with at-least-once delivery. Each message goes to one member; answer each
    /// [`Delivery`](crate::Delivery) with `ack`, `nak`, `in_progress` or `term`; one not
    /// acked within `ack_wait` (or held by a member whose stream ended) is redelivered, up to
    /// `max_deliver` times, then goes to the dead-letter topic. The consumer's ack floor
    /// survives a broker restart. Opened at the topic's owner; the stream does not reopen
    /// itself. Needs a broker that grants `CONSUMERS`; a replicated topic is refused for now.
    pub async fn consume(
        &self,
        topic: &str,
        config: crate::ConsumerConfig,
    ) -> Result<crate::Consumer, ClientError> {
        let inner = self.open()?;
        check_topic(topic)?;
        let open = config.open(topic)?;
        inner
            .routed(Kind::Topic, topic.as_bytes(), |node: Arc<Node>| {
                let open = open.clone();
                async move { node.consume(open).await }
            })
            .await
    }

    /// Stores `value` under `key`, expiring after `ttl` when given; `true` when it replaced a
    /// live value.
    pub async fn cache_put(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        ttl: Option<Duration>,
    ) -> Result<bool, ClientError> {
        let inner = self.open()?;
        let (key, value) = (key.into(), value.into());
        inner
            .routed(Kind::CacheKey, &key, |node: Arc<Node>| {
                let (key, value) = (key.clone(), value.clone());
                async move { node.cache_put(key, value, ttl).await }
            })
            .await
    }

    /// The value under `key`, or `None` when absent or expired.
    pub async fn cache_get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>, ClientError> {
        let inner = self.open()?;
        let key = key.into();
        inner
            .routed(Kind::CacheKey, &key, |node: Arc<Node>| {
                let key = key.clone();
                async move { node.cache_get(key).await }
            })
            .await
    }

    /// Deletes `key`; `true` when it existed.
    pub async fn cache_delete(&self, key: impl Into<Bytes>) -> Result<bool, ClientError> {
        let inner = self.open()?;
        let key = key.into();
        inner
            .routed(Kind::CacheKey, &key, |node: Arc<Node>| {
                let key = key.clone();
                async move { node.cache_delete(key).await }
            })
            .await
    }

    /// The cluster's membership as the bootstrap broker sees it now.
    pub async fn cluster_info(&self) -> Result<ClusterInfo, ClientError> {
        self.open()?.bootstrap.cluster_info().await
    }

    /// The membership epoch this client routes on (`None`: not routing).
    pub fn routing_epoch(&self) -> Option<u64> {
        self.inner.router.as_ref().map(Router::epoch)
    }

    /// What the bootstrap broker said about itself in the first handshake.
    pub fn server_info(&self) -> &ServerInfo {
        self.inner.bootstrap.info()
    }

    /// Flushes queued publishes (waiting up to the request timeout for the
    /// brokers to read them), then closes every connection. Later calls on any
    /// clone fail with [`ClientError::Closed`]; open subscriptions end.
    pub async fn close(&self) {
        let inner = &self.inner;
        if inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        if let Some(router) = &inner.router {
            router.close().await;
        }
        inner.bootstrap.close().await;
    }

    fn open(&self) -> Result<&Inner, ClientError> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        Ok(&self.inner)
    }
}

impl Inner {
    /// Runs `op` on the node owning `key`, re-reading the membership and trying again when
    /// the member answers `Moved`.
    async fn routed<T, F, Fut>(&self, kind: Kind, key: &[u8], mut op: F) -> Result<T, ClientError>
    where
        F: FnMut(Arc<Node>) -> Fut,
        Fut: Future<Output = Result<T, ClientError>>,
    {
        let mut attempt = 1;
        loop {
            let (node, member) = self.node_for(kind, key);
            match op(node).await {
                Err(e) if is_moved(&e) && attempt < MOVED_ATTEMPTS => {
                    attempt += 1;
                    self.refresh().await;
                }
                Err(e) => {
                    if let (Some(router), Some(id)) = (&self.router, member)
                        && matches!(
                            e,
                            ClientError::Connect(_)
                                | ClientError::Connection(_)
                                | ClientError::Closed
                        )
                    {
                        router.failed(&id);
                    }
                    return Err(e);
                }
                ok => return ok,
            }
        }
    }

    /// A subscription at the topic's owner (or through the bootstrap broker).
    pub(crate) async fn subscribe_routed(
        &self,
        topic: &str,
        start: StartAt,
        group: Option<&str>,
    ) -> Result<Subscription, ClientError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(ClientError::Closed);
        }
        self.routed(
            Kind::Topic,
            topic.as_bytes(),
            |node: Arc<Node>| async move { node.subscribe(topic, start, group).await },
        )
        .await
    }

    /// The node for a request, and the member id when it is a member's own node.
    fn node_for(&self, kind: Kind, key: &[u8]) -> (Arc<Node>, Option<String>) {
        match &self.router {
            Some(router) => match router.target(kind, key) {
                Target::Member(node, id) => (node, Some(id)),
                Target::Bootstrap => (Arc::clone(&self.bootstrap), None),
            },
            None => (Arc::clone(&self.bootstrap), None),
        }
    }

    /// Re-reads the membership from the bootstrap broker.
    async fn refresh(&self) {
        let Some(router) = &self.router else {
            return;
        };
        match self.bootstrap.cluster_info().await {
            Ok(info) => {
                if router.update(info) {
                    router.warm_up().await;
                }
            }
            Err(e) => tracing::debug!(error = %e, "cluster membership refresh failed"),
        }
    }
}

impl crate::relay::Resubscribe for Inner {
    fn resubscribe(
        &self,
        topic: &str,
        start: StartAt,
        group: Option<&str>,
    ) -> impl Future<Output = Result<Subscription, ClientError>> + Send {
        self.subscribe_routed(topic, start, group)
    }
}

/// Re-reads the membership every `every` while the client lives.
async fn refresh_loop(inner: Weak<Inner>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        inner.refresh().await;
    }
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("server_id", &self.inner.bootstrap.info().server_id)
            .field("routing_epoch", &self.routing_epoch())
            .field("closed", &self.inner.closed.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

/// `t` in Unix milliseconds, rounded down; a time before 1970 is 0.
fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_unix_milliseconds_rounded_down() {
        assert_eq!(unix_ms(UNIX_EPOCH), 0);
        assert_eq!(unix_ms(UNIX_EPOCH + Duration::from_micros(1_999)), 1);
        assert_eq!(
            unix_ms(UNIX_EPOCH + Duration::from_secs(1_767_225_600)),
            1_767_225_600_000
        );
        assert_eq!(unix_ms(UNIX_EPOCH - Duration::from_secs(1)), 0);
    }
}
