//! The errors of a replicated topic ([`ReplicaError`]).

use crate::codec::CodecError;
use crate::types::NodeId;

/// Why a replicated topic call failed.
#[derive(Debug, thiserror::Error)]
pub enum ReplicaError {
    /// This replica is not the leader (or stopped being it before the entry committed):
    /// nothing was acknowledged; publish to `leader` if known.
    #[error("not the leader; the leader is {leader:?}")]
    NotLeader {
        /// The leader as this replica knows it.
        leader: Option<NodeId>,
    },
    /// The publish would not fit one stored entry.
    #[error("publish of {len} encoded bytes exceeds the limit of {max}")]
    TooLarge {
        /// Encoded bytes.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The configuration is unusable.
    #[error("invalid replica config: {0}")]
    Config(String),
    /// The Raft log or the committed log failed (open, read, write, fsync).
    #[error("storage: {0}")]
    Storage(String),
    /// A membership change was refused or failed.
    #[error("membership change: {0}")]
    Membership(String),
    /// Encoding or decoding failed.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// Another replica could not be asked (creating the topic needs every replica's answer).
    #[error("replica unreachable: {0}")]
    Unreachable(String),
    /// The replica's Raft stopped (shut down, or a fatal storage error).
    #[error("replica stopped: {0}")]
    Stopped(String),
}
