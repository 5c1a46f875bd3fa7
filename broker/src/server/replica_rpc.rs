//! Raft RPC streams of replicated topics (peer connections only): the stream's first frame is
//! a `ReplicaRpc` carrying one request codec frame for a topic's replica on this broker; it is
//! handed to that replica's `RpcServer` (found in the [`ReplicaRegistry`]) and its reply codec
//! frame goes back in a `ReplicaRpc` echoing the request id and topic, after which the stream
//! is finished. The sending side is `cluster::replica_link`.
//!
//! Refusals are an `Error` frame: `Forbidden` on a connection that is not a peer's (its
//! `Hello` was not granted `PEER`, which only the cluster's peer certificate is), `LimitExceeded`
//! past `max_replica_rpcs_per_connection` streams at once on the connection (counted in
//! `starling_limit_refusals_total`), `NotFound` when no replica of the topic is open here,
//! (and the topic's task is started, which opens the replica if this broker is one),
//! `InvalidRequest` for a codec frame the replica refuses, `Unavailable` for a vote the
//! replica's guard drops. Every outcome is counted in `starling_replica_rpc_served_total`. The
//! frame itself was bounded by `max_frame_bytes` when it was read, the codec frame inside it by
//! the replica's own bound.

use std::sync::Arc;

use starling_proto::{ErrorCode, Frame, ReplicaRpc, write_frame};
use starling_replica::rpc::ServeError;

use crate::cluster::Role;
use crate::durable::replicated::ReplicaRegistry;
use crate::metrics::{Limit, Metrics, replica_rpc};
use crate::server::admit::{InProgress, Slot};
use crate::server::link::Link;
use crate::server::reply;

/// What Raft RPC streams use.
pub struct Handles {
    /// Metrics (outcomes, limit refusals, error frames).
    pub metrics: Arc<Metrics>,
    /// The replicas open here.
    pub registry: Arc<ReplicaRegistry>,
    /// `max_replica_rpcs_per_connection`.
    pub max_per_connection: usize,
    /// Starts the task of a replicated topic whose replica is not open here yet (an RPC from
    /// its leader or creator is the first this broker hears of it), within `max_topics`.
    pub open: Arc<dyn Fn(&str) + Send + Sync>,
}

/// Serves one `ReplicaRpc` stream whose first frame is `rpc`, then finishes it.
pub async fn serve_replica_rpc(
    h: &Handles,
    link: &Link,
    rpc: ReplicaRpc,
    send: &mut quinn::SendStream,
) {
    let served = |outcome| {
        h.metrics
            .replica_rpc_served
            .with_label_values(&[outcome])
            .inc();
    };
    match answer(h, link, rpc).await {
        Ok(reply) => match write_frame(send, &Frame::ReplicaRpc(reply)).await {
            Ok(()) => served(replica_rpc::OK),
            // The sender is gone (it timed out or its link broke): nothing to tell it.
            Err(_) => return,
        },
        Err(refusal) => {
            let Refusal {
                request_id,
                outcome,
                code,
                message,
            } = refusal;
            // Counted before the answer goes out, so whoever reads the refusal finds it counted.
            served(outcome);
            reply::error(send, &h.metrics, request_id, code, message).await;
        }
    }
    let _ = send.finish();
}

/// Why a `ReplicaRpc` got an `Error` instead of a reply.
struct Refusal {
    request_id: u64,
    outcome: &'static str,
    code: ErrorCode,
    message: String,
}

/// Whether a connection of `role` with `open` Raft RPC streams may have one more: its slot,
/// held until the reply is written, or the refusal (a limit refusal counted).
fn admit(h: &Handles, role: Role, open: &InProgress, request_id: u64) -> Result<Slot, Refusal> {
    if role != Role::Peer {
        return Err(Refusal {
            request_id,
            outcome: replica_rpc::FORBIDDEN,
            code: ErrorCode::Forbidden,
            message: "Raft RPCs are between cluster members (peer connections) only".into(),
        });
    }
    open.try_enter(h.max_per_connection).ok_or_else(|| {
        h.metrics.limit_refused(Limit::ReplicaRpcsPerConnection);
        Refusal {
            request_id,
            outcome: replica_rpc::LIMIT,
            code: ErrorCode::LimitExceeded,
            message: format!(
                "{} Raft RPC streams are open on this connection, the most the broker allows \
                 (max_replica_rpcs_per_connection)",
                h.max_per_connection
            ),
        }
    })
}

async fn answer(h: &Handles, link: &Link, rpc: ReplicaRpc) -> Result<ReplicaRpc, Refusal> {
    let refuse = |outcome, code, message: String| Refusal {
        request_id: rpc.request_id,
        outcome,
        code,
        message,
    };
    let _slot = admit(h, link.role, &link.replica_rpcs, rpc.request_id)?;
    let Some(server) = h.registry.get(&rpc.topic) else {
        // The topic's task opens the replica if this broker is one of its replicas; the
        // sender's Raft retries on its next heartbeat.
        (h.open)(&rpc.topic);
        let msg = format!("no replica of `{}` is open on this broker", rpc.topic);
        return Err(refuse(replica_rpc::UNKNOWN_TOPIC, ErrorCode::NotFound, msg));
    };
    match server.serve(&rpc.rpc).await {
        Ok(reply) => Ok(ReplicaRpc {
            request_id: rpc.request_id,
            topic: rpc.topic.clone(),
            rpc: reply.into(),
        }),
        Err(e @ ServeError::Codec(_)) => Err(refuse(
            replica_rpc::INVALID,
            ErrorCode::InvalidRequest,
            e.to_string(),
        )),
        Err(e @ ServeError::Guarded) => Err(refuse(
            replica_rpc::GUARDED,
            ErrorCode::Unavailable,
            e.to_string(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn handles(max: usize) -> Handles {
        Handles {
            metrics: Arc::new(Metrics::new().unwrap_or_else(|e| panic!("{e}"))),
            registry: ReplicaRegistry::new(4),
            max_per_connection: max,
            open: Arc::new(|_: &str| {}),
        }
    }

    fn refusal(r: Result<Slot, Refusal>) -> Refusal {
        match r {
            Ok(_) => panic!("admitted"),
            Err(r) => r,
        }
    }

    #[test]
    fn only_peers_are_admitted() {
        let h = handles(4);
        let open = InProgress::default();
        for role in [Role::Plain, Role::Routed] {
            let r = refusal(admit(&h, role, &open, 9));
            assert_eq!(
                (r.code, r.outcome, r.request_id),
                (ErrorCode::Forbidden, replica_rpc::FORBIDDEN, 9)
            );
        }
        assert_eq!(open.count(), 0);
    }

    #[test]
    fn streams_past_the_budget_are_refused_and_counted() {
        let h = handles(2);
        let open = InProgress::default();
        let first = admit(&h, Role::Peer, &open, 1);
        let second = admit(&h, Role::Peer, &open, 2);
        assert!(first.is_ok() && second.is_ok());
        let r = refusal(admit(&h, Role::Peer, &open, 3));
        assert_eq!(
            (r.code, r.outcome),
            (ErrorCode::LimitExceeded, replica_rpc::LIMIT)
        );
        let counted = h
            .metrics
            .limit_refusals
            .with_label_values(&["max_replica_rpcs_per_connection"])
            .get();
        assert_eq!(counted, 1);
        // A finished stream gives its slot back.
        drop(first);
        assert!(admit(&h, Role::Peer, &open, 4).is_ok());
    }
}
