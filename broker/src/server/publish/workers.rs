//! The publish workers of one connection: `pub_workers_per_conn` tasks, each with a queue of
//! `pub_queue_depth / workers` requests, a request going to the worker its topic hashes to so
//! one connection's messages to one topic stay in order. A worker hands each request over: to
//! the local topic, or to the cluster side's [`Forwarder`](crate::cluster::forward::Forwarder)
//! for a topic another member owns (also for one accepted here whose owner changed since).

use std::sync::Arc;

use bytes::Bytes;
use starling_proto::IndexedHeaders;
use tokio::sync::mpsc;
use tracing::Instrument;

use super::Handles;
use super::budget::InFlight;
use crate::auth::Access;
use crate::cluster::{Member, Role};
use crate::pubsub::ack::{AckToken, PENDING_ACK_BYTES};
use crate::pubsub::pending_acks::ConnShare;
use crate::pubsub::topic::{Hold, TopicMsg};

/// The connection's workers have stopped (the broker is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the connection's publish workers have stopped")]
pub struct WorkersGone;

/// What a worker does with a request.
pub enum Job {
    /// Publish into the local topic; routed here in the view of this membership epoch.
    Local(TopicMsg, u64),
    /// Forward to the topic's owner.
    Forward {
        /// The topic's owner.
        owner: Member,
        /// The messages.
        payloads: Vec<Bytes>,
        /// Their headers, by index into `payloads`.
        headers: Vec<IndexedHeaders>,
        /// Completed when the owner acks.
        ack: Option<AckToken>,
    },
}

struct Work {
    topic: String,
    job: Job,
    /// Held until the job reached its topic or owner.
    in_flight: InFlight,
}

/// The publish workers of one connection. Cheap to clone; workers start on first use.
#[derive(Clone)]
pub struct Publisher {
    inner: Arc<tokio::sync::OnceCell<Vec<mpsc::Sender<Work>>>>,
    h: Arc<Handles>,
    hasher: ahash::RandomState,
    granted: u64,
    role: Role,
    access: Access,
    conn_id: u64,
    /// The connection's share of the pending-ack budget (none for a member's connection,
    /// held to the whole budget only).
    pending_share: Option<ConnShare>,
}

impl Publisher {
    /// The pipeline of connection `conn_id` that was granted the `granted` feature bits,
    /// whose publishes are checked against `access`.
    pub fn new(h: Arc<Handles>, conn_id: u64, granted: u64, role: Role, access: Access) -> Self {
        let pending_share = (role != Role::Peer).then(|| {
            ConnShare::new(
                h.cfg.max_pending_persisted_ack_bytes_per_connection,
                PENDING_ACK_BYTES,
            )
        });
        Publisher {
            inner: Arc::new(tokio::sync::OnceCell::new()),
            pending_share,
            h,
            hasher: ahash::RandomState::with_seeds(7, 11, 13, 17),
            granted,
            role,
            access,
            conn_id,
        }
    }

    /// What the connection's publishes are checked against.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// The connection's id.
    pub fn conn_id(&self) -> u64 {
        self.conn_id
    }

    /// The feature bits granted to the connection.
    pub fn granted(&self) -> u64 {
        self.granted
    }

    /// The connection's share of the pending-ack budget (`None`: a member's connection).
    pub fn pending_share(&self) -> Option<&ConnShare> {
        self.pending_share.as_ref()
    }

    /// What the connection said it is.
    pub fn role(&self) -> Role {
        self.role
    }

    async fn workers(&self) -> &Vec<mpsc::Sender<Work>> {
        self.inner
            .get_or_init(|| async {
                let n = self.h.cfg.pub_workers_per_conn.max(1) as usize;
                let depth = (self.h.cfg.pub_queue_depth as usize / n).max(1);
                (0..n)
                    .map(|_| {
                        let (tx, rx) = mpsc::channel::<Work>(depth);
                        tokio::spawn(
                            work(Arc::clone(&self.h), rx)
                                // The span of the stream that started them, under the
                                // connection's.
                                .instrument(tracing::Span::current()),
                        );
                        tx
                    })
                    .collect()
            })
            .await
    }

    /// Queues one request for its topic's worker, waiting while that worker's queue is full.
    pub async fn submit(
        &self,
        topic: String,
        job: Job,
        in_flight: InFlight,
    ) -> Result<(), WorkersGone> {
        let workers = self.workers().await;
        let i = (self.hasher.hash_one(topic.as_str()) as usize) % workers.len().max(1);
        match workers.get(i) {
            Some(tx) => tx
                .send(Work {
                    topic,
                    job,
                    in_flight,
                })
                .await
                .map_err(|_| WorkersGone),
            None => Err(WorkersGone),
        }
    }
}

/// One worker: hands each queued request over, in order.
async fn work(h: Arc<Handles>, mut rx: mpsc::Receiver<Work>) {
    while let Some(mut w) = rx.recv().await {
        match w.job {
            Job::Local(mut msg, epoch) => {
                msg.hold = w.in_flight.take_budget().map(Hold::new);
                // A replicated topic's publish stays with the replica it was routed to: one
                // that is not the leader refuses it as retryable, never acks it.
                if h.topics.is_replicated(&w.topic) {
                    h.topics.publish(&w.topic, msg).await;
                } else if let Some(msg) = h.forward.relocate_if_moved(&w.topic, msg, epoch).await {
                    h.topics.publish(&w.topic, msg).await;
                }
            }
            Job::Forward {
                owner,
                payloads,
                headers,
                ack,
            } => {
                h.forward
                    .publish(&w.topic, owner, payloads, headers, ack)
                    .await
            }
        }
        drop(w.in_flight);
    }
}
