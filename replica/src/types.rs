//! The openraft type configuration of a replicated topic ([`TypeConfig`]) and short names
//! for the library's generic types under it.

use std::io::Cursor;

use crate::batch::{Applied, Batch};

openraft::declare_raft_types!(
    /// One replicated topic's Raft types: entries carry a [`Batch`] of message payloads,
    /// nodes are numbered `u64` with an address ([`openraft::BasicNode`]), and a snapshot is
    /// an in-memory image of the retained committed records (see [`crate::snapshot`]).
    pub TypeConfig:
        D = Batch,
        R = Applied,
        NodeId = u64,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = Cursor<Vec<u8>>,
        AsyncRuntime = openraft::TokioRuntime,
);

/// A replica's id: the broker's node id, stable across restarts and across a lost volume.
pub type NodeId = u64;
/// A replica's address as membership records it.
pub type Node = openraft::BasicNode;
/// One topic's Raft instance.
pub type Raft = openraft::Raft<TypeConfig>;
/// A Raft log entry.
pub type Entry = openraft::Entry<TypeConfig>;
/// A log id (term, leader, index).
pub type LogId = openraft::LogId<NodeId>;
/// A persisted vote.
pub type Vote = openraft::Vote<NodeId>;
/// The library's storage error.
pub type StorageError = openraft::StorageError<NodeId>;
/// Membership with the log id that set it.
pub type StoredMembership = openraft::StoredMembership<NodeId, Node>;
