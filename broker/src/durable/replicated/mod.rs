//! Replicated durable topics (`starling-replica`, see `docs/replication.md`): the broker's
//! side of a topic whose log is a Raft group on several members.
//!
//! - [`health`]: whether a topic is under-replicated or leaderless, from its replica's status
//!   over time (pure; the status watcher of [`topic`] feeds it).
//! - [`registry`]: the replicas of topics open on this broker, by topic, which the peer
//!   stream handler (`server::replica_rpc`) routes each incoming Raft RPC to.
//! - [`mover`]: keeps each topic's replica set equal to its placement through openraft's
//!   membership change (on the leader), and notices when the replica here left the topic.
//! - [`removal`]: deletes the files of a replica that left its topic.
//! - [`topic`]: one topic's replica as its topic task uses it (open, propose, read the
//!   committed entries, close), and what all of them share ([`Replication`]).
//! - [`sync`]: whether each replica open here is in sync with its leader, which the
//!   broker's readiness waits for ([`ReplicaSync`]).
//!
//! The RPCs travel over the peer links through `cluster::replica_link`, which implements
//! [`ReplicaNet`]; nothing here imports the cluster module.

pub mod health;
pub mod mover;
pub mod registry;
pub mod removal;
pub mod sync;
pub mod topic;

pub use registry::{RegistryFull, ReplicaRegistry};
pub use sync::ReplicaSync;
pub use topic::{
    Leaders, OpenError, Proposal, ProposeError, ReplicaEvent, ReplicaMetrics, ReplicaNet,
    ReplicatedLog, Replication,
};
