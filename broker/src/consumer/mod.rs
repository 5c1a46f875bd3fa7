//! Durable consumers (docs/consumers.md): named consumers of durable topics with an ack floor
//! and a pending set, persisted beside the topic's log, whose members share the messages
//! (a work queue, at least once). The state machine is `starling-pubsub`'s
//! [`consumer`](starling_pubsub::consumer); this module is the broker side:
//!
//! - [`Consumers`] (here): the registry, one task per consumer, within
//!   `max_consumers_per_topic`; the typed refusals ([`JoinError`]).
//! - [`task`]: one consumer's task: reads the topic's log from its cursor, delivers to its
//!   members, takes their acks, publishes to the dead-letter topic, persists its state.
//! - [`store`]: the state file, written atomically, decoded as untrusted bytes.
//! - [`budget`]: the broker-wide byte budget of the pending messages the tasks hold.
//!
//! Scope: durable topics with one copy (not replicated), served at the topic's owner. A
//! replicated topic, or one another member owns, is refused (`InvalidRequest`) by the stream
//! handler (`server/consume.rs`).

pub mod budget;
pub mod store;
pub mod task;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use starling_proto::ConsumerStart;
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use crate::pubsub::topic::Topics;
pub use budget::PendingBudget;
pub use store::Settings;
pub use task::{Command, MemberMsg};

/// Why a member could not join its consumer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JoinError {
    /// `max_consumers_per_topic` consumers exist on the topic.
    #[error(
        "durable topic `{topic}` has {max} consumers, the most this broker allows (max_consumers_per_topic)"
    )]
    TooManyConsumers {
        /// The topic.
        topic: String,
        /// The limit.
        max: usize,
    },
    /// `max_consumer_members` members are open.
    #[error(
        "consumer `{consumer}` has {max} members, the most this broker allows (max_consumer_members)"
    )]
    TooManyMembers {
        /// The consumer.
        consumer: String,
        /// The limit.
        max: usize,
    },
    /// The consumer exists with other settings.
    #[error(
        "consumer `{consumer}` exists with other settings ({existing}); join it with those, or use another name"
    )]
    Mismatch {
        /// The consumer.
        consumer: String,
        /// Its settings, for the message.
        existing: String,
    },
    /// Its state could not be loaded (a damaged state file, a log that cannot be opened).
    #[error("consumer `{consumer}` cannot be loaded: {why}")]
    Unavailable {
        /// The consumer.
        consumer: String,
        /// Why.
        why: String,
    },
}

/// What a member asks for when it joins.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    /// The durable topic.
    pub topic: String,
    /// The consumer's name.
    pub consumer: String,
    /// Its settings (they must match an existing consumer's).
    pub settings: Settings,
    /// Where a new consumer starts.
    pub start: ConsumerStart,
}

/// A joined member: its id and the channels to and from its consumer's task. Dropping it
/// leaves the consumer (what it held is redelivered at once).
pub struct Member {
    /// The member's id.
    pub id: u64,
    /// Deliveries and the end, from the task.
    pub rx: mpsc::UnboundedReceiver<MemberMsg>,
    /// Acks to the task.
    pub tx: mpsc::UnboundedSender<Command>,
}

impl Drop for Member {
    fn drop(&mut self) {
        let _ = self.tx.send(Command::Leave(self.id));
    }
}

/// The consumers loaded on this broker, by topic and name.
pub struct Consumers {
    topics: Arc<Topics>,
    metrics: Arc<Metrics>,
    max_per_topic: usize,
    max_members: usize,
    budget: Arc<PendingBudget>,
    tasks: Mutex<HashMap<String, HashMap<String, mpsc::UnboundedSender<Command>>>>,
    next_member: AtomicU64,
}

impl Consumers {
    /// An empty registry.
    pub fn new(
        topics: Arc<Topics>,
        metrics: Arc<Metrics>,
        max_per_topic: usize,
        max_members: usize,
        budget: Arc<PendingBudget>,
    ) -> Arc<Consumers> {
        Arc::new(Consumers {
            topics,
            metrics,
            max_per_topic,
            max_members,
            budget,
            tasks: Mutex::new(HashMap::new()),
            next_member: AtomicU64::new(1),
        })
    }

    /// Joins `req.consumer` of `req.topic` as a new member, loading (or creating) the consumer
    /// first.
    pub async fn join(self: &Arc<Self>, req: JoinRequest) -> Result<Member, JoinError> {
        let tx = {
            let mut tasks = self.tasks.lock();
            let n = tasks.get(&req.topic).map_or(0, HashMap::len);
            let of_topic = tasks.entry(req.topic.clone()).or_default();
            match of_topic.get(&req.consumer) {
                Some(tx) if !tx.is_closed() => tx.clone(),
                _ => {
                    if n >= self.max_per_topic && !of_topic.contains_key(&req.consumer) {
                        return Err(JoinError::TooManyConsumers {
                            topic: req.topic,
                            max: self.max_per_topic,
                        });
                    }
                    let tx = task::start(
                        &req,
                        Arc::clone(&self.topics),
                        Arc::clone(&self.metrics),
                        self.max_members,
                        Arc::clone(&self.budget),
                    );
                    of_topic.insert(req.consumer.clone(), tx.clone());
                    tx
                }
            }
        };
        let id = self.next_member.fetch_add(1, Ordering::Relaxed);
        let (member_tx, rx) = mpsc::unbounded_channel();
        let (reply, answer) = oneshot::channel();
        let join = Command::Join {
            member: id,
            settings: req.settings.clone(),
            tx: member_tx,
            reply,
        };
        let unavailable = |why: &str| JoinError::Unavailable {
            consumer: req.consumer.clone(),
            why: why.into(),
        };
        tx.send(join).map_err(|_| unavailable("its task ended"))?;
        answer.await.map_err(|_| unavailable("its task ended"))??;
        Ok(Member { id, rx, tx })
    }

    /// Consumers loaded here.
    pub fn len(&self) -> usize {
        self.tasks.lock().values().map(HashMap::len).sum()
    }

    /// Whether none is loaded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
