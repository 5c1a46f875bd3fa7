//! Starling's replicated topics: one topic's log replicated on 1, 3 or 5 brokers with the
//! `openraft` consensus library (0.9), stored in `starling-storage` logs.
//!
//! # Why a library, and which parts are ours
//!
//! Election, fencing by term (a deposed leader cannot commit or acknowledge: an entry
//! commits only under the term of a leader a quorum accepted), log matching and
//! conflict truncation, commit by quorum, membership change (joint consensus, learners
//! caught up before they vote) and snapshot transfer are openraft's. openraft 0.9 is used
//! because it is maintained, async on tokio (the broker's runtime), and splits storage into
//! a log store with an explicit "flushed" callback and a state machine (storage-v2), which
//! is exactly where a segmented, checksummed log with group commit plugs in.
//!
//! What this crate writes is glue the library asks every user to write: the log store on
//! `starling-storage` ([`log_store`]), the state machine, which is the topic's committed
//! log ([`state_machine`]), the snapshot format ([`snapshot`]), the RPC codec and network
//! adaptor ([`codec`], [`rpc`], [`network`]), an in-process network for tests
//! ([`simnet`]), and the API a broker topic task uses ([`topic`]).
//!
//! # One Raft group per topic
//!
//! Each replicated topic is its own group: its own leader, term, log and membership. A
//! topic's replicas, placement and failure are then independent of every other topic's, a
//! topic's leader can sit on any broker (spreading leaders spreads publish load), and the
//! broker's existing per-topic task owns exactly one group. The cost is per-topic
//! heartbeats and one fsync stream per topic. Sharding (many topics in one group) would cut
//! heartbeats and let one fsync cover many topics, but couples their leaders and
//! membership, needs a topic id in every entry and a demultiplexing state machine, and
//! makes a snapshot cover many topics; it is the step to take if topic counts reach the
//! thousands per broker.
//!
//! # Files
//!
//! - [`types`]: the openraft type configuration.
//! - [`batch`]: the entry payload (a versioned batch of messages).
//! - [`entry_codec`], [`wire`]: the binary formats of stored entries and records, and of
//!   appends on the wire.
//! - [`committed`]: the committed log's records, and what readers get.
//! - [`config`]: the knobs.
//! - [`error`]: typed errors.
//! - [`meta`]: small files replaced atomically through the storage file layer.
//! - [`guard`]: a replica that starts with an empty volume votes only once caught up.
//! - [`moves`]: the steps of a replica-set move (learners, joint consensus, dropping learners).

// openraft's storage and network traits return its `StorageError` and `RPCError` by value
// (over 200 bytes); the helpers feeding them return the same types rather than box and unbox.
#![allow(clippy::result_large_err)]

pub mod batch;
pub mod codec;
pub mod committed;
pub mod config;
pub mod entry_codec;
pub mod error;
pub mod guard;
pub mod log_store;
pub mod meta;
pub mod moves;
pub mod network;
pub mod rpc;
pub mod simnet;
pub mod snapshot;
pub mod state_machine;
pub mod topic;
pub mod types;
pub mod wire;

pub use batch::{Applied, BATCH_VERSION, Batch, HEADERS_BATCH_VERSION, PLAIN_BATCH_VERSION};
pub use committed::Committed;
pub use config::ReplicaConfig;
pub use error::ReplicaError;
pub use moves::{MembershipView, StepError};
pub use network::{Transport, TransportError};
pub use simnet::SimNet;
pub use topic::{Created, Pending, ReplicatedTopic, TopicStatus};
pub use types::{Node, NodeId, TypeConfig};
