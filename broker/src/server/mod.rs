//! The QUIC ingress: accepting connections, the handshake, and routing each stream to its
//! handler by its first frame. Each handler decodes, checks and hands over: to a local topic,
//! the cache, or (for a topic or key another member owns) the cluster side's
//! [`Forwarder`](crate::cluster::forward::Forwarder). Each is given only the handles it uses,
//! built once from the broker's [`State`] by [`ingress`].
//!
//! - [`admit`]: whether a connection attempt is served, retried or refused.
//! - [`buffers`]: the windows each connection is granted from the connection buffer budget.
//! - [`frames`]: reading request frames within the connection's frame allowance.
//! - [`conn`]: one connection: handshake, then one task per stream.
//! - [`handshake`]: `Hello` in, `HelloOk` or a typed error out.
//! - [`link`]: what a stream handler knows about its connection.
//! - [`publish`]: publish streams and the per-connection publish workers.
//! - [`subscribe`]: subscription streams; [`quic_sink`]: a subscriber's sink on its stream.
//! - [`cache`]: cache request/response streams.
//! - [`consume`]: durable consumer member streams (`crate::consumer`).
//! - [`log_transfer`]: durable log reads and claims between members.
//! - [`replica_rpc`]: Raft RPCs of replicated topics between members.
//! - [`reply`]: writing frames and typed errors back to a stream.

pub mod admit;
pub mod buffers;
pub mod cache;
pub mod conn;
pub mod consume;
pub mod frames;
pub mod handshake;
pub mod link;
pub mod log_transfer;
pub mod publish;
pub mod quic_sink;
pub mod replica_rpc;
pub mod reply;
pub mod subscribe;

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use crate::state::State;

/// The handles of every stream handler, taken from `state`.
pub fn ingress(state: &State) -> Arc<conn::Handles> {
    let publish = publish::Handles {
        cfg: Arc::clone(&state.cfg),
        metrics: Arc::clone(&state.metrics),
        decoder: state.decoder,
        health: Arc::clone(&state.health),
        topics: Arc::clone(&state.topics),
        cluster: Arc::clone(&state.cluster),
        forward: state.forward.clone(),
        gate: Arc::clone(&state.publishes),
        subscriptions: Arc::clone(&state.subscriptions),
    };
    let subscribe = subscribe::Handles {
        cfg: Arc::clone(&state.cfg),
        metrics: Arc::clone(&state.metrics),
        decoder: state.decoder,
        health: Arc::clone(&state.health),
        topics: Arc::clone(&state.topics),
        lanes: Arc::clone(&state.lanes),
        cluster: Arc::clone(&state.cluster),
        upstreams: Arc::clone(&state.upstreams),
        fan_in: Arc::clone(&state.fan_in),
        subscriptions: Arc::clone(&state.subscriptions),
        groups: crate::pubsub::groups::GroupBudget::new(
            state.cfg.max_groups_per_subject as usize,
            state.cfg.max_group_members as usize,
        ),
    };
    let cache = cache::Handles {
        metrics: Arc::clone(&state.metrics),
        decoder: state.decoder,
        health: Arc::clone(&state.health),
        cache: Arc::clone(&state.cache),
        cluster: Arc::clone(&state.cluster),
        forward: state.forward.clone(),
        handoff: Arc::clone(&state.handoff),
        idle_timeout: std::time::Duration::from_millis(state.cfg.stream_idle_timeout_ms),
    };
    let consume = consume::Handles {
        cfg: Arc::clone(&state.cfg),
        metrics: Arc::clone(&state.metrics),
        decoder: state.decoder,
        health: Arc::clone(&state.health),
        topics: Arc::clone(&state.topics),
        cluster: Arc::clone(&state.cluster),
        consumers: crate::consumer::Consumers::new(
            Arc::clone(&state.topics),
            Arc::clone(&state.metrics),
            state.cfg.max_consumers_per_topic as usize,
            state.cfg.max_consumer_members as usize,
            Arc::new(crate::consumer::PendingBudget::new(
                state.cfg.consumer_pending_max_bytes,
                state.metrics.consumer_pending_bytes.clone(),
                state.metrics.consumer_budget_waits.clone(),
            )),
        ),
    };
    Arc::new(conn::Handles {
        consume: Arc::new(consume),
        cfg: Arc::clone(&state.cfg),
        metrics: Arc::clone(&state.metrics),
        decoder: state.decoder,
        cluster: Arc::clone(&state.cluster),
        auth: Arc::clone(&state.auth),
        server_id: state.server_id.clone(),
        next_conn_id: AtomicU64::new(1),
        publish: Arc::new(publish),
        subscribe: Arc::new(subscribe),
        cache: Arc::new(cache),
        replica_rpc: Arc::new(replica_rpc::Handles {
            metrics: Arc::clone(&state.metrics),
            registry: Arc::clone(&state.replicas),
            max_per_connection: state.cfg.max_replica_rpcs_per_connection as usize,
            open: {
                let topics = Arc::clone(&state.topics);
                Arc::new(move |topic: &str| {
                    if topics.is_replicated(topic) {
                        let _ = topics.reserve(topic);
                    }
                })
            },
        }),
        log_transfer: Arc::new(log_transfer::Handles {
            metrics: Arc::clone(&state.metrics),
            topics: Arc::clone(&state.topics),
            max_page_bytes: state.cfg.max_frame_bytes,
        }),
    })
}
