//! The Raft RPCs as they cross a transport ([`Rpc`], [`RpcReply`]) and the receiving side
//! ([`serve`]): decode a request frame, hand it to the local Raft, encode the reply. The
//! frame format is [`crate::codec`]'s; a broker carries these frames over its peer links.

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::types::{NodeId, Raft, TypeConfig};

/// A request from one replica's Raft to another's.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum Rpc {
    /// Log replication and heartbeats.
    Append(AppendEntriesRequest<TypeConfig>),
    /// An election.
    Vote(VoteRequest<NodeId>),
    /// One chunk of a snapshot.
    Snapshot(InstallSnapshotRequest<TypeConfig>),
}

/// The reply to an [`Rpc`], the receiving Raft's error included.
#[derive(Debug, Serialize, Deserialize)]
#[serde(bound = "")]
pub enum RpcReply {
    /// To [`Rpc::Append`].
    Append(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Rpc::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`Rpc::Snapshot`].
    Snapshot(Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>),
}

/// Handles one request frame for `raft` and returns the reply frame; a frame that does not
/// decode (over `max_frame` bytes, truncated, malformed) is refused with the codec error and
/// reaches no Raft.
pub async fn serve(raft: &Raft, frame: &[u8], max_frame: usize) -> Result<Vec<u8>, CodecError> {
    let rpc: Rpc = codec::decode_frame(frame, max_frame)?;
    let reply = match rpc {
        Rpc::Append(req) => RpcReply::Append(raft.append_entries(req).await),
        Rpc::Vote(req) => RpcReply::Vote(raft.vote(req).await),
        Rpc::Snapshot(req) => RpcReply::Snapshot(raft.install_snapshot(req).await),
    };
    codec::encode_frame(&reply, max_frame)
}
