//! Upstream subscriptions: a broker with subscribers of a topic it does not own holds ONE
//! subscription at the topic's owner and republishes what arrives into its local topic, whose
//! ordinary fan-out serves every local subscriber. N local subscribers never make N upstream
//! streams. [`Upstreams::reconcile`] makes the set of upstreams match the local subscribers and
//! the current owners; it runs when a subscription starts or ends and on membership changes.
//!
//! Relayed events keep the owner's stream positions, and each upstream remembers the position it
//! reached: a new subscription at the owner (after the owner restarted, or at a new owner)
//! resumes from there, so the owner's retained tail fills the gap. A local subscriber resuming
//! here with no upstream yet seeds the upstream's starting position.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use starling_placement::Kind;
use starling_proto::Position;
use tokio::task::JoinHandle;

use super::peers::is_link_failure;
use super::{Member, Role, Route};
use crate::pubsub::topic::TopicMsg;
use crate::server::Ctx;

/// Pause before an upstream subscription is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Events gathered into one local publish when several are already waiting.
const MAX_GATHER: usize = 256;
/// When a topic's owner changes, the upstream at the former owner lives on this long beside
/// the new one: brokers learn of a membership change up to a poll interval apart, and what the
/// former owner still accepts meanwhile must reach the local subscribers too.
const RE_AIM_OVERLAP: Duration = Duration::from_secs(3);

/// Where a topic's relay stands: one past the owner's last event relayed here.
type At = Arc<parking_lot::Mutex<Option<Position>>>;

/// The upstream subscriptions of this broker, by topic.
#[derive(Default)]
pub struct Upstreams {
    tasks: parking_lot::Mutex<HashMap<String, Upstream>>,
    /// Resume positions of subscribers that resumed here while no upstream existed for their
    /// topic; the upstream starts from them.
    seeds: parking_lot::Mutex<HashMap<String, Position>>,
}

struct Upstream {
    owner: String,
    task: JoinHandle<()>,
    at: At,
}

impl Upstreams {
    /// Notes that a local subscriber resumes `topic` from `from`: an upstream started for it
    /// asks the owner to replay from there (an existing one already relays, and the local
    /// topic's retained tail serves the resume).
    pub fn seed(&self, topic: &str, from: Position) {
        if !self.tasks.lock().contains_key(topic) {
            self.seeds.lock().insert(topic.to_string(), from);
        }
    }

    /// Starts an upstream for every topic with local plain-client subscribers that another
    /// member owns, and stops the ones no longer needed. One pointing at a former owner is
    /// replaced by one at the new owner that resumes where it stood, and is stopped after
    /// [`RE_AIM_OVERLAP`].
    pub fn reconcile(&self, ctx: &Arc<Ctx>) {
        // Held from reading the subscribers to the last change: two reconciles racing (the last
        // two subscribers of a topic leaving at once) must not let the one that read the older
        // subscriber set apply it last, which would leave an upstream nobody needs.
        let mut tasks = self.tasks.lock();
        let topics: Vec<Arc<str>> = ctx
            .subscribers
            .lock()
            .values()
            // Routing clients and peers are sent to the owner instead (`Moved`).
            .filter(|r| r.role == Role::Plain)
            .map(|r| Arc::clone(&r.sub.topic))
            .collect();
        let mut desired: HashMap<String, Member> = HashMap::new();
        let mut wanted: std::collections::HashSet<Arc<str>> = std::collections::HashSet::new();
        for topic in topics {
            if !wanted.insert(Arc::clone(&topic)) {
                continue;
            }
            if let Route::Peer(owner) = ctx.cluster.route(Kind::Topic, topic.as_bytes()) {
                desired.insert(topic.to_string(), owner);
            }
        }
        let mut seeds = self.seeds.lock();
        let mut carried: HashMap<String, At> = HashMap::new();
        tasks.retain(|topic, up| {
            match desired.get(topic) {
                Some(m) if m.id == up.owner => return true,
                Some(_) => {
                    // Re-aimed: overlap, and carry the position over.
                    carried.insert(topic.clone(), Arc::clone(&up.at));
                    stop_after_overlap(&up.task);
                }
                // This broker owns the topic now; the former owner may still accept
                // publishes until it learns of the change.
                None if wanted.contains(topic.as_str()) => stop_after_overlap(&up.task),
                None => up.task.abort(),
            }
            false
        });
        seeds.retain(|topic, _| desired.contains_key(topic));
        for (topic, owner) in desired {
            if tasks.contains_key(&topic) {
                continue;
            }
            // Where to start: where the upstream it replaces stood, else where a resuming local
            // subscriber stands, else, when this broker owned the topic until the change, where
            // its local subscribers stand: the new owner replays what it accepted since.
            let from = match carried.remove(&topic) {
                Some(old) => *old.lock(),
                None => seeds.remove(&topic).or_else(|| {
                    ctx.cluster
                        .owned_before_change(Kind::Topic, topic.as_bytes())
                        .then(|| ctx.topics.reached(&topic))
                        .flatten()
                }),
            };
            let at = Arc::new(parking_lot::Mutex::new(from));
            tracing::debug!(%topic, owner = %owner.id, from = ?*at.lock(), "upstream subscription");
            let task = tokio::spawn(run(
                Arc::downgrade(ctx),
                topic.clone(),
                owner.clone(),
                Arc::clone(&at),
            ));
            tasks.insert(
                topic,
                Upstream {
                    owner: owner.id,
                    task,
                    at,
                },
            );
        }
        ctx.metrics
            .cluster_upstreams
            .set(i64::try_from(tasks.len()).unwrap_or(i64::MAX));
    }

    /// Stops every upstream.
    pub fn stop_all(&self) {
        for (_, up) in self.tasks.lock().drain() {
            up.task.abort();
        }
    }
}

/// Stops an upstream once [`RE_AIM_OVERLAP`] has passed.
fn stop_after_overlap(task: &JoinHandle<()>) {
    let task = task.abort_handle();
    tokio::spawn(async move {
        tokio::time::sleep(RE_AIM_OVERLAP).await;
        task.abort();
    });
}

/// Holds the subscription at `owner` and relays into the local topic until aborted, keeping
/// `at` current; every new subscription resumes from `at`.
async fn run(ctx: Weak<Ctx>, topic: String, owner: Member, at: At) {
    loop {
        let Some(strong) = ctx.upgrade() else {
            return;
        };
        let client = match strong.peers.client(&owner).await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(%topic, error = %e, "upstream owner unavailable");
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        let from = *at.lock();
        let mut sub = match client.subscribe_from(&topic, from).await {
            Ok(s) => s,
            Err(e) => {
                if is_link_failure(&e) {
                    strong.peers.failed(&owner, &e).await;
                }
                tracing::debug!(%topic, error = %e, "upstream subscribe refused");
                drop(strong);
                tokio::time::sleep(RETRY_PAUSE).await;
                continue;
            }
        };
        strong
            .metrics
            .cluster_forwarded
            .with_label_values(&["subscribe"])
            .inc();
        let topics = Arc::clone(&strong.topics);
        drop(strong);
        let mut next = sub.next_event().await;
        while let Some(Ok(first)) = next {
            // Gather a run of consecutive events of one stream.
            let origin = first.position;
            let mut payloads = vec![first.payload];
            let mut lookahead = None;
            while payloads.len() < MAX_GATHER {
                match sub.next_event().now_or_never() {
                    Some(Some(Ok(e)))
                        if e.position.stream == origin.stream
                            && e.position.seq == origin.seq.wrapping_add(payloads.len() as u64) =>
                    {
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
            topics
                .publish(
                    &topic,
                    TopicMsg {
                        payloads,
                        ack: None,
                        origin: Some(origin),
                    },
                )
                .await;
            *at.lock() = Some(end);
            next = match lookahead {
                Some(item) => item,
                None => sub.next_event().await,
            };
        }
        tracing::debug!(%topic, "upstream subscription ended; resubscribing");
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
