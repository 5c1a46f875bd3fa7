//! The broker's shared state, assembled once by [`crate::broker`] at start-up. [`State`] is the
//! composition root: it owns every long-lived handle, and each subsystem is handed only the
//! handles it uses (the ingress handlers through `server::Ingress`, the cluster side through
//! its own structs), never the whole of it.
//!
//! Two pieces of state belong to no single subsystem and live here: the registry of live
//! subscriptions ([`Subscriptions`]: written by the subscription handler, read by the drain, by
//! membership changes and by the upstreams) and the publish gate ([`PublishGate`]: held by
//! publish requests on their way to their topic, waited for by the drain; it holds the budget
//! of `persisted` acks waiting for an fsync too, `pubsub::pending_acks`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use starling_config::BrokerConfig;
use starling_placement::Kind;
use starling_proto::FrameDecoder;
use tokio::sync::{Notify, Semaphore};

use crate::auth::Auth;
use crate::cache::Cache;
use crate::cluster::forward::Forwarder;
use crate::cluster::handoff::Handoff;
use crate::cluster::log_peers::LogClaims;
use crate::cluster::peers::Peers;
use crate::cluster::replica_link::ReplicaLinks;
use crate::cluster::upstream::Upstreams;
use crate::cluster::{Cluster, Role, Route};
use crate::durable::replicated::ReplicaRegistry;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::pubsub::lanes::Lanes;
use crate::pubsub::pending_acks::PendingAcks;
use crate::pubsub::subscriber::Subscriber;
use crate::pubsub::topic::Topics;

/// Every long-lived handle of a running broker.
pub struct State {
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
    /// Live subscriptions.
    pub subscriptions: Arc<Subscriptions>,
    /// Publish requests on their way to their topic or owner.
    pub publishes: Arc<PublishGate>,
    /// Membership and ownership.
    pub cluster: Arc<Cluster>,
    /// Links to the other members.
    pub peers: Arc<Peers>,
    /// Requests handed to other members.
    pub forward: Forwarder,
    /// Subscriptions held at topic owners for local subscribers.
    pub upstreams: Arc<Upstreams>,
    /// Feeds of clients' pattern subscriptions, inboxes and pattern groups from the other
    /// members.
    pub fan_in: Arc<crate::cluster::fan_in::FanIn>,
    /// The cache hand-off.
    pub handoff: Arc<Handoff>,
    /// Claims of durable logs this broker holds for topics it no longer owns.
    pub log_claims: Arc<LogClaims>,
    /// Identities and permissions.
    pub auth: Arc<Auth>,
    /// The replicas of replicated topics open here (the Raft RPC streams' routing table).
    pub replicas: Arc<ReplicaRegistry>,
    /// Raft RPCs of replicated topics to the other members.
    pub replica_links: Arc<ReplicaLinks>,
}

/// A live subscription.
#[derive(Clone)]
pub struct Registered {
    /// The subscriber.
    pub sub: Arc<Subscriber>,
    /// Who subscribed.
    pub role: Role,
    /// Ends the subscription with `Moved` (its topic moved to another member).
    pub kick: Arc<Notify>,
    /// Whether it is a wildcard subscription (its `sub.topic` is a pattern, not a topic: it
    /// has no owner and no upstream).
    pub wildcard: bool,
}

/// Live subscriptions by id, so the drain can finish their streams cleanly and a membership
/// change can move them.
#[derive(Default)]
pub struct Subscriptions {
    /// Subscription id source (unique for the broker's life).
    next_id: AtomicU64,
    live: parking_lot::Mutex<HashMap<u64, Registered>>,
    /// How many of `live` (not wildcard ones) name each topic: whether a request has
    /// responders, known before `SubscribeOk` is sent.
    per_topic: parking_lot::Mutex<HashMap<Arc<str>, usize>>,
}

impl Subscriptions {
    /// A fresh subscription id (from 1).
    pub fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Registers `entry` under `id` unless `max` subscriptions are live; false when refused.
    pub fn admit(&self, id: u64, entry: Registered, max: usize) -> bool {
        let mut live = self.live.lock();
        let room = live.len() < max;
        if room {
            if !entry.wildcard {
                *self
                    .per_topic
                    .lock()
                    .entry(Arc::clone(&entry.sub.topic))
                    .or_default() += 1;
            }
            live.insert(id, entry);
        }
        room
    }

    /// Forgets subscription `id`.
    pub fn remove(&self, id: u64) {
        let mut live = self.live.lock();
        if let Some(gone) = live.remove(&id)
            && !gone.wildcard
        {
            let mut per_topic = self.per_topic.lock();
            if let Some(n) = per_topic.get_mut(&gone.sub.topic) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    per_topic.remove(&gone.sub.topic);
                }
            }
        }
    }

    /// Whether a subscription (not a wildcard one) names `topic`.
    pub fn has_topic(&self, topic: &str) -> bool {
        self.per_topic.lock().contains_key(topic)
    }

    /// The topic of every plain client's subscription (what the upstreams relay for).
    pub fn plain_topics(&self) -> Vec<Arc<str>> {
        self.live
            .lock()
            .values()
            // Routing clients and peers are sent to the owner instead (`Moved`); a queue group
            // is served by the owner alone.
            .filter(|r| r.role == Role::Plain && !r.wildcard && r.sub.group.is_none())
            .map(|r| Arc::clone(&r.sub.topic))
            .collect()
    }

    /// The kick of every routing client's and peer's subscription (queue-group ones included;
    /// not wildcard ones) whose topic `cluster` no longer places here. A plain client's stays:
    /// relayed, or for a group member fed, from the new owner.
    pub fn moved_away(&self, cluster: &Cluster) -> Vec<Arc<Notify>> {
        self.live
            .lock()
            .values()
            .filter(|r| r.role != Role::Plain && !r.wildcard)
            .filter(|r| cluster.route(Kind::Topic, r.sub.topic.as_bytes()) != Route::Local)
            .map(|r| Arc::clone(&r.kick))
            .collect()
    }

    /// Every live subscriber (for the drain).
    pub fn all(&self) -> Vec<Arc<Subscriber>> {
        self.live
            .lock()
            .values()
            .map(|r| Arc::clone(&r.sub))
            .collect()
    }
}

/// Publish requests between their stream and their topic (or owner).
pub struct PublishGate {
    /// Publish requests past the drain check that have not reached their topic or owner yet.
    pub in_flight: AtomicU64,
    /// `max_inflight_publish_bytes` as permits of one byte each.
    pub budget: Arc<Semaphore>,
    /// `max_inflight_publish_bytes`, the most one request takes of the budget.
    pub budget_bytes: usize,
    /// `max_pending_persisted_ack_bytes`: the `persisted` acks waiting for an fsync.
    pub pending_acks: PendingAcks,
    /// Notified when the last request in flight leaves.
    none_in_flight: Notify,
}

impl PublishGate {
    /// A gate with a budget of `max_bytes` and `pending_acks`.
    pub fn new(max_bytes: u64, pending_acks: PendingAcks) -> PublishGate {
        let budget_bytes = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        PublishGate {
            in_flight: AtomicU64::new(0),
            budget: Arc::new(Semaphore::new(budget_bytes.min(Semaphore::MAX_PERMITS))),
            budget_bytes,
            pending_acks,
            none_in_flight: Notify::new(),
        }
    }

    /// A request in flight reached its topic or owner (or was dropped on the way).
    pub fn leave(&self) {
        if self.in_flight.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.none_in_flight.notify_waiters();
        }
    }

    /// Returns once no publish request is in flight (at once if none is).
    pub async fn wait_none_in_flight(&self) {
        loop {
            let none = self.none_in_flight.notified();
            tokio::pin!(none);
            none.as_mut().enable();
            if self.in_flight() == 0 {
                return;
            }
            none.await;
        }
    }

    /// Publish requests in flight now.
    pub fn in_flight(&self) -> u64 {
        self.in_flight.load(Ordering::SeqCst)
    }
}
