//! The QUIC side of the broker: accepting connections, the handshake, and routing each stream
//! to its handler by its first frame.
//!
//! - [`admit`]: whether a connection attempt is served, retried or refused.
//! - [`conn`]: one connection: handshake, then one task per stream.
//! - [`link`]: what a stream handler knows about its connection.
//! - [`publish`]: publish streams and the per-connection publish workers.
//! - [`subscribe`]: subscription streams.
//! - [`cache`]: cache request/response streams.
//! - [`reply`]: writing frames and typed errors back to a stream.

pub mod admit;
pub mod cache;
pub mod conn;
pub mod link;
pub mod publish;
pub mod reply;
pub mod subscribe;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use starling_config::BrokerConfig;
use starling_proto::FrameDecoder;

use crate::cache::Cache;
use crate::cluster::peers::Peers;
use crate::cluster::upstream::Upstreams;
use crate::cluster::{Cluster, Role};
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pubsub::lanes::Lanes;
use crate::pubsub::subscriber::Subscriber;
use crate::pubsub::topic::Topics;

/// Everything a connection handler needs, shared by all connections.
pub struct Ctx {
    /// The effective config.
    pub cfg: Arc<BrokerConfig>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Topic registry.
    pub topics: Arc<Topics>,
    /// Writer lanes.
    pub lanes: Arc<Lanes>,
    /// The cache.
    pub cache: Arc<Cache>,
    /// Lifecycle state.
    pub health: Arc<Health>,
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: FrameDecoder,
    /// Name sent in `HelloOk`.
    pub server_id: String,
    /// Connection id source.
    pub next_conn_id: AtomicU64,
    /// Subscription id source (unique for the broker's life).
    pub next_sub_id: AtomicU64,
    /// Publish requests past the drain check that have not reached their topic or owner yet.
    pub publishes_in_flight: AtomicU64,
    /// `max_inflight_publish_bytes` as permits of one byte each (see `publish::Budget`).
    pub publish_budget: Arc<tokio::sync::Semaphore>,
    /// Live subscriptions by id, so the drain can finish their streams cleanly and a
    /// membership change can move them.
    pub subscribers: parking_lot::Mutex<HashMap<u64, Registered>>,
    /// Membership and ownership.
    pub cluster: Arc<Cluster>,
    /// Links to the other members.
    pub peers: Arc<Peers>,
    /// Subscriptions held at topic owners for local subscribers.
    pub upstreams: Upstreams,
    /// Wakes the cache hand-off (a peer stored a key this broker does not own).
    pub handoff_wake: Arc<tokio::sync::Notify>,
}

/// A live subscription.
#[derive(Clone)]
pub struct Registered {
    /// The subscriber.
    pub sub: Arc<Subscriber>,
    /// Who subscribed.
    pub role: Role,
    /// Ends the subscription with `Moved` (its topic moved to another member).
    pub kick: Arc<tokio::sync::Notify>,
    /// The subscriber's connection (the drain tells a silent peer by its statistics).
    pub quic: quinn::Connection,
}
