//! Raft RPCs of replicated topics over the peer links ([`ReplicaLinks`]): the broker's
//! implementation of `starling_replica::Transport`.
//!
//! A call goes to the member whose replica id ([`replica_id`]) is the target, over this
//! broker's link to it ([`Peers`]: a connection authenticated with this broker's peer
//! certificate, granted the `PEER` role; never a connection of its own), on a stream of its
//! own: one `ReplicaRpc` frame carrying the request's codec frame out, one carrying the reply
//! back (`server::replica_rpc` answers it). The whole call, connecting included, has
//! `replica_rpc_timeout_ms`. A codec frame is bounded by what fits one `ReplicaRpc` frame of
//! `max_frame_bytes` with the longest topic ([`ReplicaRpc::max_rpc_bytes`]); the replicas
//! are opened with that bound ([`ReplicaLinks::max_rpc_bytes`]), so they never produce a
//! larger one.
//!
//! Failures are typed ([`ReplicaLinkError`]) and reach the topic's Raft as the replica
//! crate's `TransportError`: an unknown or unreachable member as `Unreachable` (the library
//! backs off before trying it again), no reply in time as `Timeout`, an `Error` answer as
//! `Refused`. A broken link is dropped like any other peer request's; a timeout is not (the
//! link also carries forwarded publishes and relayed subscriptions, and one slow replica
//! must not cut them). Every outcome is counted in `starling_replica_rpc_calls_total`.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use sha2::Digest;
use starling_client::ClientError;
use starling_config::BrokerConfig;
use starling_proto::{ErrorCode, ReplicaRpc};
use starling_replica::codec::CodecError;
use starling_replica::network::CallFuture;
use starling_replica::{NodeId, Transport, TransportError};

use starling_placement::Kind;

use super::peers::{Peers, Unavailable};
use super::{Cluster, Member};
use crate::durable::replicated::ReplicaNet;
use crate::metrics::{Metrics, replica_rpc};

/// A member's replica id: the first 8 bytes (big-endian) of the SHA-256 of its member id.
/// The member id is the pod's name, stable across restarts and across a lost volume, so a
/// replica keeps its id in every topic's membership; every broker computes the same id.
pub fn replica_id(member_id: &str) -> NodeId {
    let digest = sha2::Sha256::digest(member_id.as_bytes());
    let mut b = [0u8; 8];
    b.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(b)
}

/// Why one Raft RPC did not make the round trip.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaLinkError {
    /// No member in the current (or, during the hand-off window, previous) list has the id.
    #[error("no member has replica id {0}")]
    UnknownReplica(NodeId),
    /// The member cannot be reached now.
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    /// The link broke during the call.
    #[error("link to {member} failed: {reason}")]
    Link {
        /// The member.
        member: String,
        /// What failed.
        reason: String,
    },
    /// No reply within `replica_rpc_timeout_ms`.
    #[error("no reply within {0:?}")]
    Timeout(Duration),
    /// The member answered with an `Error` frame.
    #[error("refused by {member} ({code:?}): {message}")]
    Refused {
        /// The member.
        member: String,
        /// The error code.
        code: ErrorCode,
        /// Its message.
        message: String,
    },
    /// The request frame is over the bound.
    #[error("RPC frame of {len} bytes exceeds the limit of {max}")]
    TooLarge {
        /// Its length.
        len: usize,
        /// The bound.
        max: usize,
    },
}

impl ReplicaLinkError {
    /// The replica crate's view of the failure of a call to `to`.
    pub fn into_transport(self, to: NodeId) -> TransportError {
        match self {
            ReplicaLinkError::UnknownReplica(_)
            | ReplicaLinkError::Unavailable(_)
            | ReplicaLinkError::Link { .. } => TransportError::Unreachable(to),
            ReplicaLinkError::Timeout(_) => TransportError::Timeout(to),
            ReplicaLinkError::Refused { .. } => TransportError::Refused {
                peer: to,
                reason: self.to_string(),
            },
            ReplicaLinkError::TooLarge { len, max } => {
                TransportError::Codec(CodecError::TooLarge { len, max })
            }
        }
    }

    /// The `outcome` label it is counted under.
    fn outcome(&self) -> &'static str {
        match self {
            ReplicaLinkError::UnknownReplica(_)
            | ReplicaLinkError::Unavailable(_)
            | ReplicaLinkError::Link { .. } => replica_rpc::UNREACHABLE,
            ReplicaLinkError::Timeout(_) => replica_rpc::TIMEOUT,
            ReplicaLinkError::Refused { .. } | ReplicaLinkError::TooLarge { .. } => {
                replica_rpc::REFUSED
            }
        }
    }
}

/// Raft RPCs to the other members, for every replicated topic of this broker.
pub struct ReplicaLinks {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    metrics: Arc<Metrics>,
    timeout: Duration,
    max_rpc_bytes: usize,
}

impl ReplicaLinks {
    /// Calls over `peers` to `cluster`'s members, bounded by `cfg`.
    pub fn new(
        cfg: &BrokerConfig,
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        metrics: Arc<Metrics>,
    ) -> Arc<ReplicaLinks> {
        Arc::new(ReplicaLinks {
            cluster,
            peers,
            metrics,
            timeout: Duration::from_millis(cfg.replica_rpc_timeout_ms),
            max_rpc_bytes: ReplicaRpc::max_rpc_bytes(cfg.max_frame_bytes),
        })
    }

    /// This broker's replica id.
    pub fn self_id(&self) -> NodeId {
        replica_id(self.cluster.self_id())
    }

    /// The largest codec frame a call carries: the replicas' `max_frame_bytes`.
    pub fn max_rpc_bytes(&self) -> usize {
        self.max_rpc_bytes
    }

    /// The member with replica id `id`: in the current list, else in the previous one while
    /// the hand-off window is open.
    pub fn member(&self, id: NodeId) -> Option<Member> {
        let view = self.cluster.view();
        view.current
            .members()
            .iter()
            .find(|m| replica_id(&m.id) == id)
            .cloned()
            .or_else(|| {
                self.cluster
                    .previous_members()
                    .into_iter()
                    .find(|m| replica_id(&m.id) == id)
            })
    }

    /// The transport of one replicated topic's replica on this broker.
    pub fn transport(self: &Arc<Self>, topic: &str) -> Arc<dyn Transport> {
        Arc::new(TopicLink {
            links: Arc::clone(self),
            topic: topic.to_string(),
        })
    }

    /// Sends `frame` (one codec frame) for `topic` to replica `to` and returns the reply's
    /// codec frame.
    pub async fn call(
        &self,
        topic: &str,
        to: NodeId,
        frame: Vec<u8>,
    ) -> Result<Vec<u8>, ReplicaLinkError> {
        // Counted when the call ends however it ends: openraft drops a call past its own
        // deadline, which this future never sees; that is counted `abandoned`.
        let mut outcome = Outcome {
            metrics: &self.metrics,
            outcome: replica_rpc::ABANDONED,
        };
        let result =
            match tokio::time::timeout(self.timeout, self.round_trip(topic, to, frame)).await {
                Ok(r) => r,
                Err(_) => Err(ReplicaLinkError::Timeout(self.timeout)),
            };
        outcome.outcome = match &result {
            Ok(_) => replica_rpc::OK,
            Err(e) => e.outcome(),
        };
        result
    }

    async fn round_trip(
        &self,
        topic: &str,
        to: NodeId,
        frame: Vec<u8>,
    ) -> Result<Vec<u8>, ReplicaLinkError> {
        if frame.len() > self.max_rpc_bytes {
            return Err(ReplicaLinkError::TooLarge {
                len: frame.len(),
                max: self.max_rpc_bytes,
            });
        }
        let member = self
            .member(to)
            .ok_or(ReplicaLinkError::UnknownReplica(to))?;
        let client = self.peers.client(&member).await?;
        match client
            .replica_rpc(topic, Bytes::from(frame), self.timeout)
            .await
        {
            Ok(reply) => Ok(reply.to_vec()),
            Err(ClientError::Timeout) => Err(ReplicaLinkError::Timeout(self.timeout)),
            Err(ClientError::Server { code, message }) => Err(ReplicaLinkError::Refused {
                member: member.id,
                code,
                message,
            }),
            Err(e) => {
                if e.is_link_failure() {
                    self.peers.failed(&member, &e).await;
                }
                Err(ReplicaLinkError::Link {
                    member: member.id,
                    reason: e.to_string(),
                })
            }
        }
    }
}

/// The cluster side of replicated topics (`durable::replicated::ReplicaNet`): replica ids,
/// replica sets from the current member list's placement order, and the peer links.
pub struct LinksNet(pub Arc<ReplicaLinks>);

impl ReplicaNet for LinksNet {
    fn self_id(&self) -> NodeId {
        self.0.self_id()
    }

    fn is_clustered(&self) -> bool {
        self.0.cluster.is_clustered()
    }

    fn replica_set(&self, topic: &str, n: usize) -> Option<Vec<NodeId>> {
        let view = self.0.cluster.view();
        let ids = view.current.members().iter().map(|m| m.id.as_str());
        let ranked = starling_placement::ranked(ids, Kind::Topic, topic.as_bytes());
        (ranked.len() >= n).then(|| ranked[..n].iter().map(|m| replica_id(m)).collect())
    }

    fn transport(&self, topic: &str) -> Arc<dyn Transport> {
        self.0.transport(topic)
    }
}

/// One topic's transport: every call names the topic.
struct TopicLink {
    links: Arc<ReplicaLinks>,
    topic: String,
}

impl Transport for TopicLink {
    fn call(&self, _from: NodeId, to: NodeId, frame: Vec<u8>) -> CallFuture<'_> {
        Box::pin(async move {
            self.links
                .call(&self.topic, to, frame)
                .await
                .map_err(|e| e.into_transport(to))
        })
    }
}

/// Counts one sent RPC in `starling_replica_rpc_calls_total` when dropped, under the outcome
/// set last ([`replica_rpc::ABANDONED`] unless the call got to set another).
struct Outcome<'a> {
    metrics: &'a Metrics,
    outcome: &'static str,
}

impl Drop for Outcome<'_> {
    fn drop(&mut self) {
        self.metrics
            .replica_rpc_calls
            .with_label_values(&[self.outcome])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_ids_are_stable_and_distinct() {
        // The id is part of every topic's stored membership: it must never change.
        assert_eq!(replica_id("starling-0"), replica_id("starling-0"));
        let ids: std::collections::HashSet<NodeId> = (0..1000)
            .map(|i| replica_id(&format!("starling-{i}")))
            .collect();
        assert_eq!(ids.len(), 1000);
    }

    #[test]
    fn failures_map_to_the_transport_errors_raft_expects() {
        let to = 7;
        assert!(matches!(
            ReplicaLinkError::UnknownReplica(to).into_transport(to),
            TransportError::Unreachable(7)
        ));
        assert!(matches!(
            ReplicaLinkError::Timeout(Duration::from_secs(1)).into_transport(to),
            TransportError::Timeout(7)
        ));
        let refused = ReplicaLinkError::Refused {
            member: "b".into(),
            code: ErrorCode::LimitExceeded,
            message: "busy".into(),
        };
        assert!(matches!(
            refused.into_transport(to),
            TransportError::Refused { peer: 7, .. }
        ));
        assert!(matches!(
            ReplicaLinkError::TooLarge { len: 2, max: 1 }.into_transport(to),
            TransportError::Codec(CodecError::TooLarge { len: 2, max: 1 })
        ));
    }
}
