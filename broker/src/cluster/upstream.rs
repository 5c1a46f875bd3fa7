//! Upstream subscriptions: a broker with subscribers of a topic it does not own holds ONE
//! subscription at the topic's owner and republishes what arrives into its local topic, whose
//! ordinary fan-out serves every local subscriber. N local subscribers never make N upstream
//! streams. [`Upstreams::reconcile`] makes the set of upstreams match the local subscribers and
//! the current owners; it runs when a subscription starts or ends and on membership changes.
//!
//! Relayed events keep the owner's stream positions, and each upstream remembers the position it
//! reached: a new subscription at the owner (after the owner restarted, or at a new owner)
//! resumes from there, so the owner's retained tail fills the gap. A local subscriber resuming
//! here with no upstream seeds the upstream's starting position, or its start time, when the
//! local topic has relayed nothing yet: the upstream then subscribes at the owner from there
//! (its log or retained tail), until the first event relayed gives it a position. When the
//! local topic has relayed before, the new upstream continues from where that relay stopped
//! instead, so the local tail goes on without a gap and never gets an older event after a
//! newer one; a subscriber resuming from before the tail is fed by its own catch-up
//! ([`super::catchup`]).
//!
//! [`Upstreams`] holds only what relaying uses: the cluster view, the peer links, the local
//! topics and the metrics. Which topics have local subscribers is asked of the caller (the
//! subscription registry lives with the ingress side).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;
use starling_client::{ClientError, Event, Subscription};
use starling_placement::Kind;
use starling_proto::{IndexedHeaders, Position, StartAt};
use tokio::task::JoinHandle;

use super::peers::Peers;
use super::{Cluster, Member, Route};
use crate::metrics::Metrics;
use crate::pubsub::topic::{TopicMsg, Topics};

/// Pause before an upstream subscription is tried again.
pub(super) const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Events gathered into one local publish when several are already waiting.
const MAX_GATHER: usize = 256;
/// When a topic's owner changes, the upstream at the former owner retires rather than stopping:
/// brokers learn of a membership change at different times, and what the former owner still
/// accepts until it learns must reach the local subscribers too. A retiring upstream goes on
/// relaying (and resubscribing at the former owner, from where it stood, should its link break)
/// as long as the former owner still places the topic on itself. It ends once the former owner
/// has learned of the change (which ends its peers' subscriptions of a topic it no longer owns,
/// after delivering what it accepted) or cannot be reached, and after this long in any case.
const RETIRE_LIMIT: Duration = Duration::from_secs(30);

/// Where a topic's relay stands: one past the owner's last event relayed here.
type At = Arc<parking_lot::Mutex<Option<Position>>>;

/// The upstream subscriptions of this broker, by topic.
pub struct Upstreams {
    pub(super) cluster: Arc<Cluster>,
    pub(super) peers: Arc<Peers>,
    pub(super) topics: Arc<Topics>,
    pub(super) metrics: Arc<Metrics>,
    tasks: parking_lot::Mutex<HashMap<String, Upstream>>,
    /// Where subscribers that resumed here (from a position or a time) while no upstream
    /// existed for their topic start; the upstream starts from there.
    seeds: parking_lot::Mutex<HashMap<String, StartAt>>,
    /// Set by [`Upstreams::stop_all`] (the drain): no upstream starts after it. One started
    /// then would begin at the owner's live events and could hand a subscriber still being
    /// drained an event past a gap, moving its resume position beyond events it never got.
    pub(super) stopped: AtomicBool,
}

struct Upstream {
    owner: String,
    task: JoinHandle<()>,
    at: At,
    /// `true` while the subscription at the owner is open (it has answered `SubscribeOk`), so
    /// every event the owner accepts from then on is relayed here.
    live: tokio::sync::watch::Receiver<bool>,
    /// Set when the upstream retires (see [`RETIRE_LIMIT`]).
    retiring: Arc<AtomicBool>,
}

impl Upstreams {
    /// No upstreams yet; they relay from other members over `peers` into `topics`.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        topics: Arc<Topics>,
        metrics: Arc<Metrics>,
    ) -> Arc<Upstreams> {
        Arc::new(Upstreams {
            cluster,
            peers,
            topics,
            metrics,
            tasks: parking_lot::Mutex::default(),
            seeds: parking_lot::Mutex::default(),
            stopped: AtomicBool::new(false),
        })
    }

    /// Notes that a local subscriber starts `topic` at `from` (a resume position or a time):
    /// an upstream started for it asks the owner to replay from there (an existing one already
    /// relays, and the local topic's retained tail serves the subscriber). `Live` seeds
    /// nothing.
    pub fn seed(&self, topic: &str, from: StartAt) {
        if from != StartAt::Live && !self.tasks.lock().contains_key(topic) {
            self.seeds.lock().insert(topic.to_string(), from);
        }
    }

    /// Starts an upstream for every topic with local plain-client subscribers that another
    /// member owns, and stops the ones no longer needed. One pointing at a former owner is
    /// replaced by one at the new owner that resumes where it stood, and retires (see
    /// [`RETIRE_LIMIT`]). `plain_topics` lists the topic of every local plain-client
    /// subscription (routing clients and peers are sent to the owner instead, with `Moved`);
    /// it is read under the upstreams' lock.
    pub fn reconcile(self: &Arc<Self>, plain_topics: impl FnOnce() -> Vec<Arc<str>>) {
        // Held from reading the subscribers to the last change: two reconciles racing (the last
        // two subscribers of a topic leaving at once) must not let the one that read the older
        // subscriber set apply it last, which would leave an upstream nobody needs.
        let mut tasks = self.tasks.lock();
        if self.stopped.load(Ordering::SeqCst) {
            return;
        }
        let topics = plain_topics();
        let mut desired: HashMap<String, Member> = HashMap::new();
        let mut wanted: std::collections::HashSet<Arc<str>> = std::collections::HashSet::new();
        for topic in topics {
            if !wanted.insert(Arc::clone(&topic)) {
                continue;
            }
            // A replica of a replicated topic delivers its own committed entries.
            if self.topics.is_replica_here(&topic) {
                continue;
            }
            if let Route::Peer(owner) = self.cluster.route(Kind::Topic, topic.as_bytes()) {
                desired.insert(topic.to_string(), owner);
            }
        }
        let mut seeds = self.seeds.lock();
        let mut carried: HashMap<String, At> = HashMap::new();
        tasks.retain(|topic, up| {
            match desired.get(topic) {
                Some(m) if m.id == up.owner => return true,
                Some(_) => {
                    // Re-aimed: carry the position over, and retire.
                    carried.insert(topic.clone(), Arc::clone(&up.at));
                    up.retire();
                }
                // This broker owns the topic now; the former owner may still accept
                // publishes until it learns of the change.
                None if wanted.contains(topic.as_str()) => up.retire(),
                None => up.task.abort(),
            }
            false
        });
        seeds.retain(|topic, _| desired.contains_key(topic));
        for (topic, owner) in desired {
            if tasks.contains_key(&topic) {
                continue;
            }
            // Where to start: where the upstream it replaces stood; else, for a resuming local
            // subscriber, where the local topic's relay stopped when it relayed before (its
            // tail goes on from there without a gap or an older event after a newer one; a
            // subscriber from further back is fed by its own catch-up, `cluster::catchup`),
            // else where the subscriber stands (a position or a time); else, when this broker
            // owned the topic until the change, where its local subscribers stand: the new
            // owner replays what it accepted since.
            let from = match carried.remove(&topic) {
                Some(old) => StartAt::from(*old.lock()),
                None => seeds
                    .remove(&topic)
                    .map(|seed| self.topics.reached(&topic).map_or(seed, StartAt::Position))
                    .unwrap_or_else(|| {
                        StartAt::from(
                            self.cluster
                                .owned_before_change(Kind::Topic, topic.as_bytes())
                                .then(|| self.topics.reached(&topic))
                                .flatten(),
                        )
                    }),
            };
            let since = match from {
                StartAt::TimeMs(t) => Some(t),
                StartAt::Live | StartAt::Position(_) => None,
            };
            let at = Arc::new(parking_lot::Mutex::new(from.position()));
            let retiring = Arc::new(AtomicBool::new(false));
            let (live_tx, live) = tokio::sync::watch::channel(false);
            tracing::debug!(%topic, owner = %owner.id, ?from, "upstream subscription");
            let task = tokio::spawn(run(
                Arc::downgrade(self),
                topic.clone(),
                owner.clone(),
                Start {
                    at: Arc::clone(&at),
                    since,
                },
                Arc::clone(&retiring),
                live_tx,
            ));
            tasks.insert(
                topic,
                Upstream {
                    owner: owner.id,
                    task,
                    at,
                    live,
                    retiring,
                },
            );
        }
        self.metrics
            .cluster_upstreams
            .set(i64::try_from(tasks.len()).unwrap_or(i64::MAX));
    }

    /// Waits, at most `limit`, until the upstream of `topic` (if there is one) is subscribed at
    /// the owner; returns whether it is (`true` too when `topic` has no upstream here). A live
    /// subscription at a broker that relays its topic waits for this before its `SubscribeOk`:
    /// an upstream that subscribes at the owner only after the client saw `SubscribeOk` starts
    /// at the owner's live events of that moment, and a publish the client made in between
    /// would never reach it.
    pub async fn wait_live(&self, topic: &str, limit: Duration) -> bool {
        let live = self.tasks.lock().get(topic).map(|up| up.live.clone());
        let Some(mut live) = live else {
            return true;
        };
        matches!(
            tokio::time::timeout(limit, live.wait_for(|open| *open)).await,
            Ok(Ok(_))
        )
    }

    /// Stops every upstream, for good (the drain).
    pub fn stop_all(&self) {
        let mut tasks = self.tasks.lock();
        self.stopped.store(true, Ordering::SeqCst);
        for (_, up) in tasks.drain() {
            up.task.abort();
        }
    }
}

impl Upstream {
    /// Marks the upstream retiring (it goes on only while the former owner still places the
    /// topic on itself, see [`RETIRE_LIMIT`]) and stops its task after that limit in any case.
    fn retire(&self) {
        self.retiring.store(true, Ordering::SeqCst);
        tracing::debug!(owner = %self.owner, "upstream retiring");
        let task = self.task.abort_handle();
        tokio::spawn(async move {
            tokio::time::sleep(RETIRE_LIMIT).await;
            task.abort();
        });
    }
}

/// Where an upstream subscribes at the owner: from `at` once it has relayed something (or was
/// started from a position), else from `since` (a local subscriber's start time), else live.
struct Start {
    at: At,
    since: Option<u64>,
}

impl Start {
    fn now(&self) -> StartAt {
        match *self.at.lock() {
            Some(p) => StartAt::Position(p),
            None => self.since.map_or(StartAt::Live, StartAt::TimeMs),
        }
    }
}

/// Holds the subscription at `owner` and relays into the local topic until aborted, keeping
/// `start.at` current; every new subscription resumes from it (or from the start time while
/// nothing was relayed). Once `retiring` is set it goes on only while the former owner still
/// places the topic on itself (see [`RETIRE_LIMIT`]). `live` is `true` while a subscription at
/// the owner is open.
async fn run(
    upstreams: Weak<Upstreams>,
    topic: String,
    owner: Member,
    mut start: Start,
    retiring: Arc<AtomicBool>,
    live: tokio::sync::watch::Sender<bool>,
) {
    let at = Arc::clone(&start.at);
    loop {
        let Some(strong) = upstreams.upgrade() else {
            return;
        };
        let client = match strong.peers.client(&owner).await {
            Ok(c) => c,
            Err(e) if retiring.load(Ordering::SeqCst) => {
                tracing::debug!(%topic, owner = %owner.id, error = %e, "retired upstream ended: the former owner is unreachable");
                return;
            }
            Err(e) => {
                tracing::debug!(%topic, error = %e, "upstream owner unavailable");
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        if retiring.load(Ordering::SeqCst) && !still_owns(&client, &owner, &topic).await {
            tracing::debug!(%topic, owner = %owner.id, "retired upstream ended: the former owner has learned of the change");
            return;
        }
        let from = start.now();
        let mut sub = match client.subscribe_at(&topic, from).await {
            Ok(s) => s,
            Err(e) if e.is_unsupported() && start.since.is_some() => {
                // An owner of an older version cannot start at a time: relay live rather than
                // nothing (the local subscriber gets what the local retained tail held).
                tracing::warn!(%topic, owner = %owner.id, error = %e, "upstream: the owner cannot subscribe from a time; relaying live events");
                start.since = None;
                continue;
            }
            Err(e) => {
                if e.is_link_failure() {
                    strong.peers.failed(&owner, &e).await;
                }
                tracing::debug!(%topic, error = %e, "upstream subscribe refused");
                if retiring.load(Ordering::SeqCst) {
                    return;
                }
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        live.send_replace(true);
        strong
            .metrics
            .cluster_forwarded
            .with_label_values(&["subscribe"])
            .inc();
        let topics = Arc::clone(&strong.topics);
        drop(strong);
        let mut next = sub.next_event().await;
        while let Some(Ok(first)) = next {
            let Run {
                origin,
                payloads,
                headers,
                end,
                lookahead,
                ..
            } = gather(first, &mut sub);
            topics
                .publish(
                    &topic,
                    TopicMsg {
                        payloads,
                        headers,
                        ack: None,
                        origin: Some(origin),
                        hold: None,
                    },
                )
                .await;
            *at.lock() = Some(end);
            next = match lookahead {
                Some(item) => item,
                None => sub.next_event().await,
            };
        }
        live.send_replace(false);
        tracing::debug!(%topic, "upstream subscription ended; resubscribing");
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// A run of consecutive events of one stream, as relayed from the owner.
pub(super) struct Run {
    /// The topic of the events (one topic per run, also on a wildcard subscription).
    pub topic: std::sync::Arc<str>,
    /// The owner's position of the first payload.
    pub origin: Position,
    /// The events, in order.
    pub payloads: Vec<Bytes>,
    /// The headers of the events that have any, by index into `payloads`.
    pub headers: Vec<IndexedHeaders>,
    /// One past the last.
    pub end: Position,
    /// What the subscription gave after the run, if it was already waiting.
    pub lookahead: Option<Option<Result<Event, ClientError>>>,
}

/// The run starting with `first`: it and the consecutive events of its topic and stream
/// already waiting on `sub` (at most [`MAX_GATHER`]).
pub(super) fn gather(first: Event, sub: &mut Subscription) -> Run {
    let origin = first.position;
    let topic = first.topic;
    let mut headers = Vec::new();
    if !first.headers.is_empty() {
        headers.push(IndexedHeaders {
            index: 0,
            headers: first.headers,
        });
    }
    let mut payloads = vec![first.payload];
    let mut lookahead = None;
    while payloads.len() < MAX_GATHER {
        match sub.next_event().now_or_never() {
            Some(Some(Ok(e)))
                if e.topic == topic
                    && e.position.stream == origin.stream
                    && e.position.seq == origin.seq.wrapping_add(payloads.len() as u64) =>
            {
                if !e.headers.is_empty() {
                    headers.push(IndexedHeaders {
                        index: u32::try_from(payloads.len()).unwrap_or(u32::MAX),
                        headers: e.headers,
                    });
                }
                payloads.push(e.payload)
            }
            Some(other) => {
                lookahead = Some(other);
                break;
            }
            None => break,
        }
    }
    let end = Position {
        stream: origin.stream,
        seq: origin.seq.wrapping_add(payloads.len() as u64),
    };
    Run {
        topic,
        origin,
        payloads,
        headers,
        end,
        lookahead,
    }
}

/// Whether `owner` still places `topic` on itself, by the member list it reports (a retiring
/// upstream's question: has the former owner learned of the change yet?).
async fn still_owns(client: &super::peer_client::PeerClient, owner: &Member, topic: &str) -> bool {
    match client.cluster_info().await {
        Ok(info) => {
            starling_placement::owner(
                info.members.iter().map(|m| m.id.as_str()),
                Kind::Topic,
                topic.as_bytes(),
            ) == Some(owner.id.as_str())
        }
        Err(_) => false,
    }
}
