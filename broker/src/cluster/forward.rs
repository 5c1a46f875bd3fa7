//! Requests handed to another member: publishes forwarded to their topic's owner, publishes
//! relocated to a new owner after a membership change, cache requests forwarded to their key's
//! owner, and cache values pulled from the member that held a key before.
//!
//! The ingress handlers (`server/`) decide *that* a request belongs elsewhere; [`Forwarder`]
//! does the handing over, over the peer links, and counts it in the `starling_cluster_*`
//! metrics. It never answers a client itself: it returns what happened, and the handler turns
//! that into a frame.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use starling_client::ClientError;
use starling_placement::Kind;
use starling_proto::{ErrorCode, IndexedHeaders};

use super::peers::{Peers, Unavailable};
use super::{Cluster, Member, Route};
use crate::metrics::Metrics;
use crate::pubsub::ack::AckToken;
use crate::pubsub::topic::TopicMsg;

/// Why a request could not be handed to another member.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// No link to the member.
    #[error("{0}")]
    Unavailable(#[from] Unavailable),
    /// The member's link failed or the member refused the request.
    #[error("{0}")]
    Client(#[from] ClientError),
}

/// A cache request for another member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheOp {
    /// Store `value` under `key`, for `ttl` when given.
    Put {
        /// The key.
        key: Bytes,
        /// The value.
        value: Bytes,
        /// Time to live.
        ttl: Option<Duration>,
    },
    /// Read `key`.
    Get {
        /// The key.
        key: Bytes,
    },
    /// Delete `key`.
    Delete {
        /// The key.
        key: Bytes,
    },
}

/// What the key's owner answered to a forwarded [`CacheOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheAnswer {
    /// A put or delete: whether the key existed before.
    Existed(bool),
    /// A get: the value, if any.
    Value(Option<Bytes>),
}

/// Why a forwarded cache request has no [`CacheAnswer`].
#[derive(Debug, thiserror::Error)]
pub enum CacheRefusal {
    /// The owner answered with a typed error, passed on as it is.
    #[error("{message}")]
    Owner {
        /// The owner's error code.
        code: ErrorCode,
        /// The owner's message.
        message: String,
    },
    /// The owner could not be asked (counted in `starling_cluster_forward_failures_total`).
    #[error("{0}")]
    Unavailable(Unavailable),
}

/// Hands requests to other members. Cheap to clone.
#[derive(Clone)]
pub struct Forwarder {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    metrics: Arc<Metrics>,
}

impl Forwarder {
    /// A forwarder over `peers`, routing with `cluster`'s view.
    pub fn new(cluster: Arc<Cluster>, peers: Arc<Peers>, metrics: Arc<Metrics>) -> Forwarder {
        Forwarder {
            cluster,
            peers,
            metrics,
        }
    }

    /// A request this broker accepted as the topic's owner, in the view of membership `epoch`,
    /// on its way to the local topic. Unless the membership changed since and another member
    /// owns the topic now, it is given back (`Some`) to be published here. Otherwise it goes
    /// to that owner, where the topic's subscribers are headed (a former owner ends its peers'
    /// subscriptions shortly after it learns of a change, so what it numbered later would reach
    /// nobody): a `committed` or `persisted` ack completes when the new owner acks, and a message already
    /// acked on receipt is given back to be published here after all if the new owner does not
    /// take it.
    pub async fn relocate_if_moved(
        &self,
        topic: &str,
        msg: TopicMsg,
        epoch: u64,
    ) -> Option<TopicMsg> {
        if self.cluster.is_clustered()
            && self.cluster.epoch() != epoch
            && let Route::Peer(owner) = self.cluster.route(Kind::Topic, topic.as_bytes())
        {
            if msg.ack.is_some() {
                self.publish(topic, owner, msg.payloads, msg.headers, msg.ack)
                    .await;
                return None;
            }
            match self
                .relocate(topic, &owner, msg.payloads.clone(), msg.headers.clone())
                .await
            {
                Ok(()) => return None,
                Err(why) => {
                    tracing::debug!(%topic, owner = %owner.id, %why, "publish kept here: the new owner did not take it");
                }
            }
        }
        Some(msg)
    }

    /// Hands already-acked messages to the topic's new owner and waits for its ack.
    async fn relocate(
        &self,
        topic: &str,
        owner: &Member,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
    ) -> Result<(), ForwardError> {
        let client = self.peers.client(owner).await?;
        let acked = client
            .publish_batch_pipelined(topic, payloads, headers)
            .await?;
        acked.await?;
        self.metrics
            .cluster_forwarded
            .with_label_values(&["publish"])
            .inc();
        Ok(())
    }

    /// Forwards one publish request to the topic's owner; an acked one is acked when the owner
    /// acks it, refused with the owner's `NoResponders` for a request nobody subscribes to,
    /// and refused with `Unavailable` when it cannot be acked otherwise.
    pub async fn publish(
        &self,
        topic: &str,
        owner: Member,
        payloads: Vec<Bytes>,
        headers: Vec<IndexedHeaders>,
        ack: Option<AckToken>,
    ) {
        let fail = |ack: Option<AckToken>, why: String| {
            self.metrics
                .cluster_forward_failures
                .with_label_values(&["publish"])
                .inc();
            match ack {
                Some(token) => token.refuse(ErrorCode::Unavailable, why),
                None => tracing::debug!(%topic, %why, "forwarded publish dropped"),
            }
        };
        let client = match self.peers.client(&owner).await {
            Ok(c) => c,
            Err(e) => return fail(ack, e.to_string()),
        };
        self.metrics
            .cluster_forwarded
            .with_label_values(&["publish"])
            .inc();
        match ack {
            None => {
                if let Err(e) = client
                    .publish_batch_with_headers(topic, payloads, headers, false)
                    .await
                {
                    let why = self.peers.failed(&owner, &e).await.to_string();
                    fail(None, why);
                }
            }
            Some(token) => match client
                .publish_batch_pipelined(topic, payloads, headers)
                .await
            {
                Ok(acked) => {
                    let this = self.clone();
                    tokio::spawn(async move {
                        match acked.await {
                            Ok(()) => token.ack(),
                            // The owner's answer to a request nobody subscribes to, passed on
                            // as the owner gave it.
                            Err(ClientError::Server {
                                code: ErrorCode::NoResponders,
                                message,
                            }) => token.refuse(ErrorCode::NoResponders, message),
                            Err(e) => {
                                if e.is_link_failure() {
                                    this.peers.failed(&owner, &e).await;
                                }
                                this.metrics
                                    .cluster_forward_failures
                                    .with_label_values(&["publish"])
                                    .inc();
                                let why = format!("not acked by the owner {}: {e}", owner.id);
                                token.refuse(ErrorCode::Unavailable, why);
                            }
                        }
                    });
                }
                Err(e) => {
                    let why = self.peers.failed(&owner, &e).await.to_string();
                    fail(Some(token), why);
                }
            },
        }
    }

    /// Forwards a plain client's cache request to the key's owner.
    pub async fn cache(&self, owner: &Member, op: CacheOp) -> Result<CacheAnswer, CacheRefusal> {
        let client = match self.peers.client(owner).await {
            Ok(c) => c,
            Err(e) => return Err(self.cache_unavailable(e)),
        };
        self.metrics
            .cluster_forwarded
            .with_label_values(&["cache"])
            .inc();
        let result = match op {
            CacheOp::Put { key, value, ttl } => client
                .cache_put(key, value, ttl)
                .await
                .map(CacheAnswer::Existed),
            CacheOp::Get { key } => client.cache_get(key).await.map(CacheAnswer::Value),
            CacheOp::Delete { key } => client.cache_delete(key).await.map(CacheAnswer::Existed),
        };
        match result {
            Ok(answer) => Ok(answer),
            Err(ClientError::Server { code, message }) => {
                Err(CacheRefusal::Owner { code, message })
            }
            Err(e) => {
                let unavailable = self.peers.failed(owner, &e).await;
                Err(self.cache_unavailable(unavailable))
            }
        }
    }

    /// A miss at the owner during the hand-off window: asks the member that held `key` before
    /// (see `handoff`). A value found there is counted as pulled; a holder that cannot be asked
    /// is counted as a failed forward.
    pub async fn pull(&self, holder: &Member, key: Bytes) -> Result<Option<Bytes>, ForwardError> {
        let asked = match self.peers.client(holder).await {
            Ok(client) => client.cache_get(key).await.map_err(ForwardError::from),
            Err(e) => Err(ForwardError::from(e)),
        };
        match &asked {
            Ok(Some(_)) => self
                .metrics
                .cluster_handoff_keys
                .with_label_values(&["pulled"])
                .inc(),
            Ok(None) => {}
            Err(_) => self
                .metrics
                .cluster_forward_failures
                .with_label_values(&["cache"])
                .inc(),
        }
        asked
    }

    fn cache_unavailable(&self, why: Unavailable) -> CacheRefusal {
        self.metrics
            .cluster_forward_failures
            .with_label_values(&["cache"])
            .inc();
        CacheRefusal::Unavailable(why)
    }
}
