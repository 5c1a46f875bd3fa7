//! An in-process network for tests ([`SimNet`]): every replica's Raft registered under its
//! id, frames delivered through each replica's [`RpcServer`] (so the codec is exercised on every
//! call), with faults a test schedules: a link cut both ways or one way (a one-way cut on
//! the reply path loses replies to requests that were handled), a drop probability per
//! frame, and a delay drawn per frame from a range. Drops and delays come from one RNG
//! seeded by the test, so a schedule is reproducible as far as the runtime's task order is.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::network::{CallFuture, Transport, TransportError};
use crate::rpc::{RpcServer, ServeError};
use crate::types::NodeId;

/// What a [`SimNet`] counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SimStats {
    /// Frames delivered to a Raft.
    pub delivered: u64,
    /// Frames lost to a cut link, a drop or an absent node.
    pub lost: u64,
}

struct State {
    nodes: BTreeMap<NodeId, RpcServer>,
    /// Directed links that lose every frame: (from, to).
    cut: BTreeSet<(NodeId, NodeId)>,
    drop_probability: f64,
    delay: (Duration, Duration),
    rng: StdRng,
    stats: SimStats,
}

/// The simulated network; cloning shares it.
#[derive(Clone)]
pub struct SimNet {
    state: Arc<Mutex<State>>,
}

impl SimNet {
    /// A network with no fault, its RNG seeded with `seed`.
    pub fn new(seed: u64) -> SimNet {
        SimNet {
            state: Arc::new(Mutex::new(State {
                nodes: BTreeMap::new(),
                cut: BTreeSet::new(),
                drop_probability: 0.0,
                delay: (Duration::ZERO, Duration::ZERO),
                rng: StdRng::seed_from_u64(seed),
                stats: SimStats::default(),
            })),
        }
    }

    /// Attaches a replica's RPC server as node `id` (replacing a previous incarnation).
    pub fn register(&self, id: NodeId, server: RpcServer) {
        self.state.lock().nodes.insert(id, server);
    }

    /// Detaches node `id` (it crashed): frames to it are lost.
    pub fn unregister(&self, id: NodeId) {
        self.state.lock().nodes.remove(&id);
    }

    /// Cuts the link from `from` to `to` (one way).
    pub fn cut_one_way(&self, from: NodeId, to: NodeId) {
        self.state.lock().cut.insert((from, to));
    }

    /// Cuts `a` off from every node in `others`, both ways.
    pub fn isolate(&self, a: NodeId, others: &[NodeId]) {
        let mut s = self.state.lock();
        for &b in others {
            if b != a {
                s.cut.insert((a, b));
                s.cut.insert((b, a));
            }
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.state.lock().cut.clear();
    }

    /// Sets the probability that a frame (request or reply) is lost.
    pub fn set_drop_probability(&self, p: f64) {
        self.state.lock().drop_probability = p.clamp(0.0, 1.0);
    }

    /// Sets the range each frame's delay is drawn from.
    pub fn set_delay(&self, min: Duration, max: Duration) {
        self.state.lock().delay = (min, max.max(min));
    }

    /// The counters so far.
    pub fn stats(&self) -> SimStats {
        self.state.lock().stats
    }

    /// Whether a frame from `from` to `to` gets through now, and its delay.
    fn pass(&self, from: NodeId, to: NodeId) -> Option<Duration> {
        let mut s = self.state.lock();
        let p = s.drop_probability;
        let lost = s.cut.contains(&(from, to)) || (p > 0.0 && s.rng.random::<f64>() < p);
        if lost {
            s.stats.lost += 1;
            return None;
        }
        let (lo, hi) = s.delay;
        let delay = if hi > lo {
            s.rng.random_range(lo..=hi)
        } else {
            lo
        };
        Some(delay)
    }
}

impl Transport for SimNet {
    fn call(&self, from: NodeId, to: NodeId, frame: Vec<u8>) -> CallFuture<'_> {
        Box::pin(async move {
            let delay = self.pass(from, to).ok_or(TransportError::Unreachable(to))?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            let server = {
                let mut s = self.state.lock();
                let Some(server) = s.nodes.get(&to).cloned() else {
                    s.stats.lost += 1;
                    return Err(TransportError::Unreachable(to));
                };
                s.stats.delivered += 1;
                server
            };
            let reply = match server.serve(&frame).await {
                Ok(r) => r,
                Err(ServeError::Codec(e)) => return Err(TransportError::Codec(e)),
                Err(ServeError::Guarded) => return Err(TransportError::Unreachable(to)),
            };
            let delay = self.pass(to, from).ok_or(TransportError::Unreachable(to))?;
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            Ok(reply)
        })
    }
}
