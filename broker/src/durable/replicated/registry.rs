//! [`ReplicaRegistry`]: the replicas of replicated topics open on this broker, keyed by topic,
//! each as the receiving side of its Raft RPCs ([`RpcServer`]). A replica is registered when
//! its topic opens it and removed when it shuts down; the peer stream handler looks the topic
//! of every incoming `ReplicaRpc` up here. At most `max_topics` entries (the broker's topic
//! budget): one more is refused with [`RegistryFull`].

use std::collections::HashMap;
use std::sync::Arc;

use starling_replica::rpc::RpcServer;

/// The registry already holds its most entries.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{max} replicated topics are open on this broker, the most it allows (max_topics)")]
pub struct RegistryFull {
    /// The bound.
    pub max: usize,
}

/// Open replicas by topic.
pub struct ReplicaRegistry {
    max: usize,
    open: parking_lot::RwLock<HashMap<String, RpcServer>>,
}

impl ReplicaRegistry {
    /// An empty registry of at most `max` replicas.
    pub fn new(max: usize) -> Arc<ReplicaRegistry> {
        Arc::new(ReplicaRegistry {
            max,
            open: parking_lot::RwLock::new(HashMap::new()),
        })
    }

    /// Routes `topic`'s RPCs to `server` from now on (replacing a previous replica of the
    /// topic, e.g. one reopened after a fatal storage error).
    pub fn register(&self, topic: &str, server: RpcServer) -> Result<(), RegistryFull> {
        let mut open = self.open.write();
        if !open.contains_key(topic) && open.len() >= self.max {
            return Err(RegistryFull { max: self.max });
        }
        open.insert(topic.to_string(), server);
        Ok(())
    }

    /// Stops routing `topic`'s RPCs here; true when it was registered.
    pub fn unregister(&self, topic: &str) -> bool {
        self.open.write().remove(topic).is_some()
    }

    /// The replica of `topic` open here, if any.
    pub fn get(&self, topic: &str) -> Option<RpcServer> {
        self.open.read().get(topic).cloned()
    }

    /// How many replicas are open here.
    pub fn len(&self) -> usize {
        self.open.read().len()
    }

    /// Whether no replica is open here.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
