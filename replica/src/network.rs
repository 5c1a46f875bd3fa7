//! The client side of Raft's network: openraft's `RaftNetworkFactory` / `RaftNetwork` over a
//! [`Transport`] that moves request and reply frames between replicas (the broker's QUIC
//! peer links in production, [`crate::simnet::SimNet`] in tests).
//!
//! Appends go in the binary format ([`crate::wire`]); a peer that refuses one as malformed (a
//! build from before it) gets JSON appends for [`JSON_FALLBACK`], then binary is tried again.
//! An append of several entries whose frame would be over the bound is reported as too large,
//! with a hint of half as many entries, and the library sends fewer at a time. An
//! unreachable peer is reported to the library as such, and it backs off for one
//! heartbeat interval before it tries that peer again (a dead peer costs no busy retry
//! loop); any other transport failure is a network error; no reply within the library's
//! hard deadline for the RPC is a timeout.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use openraft::RPCTypes;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, RemoteError, Timeout,
    Unreachable,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::codec::{self, CodecError};
use crate::rpc::{Rpc, RpcReply};
use crate::types::{Node, NodeId, TypeConfig};

/// Why a frame did not make the round trip.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// No route to the peer now (partitioned, down, dropped).
    #[error("peer {0} unreachable")]
    Unreachable(NodeId),
    /// The frame or its reply did not encode or decode.
    #[error(transparent)]
    Codec(#[from] CodecError),
    /// The reply was of the wrong kind.
    #[error("reply does not match the request")]
    Mismatch,
    /// No reply within the transport's own deadline.
    #[error("no reply from peer {0} in time")]
    Timeout(NodeId),
    /// The peer answered the call with a refusal (not its Raft's reply): over a budget, no
    /// replica of the topic there, or a frame it could not take.
    #[error("peer {peer} refused the call: {reason}")]
    Refused {
        /// The peer.
        peer: NodeId,
        /// Its reason.
        reason: String,
    },
}

/// A boxed future of a transport call.
pub type CallFuture<'a> =
    Pin<Box<dyn Future<Output = Result<Vec<u8>, TransportError>> + Send + 'a>>;

/// Moves one request frame from `from` to `to` and brings back the reply frame.
pub trait Transport: Send + Sync + 'static {
    /// Sends `frame` to `to`'s Raft and returns its reply frame.
    fn call(&self, from: NodeId, to: NodeId, frame: Vec<u8>) -> CallFuture<'_>;
}

/// How long a peer that refused a binary append gets JSON appends before the next try.
pub const JSON_FALLBACK: Duration = Duration::from_secs(60);

/// Until when each peer gets JSON appends (it refused a binary one).
type JsonUntil = Arc<Mutex<HashMap<NodeId, Instant>>>;

/// Whether `e` is a peer refusing a request frame as malformed: what a build that reads only
/// JSON answers to a binary append (in process, or through a broker's `InvalidRequest`).
fn refused_as_malformed(e: &TransportError) -> bool {
    match e {
        TransportError::Codec(CodecError::Body(_)) => true,
        TransportError::Refused { reason, .. } => reason.contains("malformed body"),
        _ => false,
    }
}

/// Makes one [`Link`] per peer for a replica's Raft.
#[derive(Clone)]
pub struct NetworkFactory {
    me: NodeId,
    transport: Arc<dyn Transport>,
    max_frame: usize,
    backoff: Duration,
    json_until: JsonUntil,
}

impl NetworkFactory {
    /// A factory for replica `me` over `transport`, frames bounded by `max_frame` bytes,
    /// waiting `backoff` before retrying an unreachable peer.
    pub fn new(
        me: NodeId,
        transport: Arc<dyn Transport>,
        max_frame: usize,
        backoff: Duration,
    ) -> NetworkFactory {
        NetworkFactory {
            me,
            transport,
            max_frame,
            backoff,
            json_until: Arc::default(),
        }
    }
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Link;

    async fn new_client(&mut self, target: NodeId, _node: &Node) -> Link {
        Link {
            me: self.me,
            target,
            transport: Arc::clone(&self.transport),
            max_frame: self.max_frame,
            backoff: self.backoff,
            json_until: Arc::clone(&self.json_until),
        }
    }
}

/// The RPC client from one replica to one peer.
pub struct Link {
    me: NodeId,
    target: NodeId,
    transport: Arc<dyn Transport>,
    max_frame: usize,
    backoff: Duration,
    json_until: JsonUntil,
}

type Rpcs<E> = RPCError<NodeId, Node, E>;

impl Link {
    /// Whether appends to this peer go as JSON for now (it refused a binary one).
    fn json_only(&self) -> bool {
        let mut fallback = self.json_until.lock();
        match fallback.get(&self.target) {
            Some(until) if Instant::now() < *until => true,
            Some(_) => {
                fallback.remove(&self.target);
                false
            }
            None => false,
        }
    }

    async fn call(&self, rpc: &Rpc, binary: bool) -> Result<Vec<u8>, TransportError> {
        let frame = crate::rpc::encode_request(rpc, self.max_frame, binary)?;
        self.transport.call(self.me, self.target, frame).await
    }

    /// Sends `rpc` (an append in the binary format unless this peer is known not to read
    /// it) and brings back the reply; a binary append the peer refuses as malformed is sent
    /// again as JSON, and the peer gets JSON appends for [`JSON_FALLBACK`].
    async fn exchange(&self, rpc: &Rpc) -> Result<Vec<u8>, TransportError> {
        let binary = matches!(rpc, Rpc::Append(_)) && !self.json_only();
        match self.call(rpc, binary).await {
            Err(e) if binary && refused_as_malformed(&e) => {
                tracing::info!(peer = self.target, error = %e,
                    "replica: the peer does not read binary appends; sending it JSON for a while");
                self.json_until
                    .lock()
                    .insert(self.target, Instant::now() + JSON_FALLBACK);
                self.call(rpc, false).await
            }
            r => r,
        }
    }

    async fn round_trip<E: std::error::Error>(
        &self,
        rpc: Rpc,
        action: RPCTypes,
        option: &RPCOption,
    ) -> Result<RpcReply, Rpcs<E>> {
        // An append of several entries that does not fit a frame is retried by the library
        // with fewer (half as many) entries; one entry always fits (see `ReplicaConfig`).
        let entries = match &rpc {
            Rpc::Append(a) => a.entries.len(),
            _ => 0,
        };
        let network = |e: TransportError| match e {
            TransportError::Unreachable(_) => RPCError::Unreachable(Unreachable::new(&e)),
            TransportError::Codec(CodecError::TooLarge { .. }) if entries > 1 => {
                RPCError::PayloadTooLarge(PayloadTooLarge::new_entries_hint((entries / 2) as u64))
            }
            _ => RPCError::Network(NetworkError::new(&e)),
        };
        let ttl = option.hard_ttl();
        let reply = match tokio::time::timeout(ttl, self.exchange(&rpc)).await {
            Ok(r) => r.map_err(network)?,
            Err(_) => {
                return Err(RPCError::Timeout(Timeout {
                    action,
                    id: self.me,
                    target: self.target,
                    timeout: ttl,
                }));
            }
        };
        codec::decode_frame(&reply, self.max_frame).map_err(|e| network(TransportError::Codec(e)))
    }

    fn remote<T, E: std::error::Error>(
        &self,
        r: Result<T, RaftError<NodeId, E>>,
    ) -> Result<T, Rpcs<RaftError<NodeId, E>>> {
        r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
    }
}

fn mismatch<E: std::error::Error>() -> Rpcs<E> {
    RPCError::Network(NetworkError::new(&TransportError::Mismatch))
}

impl RaftNetwork<TypeConfig> for Link {
    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }

    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, Rpcs<RaftError<NodeId>>> {
        match self
            .round_trip(Rpc::Append(rpc), RPCTypes::AppendEntries, &option)
            .await?
        {
            RpcReply::Append(r) => self.remote(r),
            _ => Err(mismatch()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, Rpcs<RaftError<NodeId, InstallSnapshotError>>>
    {
        match self
            .round_trip(Rpc::Snapshot(rpc), RPCTypes::InstallSnapshot, &option)
            .await?
        {
            RpcReply::Snapshot(r) => self.remote(r),
            _ => Err(mismatch()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, Rpcs<RaftError<NodeId>>> {
        match self
            .round_trip(Rpc::Vote(rpc), RPCTypes::Vote, &option)
            .await?
        {
            RpcReply::Vote(r) => self.remote(r),
            _ => Err(mismatch()),
        }
    }
}
