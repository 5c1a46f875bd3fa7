//! Replicated durable topics (`starling-replica`, see `docs/replication.md`): the broker's
//! side of a topic whose log is a Raft group on several members.
//!
//! - [`registry`]: the replicas of topics open on this broker, by topic, which the peer
//!   stream handler (`server::replica_rpc`) routes each incoming Raft RPC to.
//!
//! The RPCs travel over the peer links through `cluster::replica_link`.

pub mod registry;

pub use registry::{RegistryFull, ReplicaRegistry};
