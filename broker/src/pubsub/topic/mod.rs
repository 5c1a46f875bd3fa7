//! Topics: the registry ([`registry`], [`Topics`]) and the task that owns each topic's batch,
//! stream positions, retained tail and subscriber list ([`task`]). This module holds what both
//! sides and their callers share: the message type, the settings and the topic cap.
//!
//! Data flows one way: a publish worker sends messages to the topic's bounded channel; the topic
//! task batches them (count, bytes, delay), numbers them in its current stream, encodes each
//! EventBatch once, offers the shared frame to every subscriber queue, hands ready subscribers
//! to their writer lanes, retains the frame for resuming subscribers, and then completes the
//! batch's commit acks. A full channel makes publish workers wait, which stops the broker
//! reading publisher streams, which lets QUIC flow control push back.
//!
//! Events relayed from the topic's owner (an upstream subscription, see `cluster::upstream`)
//! arrive already numbered: they keep the owner's positions, skip the batcher, and events this
//! task already relayed are dropped. A subscriber resuming at such a relay from before its
//! retained tail is held back from the fan-out and fed by a catch-up from the owner until the
//! tail reaches back to where it stands (`cluster::catchup`). A new stream id is drawn when the task starts and for the
//! first batch after every membership change that leaves the topic here, so one position never
//! names two different events; a late batch at a former owner continues its stream.
//!
//! A durable topic (`durable_topics`, see `crate::durable`) appends each sealed local batch to
//! its log before offering it; its numbering continues the log's, so positions survive a
//! restart, and a resume position older than the retained tail is replayed from the log. A new
//! owner first copies what the other members' logs hold past its own end
//! (`durable::transfer`), then numbers in a new stream above it; while a member it asked could not
//! be read, it takes no publish and tries again ([`hand_off`]).

pub mod dedup;
pub mod hand_off;
pub mod registry;
pub mod task;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_proto::{IndexedHeaders, Position};
use tokio::sync::watch;

use crate::pubsub::ack::AckToken;
use crate::pubsub::batcher::Limits;
pub use registry::Topics;
pub use task::CaughtUp;

/// Messages published to a topic in one request.
#[derive(Debug)]
pub struct TopicMsg {
    /// Payloads in order.
    pub payloads: Vec<Bytes>,
    /// The headers of the payloads that have any, by strictly increasing index into
    /// `payloads` (the `HEADERS` feature; always empty for relayed events).
    pub headers: Vec<IndexedHeaders>,
    /// The commit ack to complete once they are enqueued to every subscriber.
    pub ack: Option<AckToken>,
    /// For events relayed from the topic's owner: the owner's position of the first payload
    /// (the others follow consecutively). `None` for a publish, which this broker numbers.
    pub origin: Option<Position>,
    /// What the ingress holds for these messages (their bytes of
    /// `max_inflight_publish_bytes`), kept until their batch is sealed and offered.
    pub hold: Option<Hold>,
}

/// Whatever an ingress holds for a message until its batch is sealed and offered to the
/// subscribers (the publish budget's permit): released when dropped. Opaque here, because the
/// topic only decides when, never what.
pub struct Hold {
    _held: Box<dyn Send + Sync>,
}

impl Hold {
    /// Wraps what is released on drop.
    pub fn new(held: impl Send + Sync + 'static) -> Hold {
        Hold {
            _held: Box::new(held),
        }
    }
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hold")
    }
}

/// What rides on a message in the open batch until the batch is sealed: the request's commit
/// ack (on its last message) and the request's [`Hold`].
#[derive(Debug)]
pub struct Attach {
    /// The commit ack, if any.
    pub ack: Option<AckToken>,
    /// The ingress hold, if any; dropped once the batch has been offered.
    pub hold: Option<Hold>,
}

/// Settings every topic task shares.
pub struct TopicSettings {
    /// Batch limits.
    pub limits: Limits,
    /// Capacity of each topic's inbound channel (`pub_queue_depth`).
    pub queue_depth: usize,
    /// A topic with no subscribers and no traffic for this long is retired.
    pub idle_retire: Duration,
    /// How long the fanned-out batches are retained for resuming subscribers.
    pub replay_window: Duration,
    /// Most bytes retained per topic.
    pub replay_max_bytes: usize,
    /// Most bytes retained by all topics together.
    pub replay_max_total_bytes: usize,
    /// The cluster's membership epoch; a change starts a new stream.
    pub epoch: watch::Receiver<u64>,
    /// Whether this broker owns a topic now (always, outside a cluster).
    pub owns: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    /// Most topics alive at once (`max_topics`), checked by [`Topics::reserve`].
    pub max_topics: usize,
    /// Which topics are durable and how their logs are kept.
    pub durability: Arc<crate::durable::Durability>,
    /// How a new owner reaches the other members' logs of a durable topic.
    pub log_peers: Arc<dyn crate::durable::transfer::LogPeers>,
    /// Replicated durable topics (`durable_replicas` > 1 in a cluster).
    pub replication: Arc<crate::durable::replicated::Replication>,
    /// Each topic's de-duplication window (`dedup_window_ms`, `dedup_max_ids`).
    pub dedup: crate::pubsub::dedup::Limits,
    /// Most bytes all topics' windows hold together (`dedup_max_total_bytes`).
    pub dedup_max_total_bytes: u64,
    /// Reply inboxes: a topic grants each connection it delivers a request to a reply to the
    /// request's inbox.
    pub inboxes: Arc<crate::pubsub::inboxes::Inboxes>,
}

/// A new topic was refused: `max_topics` are alive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{max} topics are alive, the most this broker allows (max_topics); publish to or subscribe on an existing topic, or retry once idle topics have retired"
)]
pub struct TopicLimit {
    /// The `max_topics` in force.
    pub max: usize,
}
