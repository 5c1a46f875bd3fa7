//! The broker's Prometheus metrics: one registry and typed handles to every series.
//!
//! Names are documented in `docs/operations.md`; a test there checks the list against
//! [`Metrics::render`] output.

use prometheus::{
    Counter, Encoder, Histogram, HistogramOpts, IntCounter, IntCounterVec, IntGauge, IntGaugeVec,
    Opts, Registry, TextEncoder,
};

use starling_config::metric_names as names;

use crate::cache::CacheStats;
use crate::pubsub::counters::{Counters, DropReason, Observe, TRIGGERS};
use crate::pubsub::queue_budget::QueueBudget;

/// The `reason` label of `starling_dropped_events_total`.
fn drop_label(reason: DropReason) -> &'static str {
    match reason {
        DropReason::QueueFullNew => "queue_full_drop_new",
        DropReason::QueueFullOld => "queue_full_drop_old",
        DropReason::SubscriberClosed => "subscriber_closed",
        DropReason::QueueBudget => "queue_budget",
    }
}

/// The `scope` label of `starling_persisted_ack_budget_waits_total`: the per-connection share
/// and the broker-wide budget of `persisted` acks waiting for an fsync.
pub const PENDING_ACK_SCOPES: [&str; 2] = ["connection", "broker"];

impl Metrics {
    /// Where the pending-ack budget shows itself (`pubsub::pending_acks`).
    pub fn pending_acks_shown(&self) -> crate::pubsub::pending_acks::Shown {
        let waits = |scope: &str| self.persisted_ack_budget_waits.with_label_values(&[scope]);
        crate::pubsub::pending_acks::Shown {
            held: self.persisted_acks_pending_bytes.clone(),
            waits_broker: waits("broker"),
            waits_connection: waits("connection"),
        }
    }
}

/// Every broker metric.
#[derive(Clone)]
pub struct Metrics {
    registry: Registry,
    /// The durable topics' storage series.
    pub storage: crate::durable::StorageMetrics,
    /// The topics document's series (`topics_file`).
    pub topics_document: crate::durable::topics_file::TopicsMetrics,
    /// Publish frames accepted (`Publish` and `PublishBatch`).
    pub publish_requests: IntCounter,
    /// Messages accepted from publishers.
    pub published_messages: IntCounter,
    /// Publish payload bytes accepted.
    pub published_bytes: IntCounter,
    /// Acks sent to publishers.
    pub publish_acks: IntCounter,
    /// Events written to subscriber streams.
    pub delivered_events: IntCounter,
    /// EventBatch bytes written to subscriber streams.
    pub delivered_bytes: IntCounter,
    /// Events dropped, by reason.
    pub dropped_events: IntCounterVec,
    /// Events per flushed batch.
    pub batch_events: Histogram,
    /// Bytes per flushed batch.
    pub batch_bytes: Histogram,
    /// Batches flushed, by trigger (`events`, `bytes`, `delay`, `drain`).
    pub batch_flushes: IntCounterVec,
    /// Time from enqueue on a subscriber queue to the completed stream write.
    pub delivery_latency: Histogram,
    /// Ready subscribers waiting per lane.
    pub lane_queue_depth: IntGaugeVec,
    /// Highest lane queue depth seen per lane.
    pub lane_queue_high_water: IntGaugeVec,
    /// Subscriber hand-offs per lane.
    pub lane_enqueued: IntCounterVec,
    /// Writes that found the subscriber's stream blocked by flow control and were parked.
    pub lane_stalls: IntCounter,
    /// EventBatches queued across all subscriber queues.
    pub subscriber_queued_batches: IntGauge,
    /// Bytes of live EventBatches queued for subscribers, charged to
    /// `subscriber_queue_budget_bytes`.
    pub subscriber_queued_bytes: IntGauge,
    /// Open connections.
    pub connections: IntGauge,
    /// Connections accepted since start.
    pub connections_total: IntCounter,
    /// Active subscriptions.
    pub subscriptions: IntGauge,
    /// Active wildcard subscriptions (also in `subscriptions`).
    pub wildcard_subscriptions: IntGauge,
    /// Wildcard subscriptions refused because this broker is a cluster member.
    /// Queue groups with at least one member here.
    pub queue_groups: IntGauge,
    /// Members of queue groups (also in `subscriptions`).
    pub queue_group_members: IntGauge,
    /// Durable consumers loaded on this broker.
    pub consumers: IntGauge,
    /// Members of durable consumers (open consumer streams).
    pub consumer_members: IntGauge,
    /// Pending messages per consumer (read, not yet acked, termed or dead-lettered).
    pub consumer_pending: IntGaugeVec,
    /// Messages per consumer not yet resolved: pending plus unread in the log's stream.
    pub consumer_lag: IntGaugeVec,
    /// Deliveries to consumer members (first ones and redeliveries).
    pub consumer_deliveries: IntCounter,
    /// Deliveries after a message's first.
    pub consumer_redeliveries: IntCounter,
    /// Members' answers, by op (`ack`, `nak`, `in_progress`, `term`, `ignored`).
    pub consumer_acks: IntCounterVec,
    /// Messages past `max_deliver`.
    pub consumer_dead_lettered: IntCounter,
    /// Dead-letter publishes that failed (the message is dropped, logged).
    pub consumer_dead_letter_failures: IntCounter,
    /// Consumer state files that could not be read or written, log reads that failed.
    pub consumer_state_errors: IntCounter,
    /// Bytes of pending messages the durable consumers hold (`consumer_pending_max_bytes`).
    pub consumer_pending_bytes: IntGauge,
    /// Times a consumer stopped reading its log at `consumer_pending_max_bytes`.
    pub consumer_budget_waits: IntCounter,
    /// Events handed to one member of a queue group (once per group).
    pub queue_group_events: IntCounter,
    /// Events no member of a queue group took (the group's slow-subscriber policy dropped
    /// them).
    pub queue_group_dropped_events: IntCounter,
    /// Messages with headers accepted into a local topic.
    pub header_messages: IntCounter,
    /// Publishes dropped as repeats of a message id within their topic's window.
    pub publish_duplicates: IntCounter,
    /// Bytes held by the topics' de-duplication windows.
    pub dedup_window_bytes: IntGauge,
    /// Requests (single-message publishes carrying `reply-to`, `REQUEST` feature) checked for
    /// responders.
    pub requests: IntCounter,
    /// Requests refused with `NoResponders`.
    pub no_responders: IntCounter,
    /// Reply grants evicted at `max_reply_inboxes_per_user` (oldest first).
    pub reply_grants_evicted: IntCounter,
    /// Subscriptions under `_INBOX` refused (a malformed inbox, another connection's inbox, a
    /// second inbox on one connection, a cluster member).
    pub inbox_refused: IntCounter,
    /// Topics with state in memory.
    pub topics: IntGauge,
    /// Bytes of encoded EventBatches retained for resuming subscribers, over all topics.
    pub retained_bytes: IntGauge,
    /// Events sent again to subscribers that resumed from a position or started at a time.
    pub replayed_events: IntCounter,
    /// Protocol errors sent to clients, by code.
    pub protocol_errors: IntCounterVec,
    /// Cache operations by op and result.
    pub cache_ops: IntCounterVec,
    /// Cache hits.
    pub cache_hits: IntCounter,
    /// Cache misses.
    pub cache_misses: IntCounter,
    /// Cache evictions under the byte bound.
    pub cache_evictions: IntCounter,
    /// Cache entries reclaimed after their TTL.
    pub cache_expirations: IntCounter,
    /// Live cache entries.
    pub cache_entries: IntGauge,
    /// Accounted cache bytes.
    pub cache_bytes: IntGauge,
    /// 1 while ready, 0 while starting or draining.
    pub ready: IntGauge,
    /// CPU seconds used by the process (10 ms resolution).
    pub process_cpu: Counter,
    /// Members in the current member list (1 for a single-node broker).
    pub cluster_members: IntGauge,
    /// 1 while this broker is in the member list.
    pub cluster_is_member: IntGauge,
    /// Member list changes applied.
    pub cluster_membership_changes: IntCounter,
    /// Requests forwarded to the owning member, by op.
    pub cluster_forwarded: IntCounterVec,
    /// Forwards that failed because the owner was unavailable, by op.
    pub cluster_forward_failures: IntCounterVec,
    /// `Moved` answers sent to routing clients and peers, by op.
    pub cluster_moved: IntCounterVec,
    /// 1 while the link to a peer works, 0 after it failed, by peer id.
    pub cluster_peer_up: IntGaugeVec,
    /// The limits in force, by knob name ([`limit_values`]), set once from the config.
    pub config_limits: IntGaugeVec,
    /// Upstream subscriptions this broker holds at topic owners for its local subscribers.
    pub cluster_upstreams: IntGauge,
    /// Cache entries handed off to their new owner (`pushed`) or read from their previous
    /// owner on a miss (`pulled`).
    pub cluster_handoff_keys: IntCounterVec,
    /// HTTP connections closed by the listener's budgets, by reason ([`http_refusal`]).
    pub http_refused: IntCounterVec,
    /// QUIC connection attempts refused by admission, by reason ([`quic_refusal`]).
    pub quic_refused: IntCounterVec,
    /// QUIC Retries sent because `handshake_retry_threshold` handshakes were in progress.
    pub quic_retries: IntCounter,
    /// Streams closed because their first frame did not arrive within
    /// `stream_first_frame_timeout_ms`.
    pub streams_timed_out: IntCounter,
    /// Publish and cache streams closed because no frame arrived within
    /// `stream_idle_timeout_ms`, by stream kind ([`idle_stream`]).
    pub streams_idle_closed: IntCounterVec,
    /// Requests refused with `LimitExceeded`, by the budget they hit ([`Limit`]).
    pub limit_refusals: IntCounterVec,
    /// Raft RPCs of replicated topics this broker sent over its peer links, by outcome
    /// ([`replica_rpc`]).
    pub replica_rpc_calls: IntCounterVec,
    /// Raft RPCs of replicated topics other members sent here, by outcome ([`replica_rpc`]).
    pub replica_rpc_served: IntCounterVec,
    /// Replicated topics: leader changes, applied index, apply lag and leadership.
    pub replica: crate::durable::replicated::ReplicaMetrics,
    /// Bytes of publish payloads held against `max_inflight_publish_bytes`.
    pub publish_inflight_bytes: IntGauge,
    /// Times a publish stream waited for `max_inflight_publish_bytes` before reading on.
    pub publish_budget_waits: IntCounter,
    /// Bytes of `persisted` acks held against `max_pending_persisted_ack_bytes`.
    pub persisted_acks_pending_bytes: IntGauge,
    /// Times a publish stream waited for room for a `persisted` ack, by `scope` (`broker`:
    /// `max_pending_persisted_ack_bytes`; `connection`: its per-connection share).
    pub persisted_ack_budget_waits: IntCounterVec,
    /// Bytes of QUIC windows granted to open connections, against
    /// `connection_buffer_budget_bytes`.
    pub connection_buffer_bytes: IntGauge,
    /// The QUIC listener's UDP receive buffer as the kernel reports it.
    pub udp_recv_buffer_bytes: IntGauge,
    /// The QUIC listener's UDP send buffer as the kernel reports it.
    pub udp_send_buffer_bytes: IntGauge,
    /// Tasks alive in the broker's tokio runtime, read at scrape time.
    pub runtime_alive_tasks: IntGauge,
    /// Operations refused by permissions, by operation.
    pub forbidden: IntCounterVec,
    /// Handshakes refused for want of a valid identity, by reason ([`auth_failure`]).
    pub auth_failures: IntCounterVec,
    /// Users in the table in force.
    pub auth_users: IntGauge,
    /// Users-document reads or parses that failed, by reason (`auth::health::ReadFailure`).
    pub auth_reload_errors: IntCounterVec,
    /// 1 while the last users-document read failed.
    pub auth_users_stale: IntGauge,
    /// Seconds since the users table in force was last read.
    pub auth_users_age: IntGauge,
    /// Connections closed because their user was removed.
    pub auth_revoked: IntCounter,
    /// Open subscriptions ended because a reload withdrew their permission.
    pub auth_subscriptions_withdrawn: IntCounter,
    /// Server certificate and client CA reloads, by outcome (`applied`, `failed`).
    pub tls_reloads: IntCounterVec,
    /// The pub/sub engine's counters, exported at every scrape ([`Metrics::export_pubsub`]).
    pubsub: std::sync::Arc<std::sync::OnceLock<PubsubExport>>,
}

/// The pub/sub engine's counters and what of its shared counters was exported last.
struct PubsubExport {
    counters: std::sync::Arc<Counters>,
    queue_budget: std::sync::Arc<QueueBudget>,
    /// The storage series are shared with the durable logs: the engine's part goes in by
    /// difference.
    storage_errors: std::sync::atomic::AtomicU64,
    storage_replayed_records: std::sync::atomic::AtomicU64,
    /// The limit refusal series is shared with the ingress: the engine's part goes in by
    /// difference.
    dedup_refused: std::sync::atomic::AtomicU64,
}

/// The `reason` values of `starling_auth_failures_total`.
pub mod auth_failure {
    /// No client certificate naming a user and no token.
    pub const NO_CREDENTIALS: &str = "no_credentials";
    /// A token no user has.
    pub const UNKNOWN_TOKEN: &str = "unknown_token";
    /// A verified client certificate whose common name is no `tls` user.
    pub const UNKNOWN_CERTIFICATE: &str = "unknown_certificate";
    /// `PEER` asked for without the peer certificate.
    pub const NOT_A_PEER: &str = "not_a_peer";
    /// A peer certificate without this cluster's URI (`cluster_peer_uri`).
    pub const FOREIGN_PEER: &str = "foreign_peer";
    /// Every reason, for pre-creating the labelled series.
    pub const ALL: [&str; 5] = [
        NO_CREDENTIALS,
        UNKNOWN_TOKEN,
        UNKNOWN_CERTIFICATE,
        NOT_A_PEER,
        FOREIGN_PEER,
    ];
}

/// The `reason` values of `starling_auth_reload_errors_total` (`auth::health::ReadFailure`).
pub mod users_read_failure {
    /// The file, the Secret or its `users.yaml` key does not exist.
    pub const MISSING: &str = "missing";
    /// The source could not be read.
    pub const UNREADABLE: &str = "unreadable";
    /// The document is not UTF-8 or does not compile.
    pub const INVALID: &str = "invalid";
    /// Every reason, for pre-creating the labelled series.
    pub const ALL: [&str; 3] = [MISSING, UNREADABLE, INVALID];
}

/// The `reason` values of `starling_http_refused_total`: the HTTP listener's budgets.
pub mod http_refusal {
    /// Accepted and closed at once: the connection cap was reached.
    pub const CONNECTION_CAP: &str = "connection_cap";
    /// Accepted and closed at once: the source address's share of the slots was taken.
    pub const PER_SOURCE_CAP: &str = "per_source_cap";
    /// No complete request head in time.
    pub const HEADER_TIMEOUT: &str = "header_timeout";
    /// Open longer than the connection lifetime.
    pub const LIFETIME: &str = "lifetime";
    /// Every reason, for pre-creating the labelled series.
    pub const ALL: [&str; 4] = [CONNECTION_CAP, PER_SOURCE_CAP, HEADER_TIMEOUT, LIFETIME];
}

/// The `reason` values of `starling_quic_refused_total`: QUIC admission's refusals.
pub mod quic_refusal {
    /// The broker is starting or draining.
    pub const NOT_SERVING: &str = "not_serving";
    /// `max_connections` connections are open.
    pub const MAX_CONNECTIONS: &str = "max_connections";
    /// `connection_buffer_budget_bytes` has no room for even the smallest windows.
    pub const CONNECTION_BUFFER_BUDGET: &str = "connection_buffer_budget";
    /// `max_pending_handshakes` handshakes are in progress.
    pub const PENDING_HANDSHAKES: &str = "pending_handshakes";
    /// `max_pending_handshakes_per_source` handshakes from the attempt's address are in progress.
    pub const PENDING_PER_SOURCE: &str = "pending_handshakes_per_source";
    /// TLS and `Hello` were not done within `handshake_timeout_ms` (the connection is closed).
    pub const HANDSHAKE_TIMEOUT: &str = "handshake_timeout";
    /// Every reason, for pre-creating the labelled series.
    pub const ALL: [&str; 6] = [
        NOT_SERVING,
        MAX_CONNECTIONS,
        CONNECTION_BUFFER_BUDGET,
        PENDING_HANDSHAKES,
        PENDING_PER_SOURCE,
        HANDSHAKE_TIMEOUT,
    ];
}

/// The `outcome` values of `starling_replica_rpc_calls_total` (sent) and
/// `starling_replica_rpc_served_total` (received).
pub mod replica_rpc {
    /// Answered by the replica's Raft.
    pub const OK: &str = "ok";
    /// Sent: the member was unknown, down or its link broke.
    pub const UNREACHABLE: &str = "unreachable";
    /// Sent: no reply within `replica_rpc_timeout_ms`.
    pub const TIMEOUT: &str = "timeout";
    /// Sent: the peer answered with an `Error` (any of the refusals below).
    pub const REFUSED: &str = "refused";
    /// Sent: the replica's Raft gave up waiting before an answer came (its own per-RPC
    /// deadline: an append's is the heartbeat interval, a vote's the election timeout).
    pub const ABANDONED: &str = "abandoned";
    /// Received on a connection that is not a peer's: `Forbidden`.
    pub const FORBIDDEN: &str = "forbidden";
    /// Received past `max_replica_rpcs_per_connection`: `LimitExceeded`.
    pub const LIMIT: &str = "limit";
    /// Received for a topic with no replica open here: `NotFound`.
    pub const UNKNOWN_TOPIC: &str = "unknown_topic";
    /// Received a frame the replica could not decode: `InvalidRequest`.
    pub const INVALID: &str = "invalid";
    /// Received a vote request the replica's vote guard dropped (it is catching up after an
    /// empty start): `Unavailable`.
    pub const GUARDED: &str = "guarded";
    /// The outcomes of a sent call, for pre-creating the labelled series.
    pub const SENT: [&str; 5] = [OK, UNREACHABLE, TIMEOUT, REFUSED, ABANDONED];
    /// The outcomes of a received call.
    pub const SERVED: [&str; 6] = [OK, FORBIDDEN, LIMIT, UNKNOWN_TOPIC, INVALID, GUARDED];
}

/// The `stream` values of `starling_streams_idle_closed_total`.
pub mod idle_stream {
    /// A publish stream.
    pub const PUBLISH: &str = "publish";
    /// A cache stream.
    pub const CACHE: &str = "cache";
    /// Every value, for pre-creating the labelled series.
    pub const ALL: [&str; 2] = [PUBLISH, CACHE];
}

/// A broker-wide budget a request can hit (the `limit` label of
/// `starling_limit_refusals_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// `max_topics`: a publish or subscription would create one topic too many.
    Topics,
    /// `max_subscriptions`: one subscription too many.
    Subscriptions,
    /// `max_subscriptions_per_connection`: one subscription too many on one connection.
    SubscriptionsPerConnection,
    /// `max_wildcard_subscriptions_per_connection`: one wildcard subscription too many on one
    /// connection.
    WildcardSubscriptionsPerConnection,
    /// `max_groups_per_subject`: a group `Subscribe` would create one queue group too many on
    /// its subject.
    GroupsPerSubject,
    /// `max_group_members`: one member too many in a queue group.
    GroupMembers,
    /// `max_publish_batch_items`: a `PublishBatch` announcing more payloads (refused by the
    /// decoder before it allocates for them; the stream is closed).
    PublishBatchItems,
    /// `max_headers_per_message`: a message with more headers (the whole request refused).
    HeadersPerMessage,
    /// `max_header_bytes_per_message`: a message with more header bytes (the whole request
    /// refused).
    HeaderBytesPerMessage,
    /// `max_replica_rpcs_per_connection`: one Raft RPC stream too many on one peer connection.
    ReplicaRpcsPerConnection,
    /// `max_consumers_per_topic`: one durable consumer too many on a topic.
    ConsumersPerTopic,
    /// `max_consumer_members`: one member too many in a durable consumer.
    ConsumerMembers,
    /// `max_consumer_ack_pending`: a consumer asking for a larger `max_ack_pending`.
    ConsumerAckPending,
    /// `max_msg_id_bytes`: a message with a longer message id (the whole request refused).
    MsgIdBytes,
    /// `dedup_max_total_bytes`: a publish whose new message ids do not fit in what the
    /// topics' de-duplication windows may hold (the whole request refused; counted by the
    /// topic task, exported from the engine's counters).
    DedupTotalBytes,
    /// `max_message_bytes` of a topic's policy (the topics document, `topics_file`): a
    /// message with a larger payload (the whole request refused).
    MessageBytes,
}

impl Limit {
    /// Every limit, for pre-creating the labelled series.
    pub const ALL: [Limit; 16] = [
        Limit::Topics,
        Limit::Subscriptions,
        Limit::SubscriptionsPerConnection,
        Limit::WildcardSubscriptionsPerConnection,
        Limit::GroupsPerSubject,
        Limit::GroupMembers,
        Limit::PublishBatchItems,
        Limit::HeadersPerMessage,
        Limit::HeaderBytesPerMessage,
        Limit::ReplicaRpcsPerConnection,
        Limit::ConsumersPerTopic,
        Limit::ConsumerMembers,
        Limit::ConsumerAckPending,
        Limit::MsgIdBytes,
        Limit::DedupTotalBytes,
        Limit::MessageBytes,
    ];

    /// The label value: the knob's name.
    pub fn label(self) -> &'static str {
        match self {
            Limit::Topics => "max_topics",
            Limit::Subscriptions => "max_subscriptions",
            Limit::SubscriptionsPerConnection => "max_subscriptions_per_connection",
            Limit::WildcardSubscriptionsPerConnection => {
                "max_wildcard_subscriptions_per_connection"
            }
            Limit::GroupsPerSubject => "max_groups_per_subject",
            Limit::GroupMembers => "max_group_members",
            Limit::PublishBatchItems => "max_publish_batch_items",
            Limit::HeadersPerMessage => "max_headers_per_message",
            Limit::HeaderBytesPerMessage => "max_header_bytes_per_message",
            Limit::ReplicaRpcsPerConnection => "max_replica_rpcs_per_connection",
            Limit::ConsumersPerTopic => "max_consumers_per_topic",
            Limit::ConsumerMembers => "max_consumer_members",
            Limit::ConsumerAckPending => "max_consumer_ack_pending",
            Limit::MsgIdBytes => "max_msg_id_bytes",
            Limit::DedupTotalBytes => "dedup_max_total_bytes",
            Limit::MessageBytes => "max_message_bytes",
        }
    }
}

fn counter(r: &Registry, name: &str, help: &str) -> prometheus::Result<IntCounter> {
    let c = IntCounter::new(name, help)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn counter_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(c.clone()))?;
    Ok(c)
}

fn gauge(r: &Registry, name: &str, help: &str) -> prometheus::Result<IntGauge> {
    let g = IntGauge::new(name, help)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn gauge_vec(
    r: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntGaugeVec> {
    let g = IntGaugeVec::new(Opts::new(name, help), labels)?;
    r.register(Box::new(g.clone()))?;
    Ok(g)
}

fn histogram(
    r: &Registry,
    name: &str,
    help: &str,
    buckets: Vec<f64>,
) -> prometheus::Result<Histogram> {
    let h = Histogram::with_opts(HistogramOpts::new(name, help).buckets(buckets))?;
    r.register(Box::new(h.clone()))?;
    Ok(h)
}

/// The limits exported as `starling_config_limit{knob}`, by knob name: the budgets and caps
/// that usage series are compared with (e.g. `starling_retained_bytes` with
/// `replay_max_total_bytes` in the `StarlingRetentionAtCap` alert).
pub fn limit_values(cfg: &starling_config::BrokerConfig) -> [(&'static str, u64); 11] {
    [
        ("replay_max_total_bytes", cfg.replay_max_total_bytes),
        ("cache_max_bytes", cfg.cache_max_bytes),
        ("max_connections", u64::from(cfg.max_connections)),
        ("max_topics", u64::from(cfg.max_topics)),
        ("max_subscriptions", u64::from(cfg.max_subscriptions)),
        (
            "subscriber_lane_queue_depth",
            u64::from(cfg.subscriber_lane_queue_depth),
        ),
        (
            "connection_buffer_budget_bytes",
            cfg.connection_buffer_budget_bytes,
        ),
        ("max_inflight_publish_bytes", cfg.max_inflight_publish_bytes),
        (
            "subscriber_queue_budget_bytes",
            cfg.subscriber_queue_budget_bytes,
        ),
        (
            "storage_retention_max_bytes",
            cfg.storage_retention_max_bytes,
        ),
        ("max_frame_bytes", u64::from(cfg.max_frame_bytes)),
    ]
}

impl Metrics {
    /// Creates and registers every metric, plus process metrics (CPU, memory, fds).
    pub fn new() -> prometheus::Result<Self> {
        let r = Registry::new();
        #[cfg(target_os = "linux")]
        r.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;
        let build = gauge_vec(
            &r,
            "starling_build_info",
            "Broker build information.",
            &["version", "revision"],
        )?;
        build
            .with_label_values(&[env!("CARGO_PKG_VERSION"), env!("STARLING_GIT_REVISION")])
            .set(1);
        let size_buckets = prometheus::exponential_buckets(1.0, 2.0, 12)?;
        let byte_buckets = prometheus::exponential_buckets(64.0, 4.0, 10)?;
        let latency_buckets = prometheus::exponential_buckets(10e-6, 2.0, 18)?;
        let m = Metrics {
            publish_requests: counter(
                &r,
                "starling_publish_requests_total",
                "Publish frames accepted.",
            )?,
            published_messages: counter(
                &r,
                names::PUBLISHED_MESSAGES,
                "Messages accepted from publishers.",
            )?,
            published_bytes: counter(
                &r,
                names::PUBLISHED_BYTES,
                "Publish payload bytes accepted.",
            )?,
            publish_acks: counter(&r, "starling_publish_acks_total", "Publish acks sent.")?,
            delivered_events: counter(
                &r,
                names::DELIVERED_EVENTS,
                "Events written to subscriber streams.",
            )?,
            delivered_bytes: counter(
                &r,
                names::DELIVERED_BYTES,
                "EventBatch bytes written to subscriber streams.",
            )?,
            dropped_events: counter_vec(
                &r,
                "starling_dropped_events_total",
                "Events dropped, by reason.",
                &["reason"],
            )?,
            batch_events: histogram(
                &r,
                "starling_batch_events",
                "Events per flushed EventBatch.",
                size_buckets,
            )?,
            batch_bytes: histogram(
                &r,
                "starling_batch_bytes",
                "Payload bytes per flushed EventBatch.",
                byte_buckets,
            )?,
            batch_flushes: counter_vec(
                &r,
                "starling_batch_flushes_total",
                "EventBatches flushed, by trigger.",
                &["trigger"],
            )?,
            delivery_latency: histogram(
                &r,
                "starling_delivery_latency_seconds",
                "Time from enqueue on a subscriber queue to the completed stream write.",
                latency_buckets,
            )?,
            lane_queue_depth: gauge_vec(
                &r,
                "starling_lane_queue_depth",
                "Ready subscribers waiting per writer lane.",
                &["lane"],
            )?,
            lane_queue_high_water: gauge_vec(
                &r,
                "starling_lane_queue_high_water",
                "Highest ready-subscriber queue depth seen per writer lane.",
                &["lane"],
            )?,
            lane_enqueued: counter_vec(
                &r,
                "starling_lane_enqueued_total",
                "Subscriber hand-offs per writer lane.",
                &["lane"],
            )?,
            lane_stalls: counter(
                &r,
                "starling_lane_stalls_total",
                "Subscriber writes parked because the stream was blocked.",
            )?,
            subscriber_queued_batches: gauge(
                &r,
                "starling_subscriber_queued_batches",
                "EventBatches queued across all subscribers.",
            )?,
            subscriber_queued_bytes: gauge(
                &r,
                "starling_subscriber_queued_bytes",
                "Bytes of live EventBatches queued for subscribers (subscriber_queue_budget_bytes).",
            )?,
            connections: gauge(&r, "starling_open_connections", "Open client connections.")?,
            connections_total: counter(
                &r,
                "starling_connections_total",
                "Client connections accepted.",
            )?,
            subscriptions: gauge(&r, "starling_subscriptions", "Active subscriptions.")?,
            wildcard_subscriptions: gauge(
                &r,
                "starling_wildcard_subscriptions",
                "Active wildcard subscriptions (a pattern such as orders.*; also counted in starling_subscriptions).",
            )?,
            queue_groups: gauge(
                &r,
                "starling_queue_groups",
                "Queue groups with at least one member on this broker.",
            )?,
            queue_group_members: gauge(
                &r,
                "starling_queue_group_members",
                "Members of queue groups (also counted in starling_subscriptions).",
            )?,
            consumers: gauge(
                &r,
                "starling_consumers",
                "Durable consumers loaded on this broker.",
            )?,
            consumer_members: gauge(
                &r,
                "starling_consumer_members",
                "Members of durable consumers (open consumer streams).",
            )?,
            consumer_pending: gauge_vec(
                &r,
                "starling_consumer_pending",
                "Messages a durable consumer has read and not resolved (acked, termed, dead-lettered).",
                &["topic", "consumer"],
            )?,
            consumer_lag: gauge_vec(
                &r,
                "starling_consumer_lag",
                "Messages of a durable consumer not resolved yet: pending plus unread in the log's newest stream.",
                &["topic", "consumer"],
            )?,
            consumer_deliveries: counter(
                &r,
                "starling_consumer_deliveries_total",
                "Deliveries to durable consumer members, redeliveries included.",
            )?,
            consumer_redeliveries: counter(
                &r,
                "starling_consumer_redeliveries_total",
                "Deliveries of a durable consumer's message after its first (timed out, nak'd, member gone).",
            )?,
            consumer_acks: counter_vec(
                &r,
                "starling_consumer_acks_total",
                "Durable consumer members' answers, by op.",
                &["op"],
            )?,
            consumer_dead_lettered: counter(
                &r,
                "starling_consumer_dead_lettered_total",
                "Durable consumer messages past max_deliver (published to the dead-letter topic if any).",
            )?,
            consumer_dead_letter_failures: counter(
                &r,
                "starling_consumer_dead_letter_failures_total",
                "Dead-letter publishes that failed three times (the message is dropped and logged).",
            )?,
            consumer_state_errors: counter(
                &r,
                "starling_consumer_state_errors_total",
                "Durable consumer state files that could not be read or written, and failed log reads.",
            )?,
            consumer_pending_bytes: gauge(
                &r,
                "starling_consumer_pending_bytes",
                "Bytes of pending messages the durable consumers hold in memory, each charged its payload plus 96 (consumer_pending_max_bytes).",
            )?,
            consumer_budget_waits: counter(
                &r,
                "starling_consumer_budget_waits_total",
                "Times a durable consumer stopped reading its log because its next message did not fit in consumer_pending_max_bytes (read again once acks free room).",
            )?,
            queue_group_events: counter(
                &r,
                "starling_queue_group_events_total",
                "Events handed to one member of a queue group (counted once per group).",
            )?,
            queue_group_dropped_events: counter(
                &r,
                "starling_queue_group_dropped_events_total",
                "Events no member of a queue group took (dropped by the group's slow-subscriber policy).",
            )?,
            header_messages: counter(
                &r,
                "starling_header_messages_total",
                "Published messages with headers accepted into a topic (HEADERS feature).",
            )?,
            publish_duplicates: counter(
                &r,
                "starling_publish_duplicates_total",
                "Published messages dropped as repeats of a message id (Starling-Msg-Id) seen on their topic within dedup_window_ms; each answered with the original's ack.",
            )?,
            dedup_window_bytes: gauge(
                &r,
                "starling_dedup_window_bytes",
                "Bytes held by the topics' de-duplication windows (dedup_max_total_bytes).",
            )?,
            requests: counter(
                &r,
                "starling_requests_total",
                "Requests (publishes carrying reply-to on connections granted REQUEST) checked for responders.",
            )?,
            no_responders: counter(
                &r,
                "starling_no_responders_total",
                "Requests refused with NoResponders: no subscriber on their topic.",
            )?,
            reply_grants_evicted: counter(
                &r,
                "starling_reply_grants_evicted_total",
                "Reply grants (inboxes a connection may reply to) evicted at max_reply_inboxes_per_user.",
            )?,
            inbox_refused: counter(
                &r,
                "starling_inbox_subscriptions_refused_total",
                "Subscriptions under _INBOX refused: malformed, another connection's inbox, a second inbox, or a cluster member.",
            )?,
            topics: gauge(&r, "starling_topics", "Topics with state in memory.")?,
            retained_bytes: gauge(
                &r,
                "starling_retained_bytes",
                "Bytes of EventBatches retained for resuming subscribers (replay_window_ms).",
            )?,
            replayed_events: counter(
                &r,
                "starling_replayed_events_total",
                "Events replayed to subscribers that resumed from a position or started at a time.",
            )?,
            protocol_errors: counter_vec(
                &r,
                "starling_protocol_errors_total",
                "Error frames sent to clients, by code.",
                &["code"],
            )?,
            cache_ops: counter_vec(
                &r,
                "starling_cache_ops_total",
                "Cache operations by op and result.",
                &["op", "result"],
            )?,
            cache_hits: counter(
                &r,
                "starling_cache_hits_total",
                "Cache gets that found a live entry.",
            )?,
            cache_misses: counter(
                &r,
                "starling_cache_misses_total",
                "Cache gets that found nothing.",
            )?,
            cache_evictions: counter(
                &r,
                "starling_cache_evictions_total",
                "Cache entries evicted by the byte bound.",
            )?,
            cache_expirations: counter(
                &r,
                "starling_cache_expirations_total",
                "Cache entries reclaimed after their TTL.",
            )?,
            cache_entries: gauge(&r, "starling_cache_entries", "Live cache entries.")?,
            cache_bytes: gauge(&r, "starling_cache_bytes", "Accounted cache bytes.")?,
            ready: gauge(
                &r,
                names::READY,
                "1 while the broker is ready, 0 while starting or draining.",
            )?,
            process_cpu: {
                let c = Counter::new(
                    names::PROCESS_CPU_SECONDS,
                    "User and system CPU seconds of the broker process (10 ms resolution).",
                )?;
                r.register(Box::new(c.clone()))?;
                c
            },
            cluster_members: gauge(
                &r,
                "starling_cluster_members",
                "Members in the current member list (1 for a single-node broker).",
            )?,
            cluster_is_member: gauge(
                &r,
                "starling_cluster_is_member",
                "1 while this broker is in the member list.",
            )?,
            cluster_membership_changes: counter(
                &r,
                "starling_cluster_membership_changes_total",
                "Member list changes applied.",
            )?,
            cluster_forwarded: counter_vec(
                &r,
                "starling_cluster_forwarded_total",
                "Requests forwarded to the owning member, by op (feed: a subscription at another member feeding a client's wildcard subscription, reply inbox or queue-group member here).",
                &["op"],
            )?,
            cluster_forward_failures: counter_vec(
                &r,
                "starling_cluster_forward_failures_total",
                "Forwards that failed because the owner was unavailable, by op.",
                &["op"],
            )?,
            cluster_moved: counter_vec(
                &r,
                "starling_cluster_moved_total",
                "Moved answers sent to routing clients and peers, by op.",
                &["op"],
            )?,
            cluster_peer_up: gauge_vec(
                &r,
                "starling_cluster_peer_up",
                "1 while the link to a peer works, 0 after it failed.",
                &["peer"],
            )?,
            config_limits: gauge_vec(
                &r,
                names::CONFIG_LIMIT,
                "A limit in force, by the knob that sets it (0: no limit where the knob allows it).",
                &["knob"],
            )?,
            cluster_upstreams: gauge(
                &r,
                "starling_cluster_upstream_subscriptions",
                "Upstream subscriptions held at topic owners for local subscribers.",
            )?,
            cluster_handoff_keys: counter_vec(
                &r,
                "starling_cluster_handoff_keys_total",
                "Cache entries handed off to their new owner or read from their previous owner.",
                &["direction"],
            )?,
            http_refused: counter_vec(
                &r,
                "starling_http_refused_total",
                "HTTP connections closed by the listener's budgets, by reason.",
                &["reason"],
            )?,
            quic_refused: counter_vec(
                &r,
                "starling_quic_refused_total",
                "QUIC connection attempts refused by admission, by reason.",
                &["reason"],
            )?,
            quic_retries: counter(
                &r,
                "starling_quic_retries_total",
                "QUIC Retries sent to make a new address prove itself during a handshake burst.",
            )?,
            streams_timed_out: counter(
                &r,
                "starling_streams_timed_out_total",
                "Streams closed because their first frame did not arrive in time.",
            )?,
            streams_idle_closed: counter_vec(
                &r,
                "starling_streams_idle_closed_total",
                "Publish and cache streams closed after stream_idle_timeout_ms without a frame.",
                &["stream"],
            )?,
            limit_refusals: counter_vec(
                &r,
                "starling_limit_refusals_total",
                "Requests refused with LimitExceeded, by the budget they hit.",
                &["limit"],
            )?,
            replica_rpc_calls: counter_vec(
                &r,
                "starling_replica_rpc_calls_total",
                "Raft RPCs of replicated topics sent to other members, by outcome.",
                &["outcome"],
            )?,
            replica_rpc_served: counter_vec(
                &r,
                "starling_replica_rpc_served_total",
                "Raft RPCs of replicated topics received from other members, by outcome.",
                &["outcome"],
            )?,
            replica: crate::durable::replicated::ReplicaMetrics {
                leader_changes: counter(
                    &r,
                    "starling_replica_leader_changes_total",
                    "Leaders elected, as seen by the replicas of replicated topics open here.",
                )?,
                applied_index: gauge_vec(
                    &r,
                    "starling_replica_applied_index",
                    "One past the last committed and applied Raft index of each replicated topic's replica here (the high-water mark subscribers read up to).",
                    &["topic"],
                )?,
                apply_lag: gauge_vec(
                    &r,
                    "starling_replica_apply_lag_entries",
                    "Entries in each replicated topic's Raft log here not applied yet.",
                    &["topic"],
                )?,
                is_leader: gauge_vec(
                    &r,
                    "starling_replica_is_leader",
                    "1 when the replica here leads the replicated topic, else 0.",
                    &["topic"],
                )?,
                moves: counter_vec(
                    &r,
                    "starling_replica_moves_total",
                    "Replica-set moves of replicated topics led here (membership changes towards the placement), by outcome.",
                    &["outcome"],
                )?,
                under_replicated: gauge_vec(
                    &r,
                    "starling_replica_under_replicated",
                    "1 when the replica here leads the replicated topic and a voter is missing or has not caught up within 10 s, else 0.",
                    &["topic"],
                )?,
                leaderless: gauge_vec(
                    &r,
                    "starling_replica_leaderless",
                    "1 when the replica here knows no leader of the replicated topic, else 0.",
                    &["topic"],
                )?,
            },
            publish_inflight_bytes: gauge(
                &r,
                "starling_publish_inflight_bytes",
                "Publish payload bytes read and not yet handed to their topic or owner.",
            )?,
            publish_budget_waits: counter(
                &r,
                "starling_publish_budget_waits_total",
                "Times a publish stream waited for max_inflight_publish_bytes before reading on.",
            )?,
            persisted_acks_pending_bytes: gauge(
                &r,
                "starling_persisted_acks_pending_bytes",
                "Bytes of persisted acks waiting for their log's fsync (or to be written), \
                 against max_pending_persisted_ack_bytes.",
            )?,
            persisted_ack_budget_waits: {
                let c = counter_vec(
                    &r,
                    "starling_persisted_ack_budget_waits_total",
                    "Times a publish stream waited for room for a persisted ack, by scope \
                     (broker: max_pending_persisted_ack_bytes; connection: its per-connection \
                     share).",
                    &["scope"],
                )?;
                for scope in PENDING_ACK_SCOPES {
                    c.with_label_values(&[scope]);
                }
                c
            },
            connection_buffer_bytes: gauge(
                &r,
                "starling_connection_buffer_bytes",
                "Bytes of QUIC receive and send windows granted to open connections.",
            )?,
            udp_recv_buffer_bytes: gauge(
                &r,
                names::UDP_RECV_BUFFER_BYTES,
                "The QUIC listener's UDP receive buffer as the kernel reports it (Linux: twice \
                 the size granted).",
            )?,
            udp_send_buffer_bytes: gauge(
                &r,
                names::UDP_SEND_BUFFER_BYTES,
                "The QUIC listener's UDP send buffer as the kernel reports it (Linux: twice the \
                 size granted).",
            )?,
            runtime_alive_tasks: gauge(
                &r,
                "starling_runtime_alive_tasks",
                "Tasks alive in the broker's tokio runtime (read at scrape time).",
            )?,
            forbidden: counter_vec(
                &r,
                names::FORBIDDEN,
                "Operations refused by a user's permissions, by operation.",
                &["operation"],
            )?,
            auth_failures: counter_vec(
                &r,
                names::AUTH_FAILURES,
                "Handshakes refused for want of a valid identity, by reason.",
                &["reason"],
            )?,
            auth_users: gauge(&r, names::AUTH_USERS, "Users in the users table in force.")?,
            auth_reload_errors: counter_vec(
                &r,
                names::AUTH_RELOAD_ERRORS,
                "Users-document reads or parses that failed (the last good table stayed), by reason.",
                &["reason"],
            )?,
            auth_users_stale: gauge(
                &r,
                names::AUTH_USERS_STALE,
                "1 while the last read of the users document failed (the last good table, if any, stays in force).",
            )?,
            auth_users_age: gauge(
                &r,
                names::AUTH_USERS_AGE,
                "Seconds since the users table in force was last read (since start, when none was).",
            )?,
            auth_revoked: counter(
                &r,
                names::AUTH_REVOKED_CONNECTIONS,
                "Live connections closed because their user left the users table or their token was replaced.",
            )?,
            auth_subscriptions_withdrawn: counter(
                &r,
                names::AUTH_SUBSCRIPTIONS_WITHDRAWN,
                "Open subscriptions ended because a reload of the users document withdrew the permission they were opened under.",
            )?,
            tls_reloads: counter_vec(
                &r,
                names::TLS_RELOADS,
                "Server certificate and client CA reloads, by outcome.",
                &["outcome"],
            )?,
            storage: crate::durable::StorageMetrics::register(&r)?,
            topics_document: crate::durable::topics_file::TopicsMetrics::register(&r)?,
            registry: r,
            pubsub: std::sync::Arc::default(),
        };
        // Create every fixed label combination up front so each series exists (at 0) from the
        // first scrape instead of appearing only after the first event.
        for reason in DropReason::ALL {
            m.dropped_events.with_label_values(&[drop_label(reason)]);
        }
        for reason in http_refusal::ALL {
            m.http_refused.with_label_values(&[reason]);
        }
        for reason in quic_refusal::ALL {
            m.quic_refused.with_label_values(&[reason]);
        }
        for stream in idle_stream::ALL {
            m.streams_idle_closed.with_label_values(&[stream]);
        }
        for limit in Limit::ALL {
            m.limit_refusals.with_label_values(&[limit.label()]);
        }
        for outcome in replica_rpc::SENT {
            m.replica_rpc_calls.with_label_values(&[outcome]);
        }
        for outcome in replica_rpc::SERVED {
            m.replica_rpc_served.with_label_values(&[outcome]);
        }
        for outcome in crate::durable::replicated::mover::OUTCOMES {
            m.replica.moves.with_label_values(&[outcome]);
        }
        for op in ["publish", "subscribe", "cache_read", "cache_write"] {
            m.forbidden.with_label_values(&[op]);
        }
        for reason in auth_failure::ALL {
            m.auth_failures.with_label_values(&[reason]);
        }
        for reason in users_read_failure::ALL {
            m.auth_reload_errors.with_label_values(&[reason]);
        }
        for outcome in ["applied", "failed"] {
            m.tls_reloads.with_label_values(&[outcome]);
        }
        m.cluster_forwarded.with_label_values(&["feed"]);
        for op in ["publish", "subscribe", "cache"] {
            m.cluster_forwarded.with_label_values(&[op]);
            m.cluster_forward_failures.with_label_values(&[op]);
            m.cluster_moved.with_label_values(&[op]);
        }
        m.cluster_moved.with_label_values(&["consume"]);
        for direction in ["pushed", "pulled"] {
            m.cluster_handoff_keys.with_label_values(&[direction]);
        }
        for trigger in TRIGGERS {
            m.batch_flushes.with_label_values(&[trigger.label()]);
        }
        for (op, results) in [
            ("put", &["ok", "refused"][..]),
            ("get", &["hit", "miss"]),
            ("delete", &["ok", "absent"]),
        ] {
            for result in results {
                m.cache_ops.with_label_values(&[op, result]);
            }
        }
        Ok(m)
    }

    /// Counts an operation refused by a user's permissions.
    pub fn forbidden(&self, denied: &starling_access::Denied) {
        self.forbidden
            .with_label_values(&[denied.operation.name()])
            .inc();
    }

    /// Counts a request refused because it hit `limit`.
    pub fn limit_refused(&self, limit: Limit) {
        self.limit_refusals
            .with_label_values(&[limit.label()])
            .inc();
    }

    /// Exports `counters`, the pub/sub engine's, and the bytes held of `queue_budget` at every
    /// scrape from now on (set once; a second call is ignored).
    pub fn export_pubsub(
        &self,
        counters: std::sync::Arc<Counters>,
        queue_budget: std::sync::Arc<QueueBudget>,
    ) {
        let _ = self.pubsub.set(PubsubExport {
            counters,
            queue_budget,
            storage_errors: std::sync::atomic::AtomicU64::new(0),
            storage_replayed_records: std::sync::atomic::AtomicU64::new(0),
            dedup_refused: std::sync::atomic::AtomicU64::new(0),
        });
    }

    /// Copies the pub/sub engine's counters into the exported series.
    fn observe_pubsub(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(x) = self.pubsub.get() else {
            return;
        };
        let c = &x.counters;
        let gauge = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        catch_up(&self.delivered_events, c.delivered_events.load(Relaxed));
        catch_up(&self.delivered_bytes, c.delivered_bytes.load(Relaxed));
        for reason in DropReason::ALL {
            let series = self.dropped_events.with_label_values(&[drop_label(reason)]);
            catch_up(&series, c.dropped(reason));
        }
        for trigger in TRIGGERS {
            let series = self.batch_flushes.with_label_values(&[trigger.label()]);
            catch_up(&series, c.batch_flushes(trigger));
        }
        catch_up(&self.lane_stalls, c.lane_stalls.load(Relaxed));
        catch_up(&self.replayed_events, c.replayed_events.load(Relaxed));
        catch_up(&self.queue_group_events, c.group_events.load(Relaxed));
        catch_up(
            &self.queue_group_dropped_events,
            c.group_dropped_events.load(Relaxed),
        );
        self.subscriber_queued_batches
            .set(gauge(c.queued_batches()));
        self.subscriber_queued_bytes
            .set(gauge(x.queue_budget.used()));
        self.retained_bytes
            .set(gauge(c.retained_bytes.load(Relaxed)));
        self.topics.set(gauge(c.topics.load(Relaxed)));
        for (lane, l) in c.lanes.iter().enumerate() {
            let label = lane.to_string();
            let label = [label.as_str()];
            self.lane_queue_depth
                .with_label_values(&label)
                .set(gauge(l.depth.load(Relaxed)));
            self.lane_queue_high_water
                .with_label_values(&label)
                .set(gauge(l.high_water.load(Relaxed)));
            catch_up(
                &self.lane_enqueued.with_label_values(&label),
                l.enqueued.load(Relaxed),
            );
        }
        let by_difference = |total: u64, last: &std::sync::atomic::AtomicU64, into: &IntCounter| {
            let before = last.swap(total, Relaxed);
            into.inc_by(total.saturating_sub(before));
        };
        by_difference(
            c.storage_errors.load(Relaxed),
            &x.storage_errors,
            &self.storage.errors,
        );
        by_difference(
            c.storage_replayed_records.load(Relaxed),
            &x.storage_replayed_records,
            &self.storage.replayed_records,
        );
        by_difference(
            c.dedup_refused.load(Relaxed),
            &x.dedup_refused,
            &self
                .limit_refusals
                .with_label_values(&[Limit::DedupTotalBytes.label()]),
        );
        catch_up(&self.publish_duplicates, c.duplicates.load(Relaxed));
        self.dedup_window_bytes
            .set(gauge(c.dedup_bytes.load(Relaxed)));
    }

    /// Copies the cache's own counters into the exported series.
    pub fn observe_cache(&self, s: &CacheStats) {
        catch_up(&self.cache_hits, s.hits);
        catch_up(&self.cache_misses, s.misses);
        catch_up(&self.cache_evictions, s.evictions);
        catch_up(&self.cache_expirations, s.expirations);
        self.cache_entries
            .set(i64::try_from(s.entries).unwrap_or(i64::MAX));
        self.cache_bytes
            .set(i64::try_from(s.bytes).unwrap_or(i64::MAX));
    }

    /// Exports the listener's UDP socket buffers as the kernel reports them.
    pub fn observe_udp_buffers(&self, udp: &starling_client::UdpBuffers) {
        let bytes = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.udp_recv_buffer_bytes.set(bytes(udp.recv.effective));
        self.udp_send_buffer_bytes.set(bytes(udp.send.effective));
    }

    /// Raises the CPU counter to the process's current CPU time, and reads the runtime's alive
    /// tasks (when called inside a tokio runtime).
    pub fn observe_process(&self) {
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            let tasks = rt.metrics().num_alive_tasks();
            self.runtime_alive_tasks
                .set(i64::try_from(tasks).unwrap_or(i64::MAX));
        }
        if let Some(total) = crate::process::cpu_seconds() {
            let delta = total - self.process_cpu.get();
            if delta > 0.0 {
                self.process_cpu.inc_by(delta);
            }
        }
    }

    /// Exports the limits of `cfg` as `starling_config_limit{knob}`, so alerts and dashboards
    /// compare usage with the limit in force instead of a default.
    pub fn set_limits(&self, cfg: &starling_config::BrokerConfig) {
        for (knob, value) in limit_values(cfg) {
            self.config_limits
                .with_label_values(&[knob])
                .set(i64::try_from(value).unwrap_or(i64::MAX));
        }
    }

    /// Renders every metric in the Prometheus text exposition format (the pub/sub engine's
    /// counters as of now).
    pub fn render(&self) -> String {
        self.observe_pubsub();
        let mut buf = Vec::new();
        if let Err(e) = TextEncoder::new().encode(&self.registry.gather(), &mut buf) {
            tracing::warn!(error = %e, "metrics encoding failed");
        }
        String::from_utf8(buf).unwrap_or_default()
    }
}

/// Raises a counter to `total` (the source counter is monotonic).
fn catch_up(c: &IntCounter, total: u64) {
    let cur = c.get();
    if total > cur {
        c.inc_by(total - cur);
    }
}

/// The engine's distributions go to the histograms.
impl Observe for Metrics {
    fn batch_sealed(&self, events: usize, bytes: usize) {
        self.batch_events.observe(events as f64);
        self.batch_bytes.observe(bytes as f64);
    }

    fn delivered(&self, latency: std::time::Duration) {
        self.delivery_latency.observe(latency.as_secs_f64());
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn operations_doc_lists_exactly_the_exported_metrics() {
        let m = Metrics::new().expect("metrics");
        for lane_series in [&m.lane_queue_depth, &m.lane_queue_high_water] {
            lane_series.with_label_values(&["0"]);
        }
        m.lane_enqueued.with_label_values(&["0"]);
        m.cluster_peer_up.with_label_values(&["b-1"]);
        m.protocol_errors.with_label_values(&["bad_frame"]);
        m.config_limits.with_label_values(&["max_topics"]);
        for topic_series in [
            &m.replica.applied_index,
            &m.replica.apply_lag,
            &m.replica.is_leader,
            &m.replica.under_replicated,
            &m.replica.leaderless,
        ] {
            topic_series.with_label_values(&["t"]);
        }
        for consumer_series in [&m.consumer_pending, &m.consumer_lag] {
            consumer_series.with_label_values(&["t", "c"]);
        }
        m.consumer_acks.with_label_values(&["ack"]);
        let rendered: BTreeSet<String> = m
            .render()
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| n.starts_with("starling_"))
            .map(str::to_string)
            .collect();
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/operations.md"
        ))
        .expect("docs/operations.md");
        let documented: BTreeSet<String> = doc
            .lines()
            .filter_map(|l| l.strip_prefix("| `starling_"))
            .filter_map(|l| l.split('`').next())
            .map(|n| format!("starling_{n}"))
            .collect();
        assert_eq!(
            rendered, documented,
            "docs/operations.md metric table and the registry differ"
        );
    }

    #[test]
    fn the_limits_in_force_are_exported_by_knob() {
        let m = Metrics::new().expect("metrics");
        let mut cfg = starling_config::resolve(
            starling_config::Profile::Balanced,
            None,
            &starling_config::ConfigOverrides::default(),
        )
        .expect("balanced");
        cfg.replay_max_total_bytes = 123_456_789;
        cfg.max_topics = 77;
        m.set_limits(&cfg);
        let text = m.render();
        assert!(
            text.contains("starling_config_limit{knob=\"replay_max_total_bytes\"} 123456789\n"),
            "{text}"
        );
        assert!(
            text.contains("starling_config_limit{knob=\"max_topics\"} 77\n"),
            "{text}"
        );
        assert_eq!(
            text.lines()
                .filter(|l| l.starts_with("starling_config_limit{"))
                .count(),
            limit_values(&cfg).len()
        );
    }

    #[test]
    fn every_series_other_components_read_is_exported_unlabelled() {
        let m = Metrics::new().expect("metrics");
        let text = m.render();
        for name in starling_config::metric_names::READ_BY_OTHERS {
            let unlabelled = format!("\n{name} ");
            assert!(
                text.contains(&unlabelled),
                "{name} is not exported unlabelled"
            );
        }
    }

    #[test]
    fn build_info_names_the_git_revision() {
        let text = Metrics::new().expect("metrics").render();
        let line = text
            .lines()
            .find(|l| l.starts_with("starling_build_info{"))
            .expect("build_info exported");
        let revision = line
            .split("revision=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .expect("a revision label");
        assert!(!revision.is_empty(), "{line}");
        let head = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
        match std::env::var("STARLING_GIT_REVISION") {
            // Told at build time (`make test` says it, as does a Docker build): that value.
            Ok(told) if !told.trim().is_empty() => assert_eq!(revision, told.trim()),
            // Built from a git checkout: the checkout's commit.
            _ => {
                if let Some(head) = head {
                    assert!(revision.starts_with(&head), "{revision} is not HEAD {head}");
                }
            }
        }
    }

    #[test]
    fn the_exposition_parses_with_no_colliding_families() {
        let m = Metrics::new().expect("metrics");
        m.lane_enqueued.with_label_values(&["0"]);
        m.cluster_peer_up.with_label_values(&["b-1"]);
        m.protocol_errors.with_label_values(&["bad_frame"]);
        let text = m.render();
        // An independent parser of the exposition formats: the whole text parses, and every
        // family is distinct.
        let parsed = openmetrics_parser::prometheus::parse_prometheus(&text);
        assert!(parsed.is_ok(), "{:?}", parsed.err());
        // In OpenMetrics a counter's family is its name without `_total`, so a counter `x_total`
        // and a gauge `x` would be one family twice.
        let names: BTreeSet<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        for name in &names {
            if let Some(family) = name.strip_suffix("_total") {
                assert!(
                    !names.contains(family),
                    "{name} and {family} are one OpenMetrics family"
                );
            }
        }
    }
}
