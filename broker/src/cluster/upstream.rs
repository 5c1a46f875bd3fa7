//! Upstream subscriptions: a broker with subscribers of a topic it does not own holds ONE
//! subscription at the topic's owner and republishes what arrives into its local topic, whose
//! ordinary fan-out serves every local subscriber. N local subscribers never make N upstream
//! streams. [`Upstreams::reconcile`] makes the set of upstreams match the local subscribers and
//! the current owners; it runs when a subscription starts or ends and on membership changes.

use std::collections::HashMap;
use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::FutureExt;
use starling_placement::Kind;
use tokio::task::JoinHandle;

use super::peers::is_link_failure;
use super::{Member, Role, Route};
use crate::pubsub::topic::TopicMsg;
use crate::server::Ctx;

/// Pause before an upstream subscription is tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(200);
/// Events gathered into one local publish when several are already waiting.
const MAX_GATHER: usize = 256;

/// The upstream subscriptions of this broker, by topic.
#[derive(Default)]
pub struct Upstreams {
    tasks: parking_lot::Mutex<HashMap<String, Upstream>>,
}

struct Upstream {
    owner: String,
    task: JoinHandle<()>,
}

impl Upstreams {
    /// Starts an upstream for every topic with local plain-client subscribers that another
    /// member owns, and stops the ones no longer needed or pointing at a former owner.
    pub fn reconcile(&self, ctx: &Arc<Ctx>) {
        let topics: Vec<Arc<str>> = ctx
            .subscribers
            .lock()
            .values()
            // Routing clients and peers are sent to the owner instead (`Moved`).
            .filter(|r| r.role == Role::Plain)
            .map(|r| Arc::clone(&r.sub.topic))
            .collect();
        let mut desired: HashMap<String, Member> = HashMap::new();
        for topic in topics {
            if desired.contains_key(&*topic) {
                continue;
            }
            if let Route::Peer(owner) = ctx.cluster.route(Kind::Topic, topic.as_bytes()) {
                desired.insert(topic.to_string(), owner);
            }
        }
        let mut tasks = self.tasks.lock();
        tasks.retain(|topic, up| {
            let keep = desired.get(topic).is_some_and(|m| m.id == up.owner);
            if !keep {
                up.task.abort();
            }
            keep
        });
        for (topic, owner) in desired {
            if tasks.contains_key(&topic) {
                continue;
            }
            tracing::debug!(%topic, owner = %owner.id, "upstream subscription");
            let task = tokio::spawn(run(Arc::downgrade(ctx), topic.clone(), owner.clone()));
            tasks.insert(
                topic,
                Upstream {
                    owner: owner.id,
                    task,
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

/// Holds the subscription at `owner` and republishes locally until aborted.
async fn run(ctx: Weak<Ctx>, topic: String, owner: Member) {
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
        let mut sub = match client.subscribe(&topic).await {
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
        while let Some(Ok(event)) = sub.next_event().await {
            let mut payloads = vec![event.payload];
            while payloads.len() < MAX_GATHER {
                match sub.next_event().now_or_never() {
                    Some(Some(Ok(e))) => payloads.push(e.payload),
                    _ => break,
                }
            }
            topics
                .publish(
                    &topic,
                    TopicMsg {
                        payloads,
                        ack: None,
                    },
                )
                .await;
        }
        tracing::debug!(%topic, "upstream subscription ended; resubscribing");
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}
