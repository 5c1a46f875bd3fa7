//! The Raft RPCs as they cross a transport ([`Rpc`], [`RpcReply`]) and the receiving side
//! ([`RpcServer`]): decode a request frame, hand it to the local Raft, encode the reply. The
//! frame format is [`crate::codec`]'s; an append's body is binary ([`crate::wire`]), the
//! rest JSON. A broker carries these frames over its peer links.

use std::sync::Arc;

use openraft::error::{InstallSnapshotError, RaftError};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};

use crate::codec::{self, CodecError};
use crate::guard::VoteGuard;
use crate::types::{NodeId, Raft, TypeConfig};
use crate::wire;

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
    /// Whether the receiving replica holds any Raft state of the topic (a log entry or a
    /// vote): asked by the replica that would bootstrap the topic, which does so only when
    /// every other replica answers no ([`crate::ReplicatedTopic::create`]).
    Probe,
    /// The topic was just bootstrapped with the receiving replica as a founding voter: it
    /// lifts its vote guard ([`crate::ReplicatedTopic::founding`]).
    Found,
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
    /// To [`Rpc::Probe`]: whether the replica holds Raft state.
    Probe(bool),
    /// To [`Rpc::Found`].
    Found,
}

/// Why a request frame got no reply.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The frame did not decode (over the bound, truncated, malformed); it reached no Raft.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// A vote request to a replica whose vote guard holds ([`crate::guard`]): dropped.
    #[error("vote request dropped: this replica is catching up after an empty start")]
    Guarded,
}

/// The frame of `rpc`, of at most `max` bytes: an append in the binary format of
/// [`crate::wire`] when `binary`, everything else (and an append when not `binary`) as JSON.
pub fn encode_request(rpc: &Rpc, max: usize, binary: bool) -> Result<Vec<u8>, CodecError> {
    match rpc {
        Rpc::Append(req) if binary => wire::encode_append(req, max),
        _ => codec::encode_frame(rpc, max),
    }
}

/// Parses exactly one request frame of at most `max` bytes: a binary append, or the JSON of
/// any request (what every build before the binary append sent).
pub fn decode_request(frame: &[u8], max: usize) -> Result<Rpc, CodecError> {
    let body = codec::frame_body(frame, max)?;
    if body.first() == Some(&wire::APPEND_TAG) {
        return wire::decode_append(body, max).map(Rpc::Append);
    }
    codec::decode_body(body, max)
}

/// Whether `raft` holds any state of its topic: a log entry (a membership included) or a
/// term above 0 (it voted or campaigned).
pub fn holds_state(raft: &Raft) -> bool {
    let m = raft.metrics().borrow().clone();
    m.last_log_index.is_some() || m.current_term > 0
}

/// The receiving side of one replica: its Raft, its vote guard and the frame bound.
#[derive(Clone)]
pub struct RpcServer {
    raft: Raft,
    guard: Arc<VoteGuard>,
    max_frame: usize,
    max_snapshot: usize,
}

impl RpcServer {
    /// A server for `raft`: request frames up to `max_frame` bytes, snapshot chunks only
    /// within the first `max_snapshot` bytes of a snapshot.
    pub fn new(
        raft: Raft,
        guard: Arc<VoteGuard>,
        max_frame: usize,
        max_snapshot: usize,
    ) -> RpcServer {
        RpcServer {
            raft,
            guard,
            max_frame,
            max_snapshot,
        }
    }

    /// Handles one request frame and returns the reply frame.
    pub async fn serve(&self, frame: &[u8]) -> Result<Vec<u8>, ServeError> {
        let rpc = decode_request(frame, self.max_frame)?;
        let reply = match rpc {
            Rpc::Append(req) => {
                self.guard.saw_leader(req.leader_commit.map(|l| l.index));
                let reply = self.raft.append_entries(req).await;
                // Lifts the guard once caught up, so the replica may also campaign again.
                self.guard.allows_vote(&self.raft);
                RpcReply::Append(reply)
            }
            Rpc::Vote(req) => {
                if !self.guard.allows_vote(&self.raft) {
                    return Err(ServeError::Guarded);
                }
                RpcReply::Vote(self.raft.vote(req).await)
            }
            Rpc::Snapshot(req) => {
                // The chunk is written at its offset into the snapshot being received: bound
                // the end before it allocates anything.
                let end = usize::try_from(req.offset)
                    .unwrap_or(usize::MAX)
                    .saturating_add(req.data.len());
                if end > self.max_snapshot {
                    return Err(ServeError::Codec(CodecError::TooLarge {
                        len: end,
                        max: self.max_snapshot,
                    }));
                }
                RpcReply::Snapshot(self.raft.install_snapshot(req).await)
            }
            Rpc::Probe => RpcReply::Probe(holds_state(&self.raft)),
            Rpc::Found => {
                // Only a replica with no state yet is founded: one that holds a log or a
                // vote is past the topic's creation and keeps its guard as it is.
                if !holds_state(&self.raft) {
                    self.guard.lift(&self.raft);
                }
                RpcReply::Found
            }
        };
        Ok(codec::encode_frame(&reply, self.max_frame)?)
    }
}
