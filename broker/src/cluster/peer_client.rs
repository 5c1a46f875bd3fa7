//! [`PeerClient`]: this broker's link to one other member, and the calls only members make of
//! each other. It is the SDK's [`Direct`] link (its connection set-up, path tuning, pools and
//! frame I/O: nothing of it copied here) opened with the `Peer` role, plus the requests between
//! brokers, which the public SDK does not offer: a page of a durable topic's log (`LogRead`), a
//! durable log's claim (`LogClaim`) and a replicated topic's Raft RPC (`ReplicaRpc`). A broker
//! module rather than a crate of its own: it is a few calls over `Direct`, and only the broker
//! makes them.
//!
//! The role is granted by the member at the other end, only to a client certificate whose
//! common name is `starling:peer` signed by its client CA (`auth::decide`); the connection
//! asks for it, and [`super::peers`] dials with this broker's peer certificate. A user's SDK
//! (its `Client` or a `Direct` link without the peer certificate) is refused the role in the
//! handshake, and a peer request on any connection not granted it is refused with `Forbidden`
//! (`server::log_transfer`, `server::replica_rpc`).
//!
//! Unlike the SDK's `Client`, nothing here routes or resubscribes: the member serves what it is
//! sent, and the broker follows owners and resubscribes itself (`upstream`, `catchup`).

use std::ops::Deref;
use std::time::Duration;

use bytes::Bytes;
use starling_client::{ClientConfig, ClientError, Direct, ProtocolError};
use starling_proto::{Frame, LogChunk, LogClaim, LogRead, Position, ReplicaRpc, Role};

/// A log page holds whole records, which may be up to twice a frame (the storage's record
/// limit), plus the page's own fields: its answer may take two frames' worth of bytes.
const LOG_CHUNK_FRAMES: u32 = 2;

/// The link to one other member: a [`Direct`] link of the `Peer` role (its publishes, cache
/// requests, subscriptions and `ClusterInfo`, through `Deref`) and the peer calls. Clones share
/// its connections.
#[derive(Clone, Debug)]
pub struct PeerClient {
    link: Direct,
}

impl Deref for PeerClient {
    type Target = Direct;

    fn deref(&self) -> &Direct {
        &self.link
    }
}

impl PeerClient {
    /// Connects to `cfg.server` asking for the `Peer` role; give `cfg` this broker's peer
    /// certificate as its credentials (else the member refuses the role: `Unauthorized`).
    pub async fn connect(cfg: ClientConfig) -> Result<PeerClient, ClientError> {
        Ok(PeerClient {
            link: Direct::connect(cfg, Role::Peer).await?,
        })
    }

    /// Reads one page (about `max_bytes` of records, at least one record) of durable topic
    /// `topic`'s log at the member, from `from` on (`None`: from its start).
    pub async fn log_read(
        &self,
        topic: &str,
        from: Option<Position>,
        max_bytes: u32,
    ) -> Result<LogChunk, ClientError> {
        let read = Frame::LogRead(LogRead {
            request_id: 1,
            topic: checked(topic)?,
            from,
            max_bytes,
        });
        let within = self.link.request_timeout();
        let answer = self
            .link
            .exchange(read, "log_chunk", LOG_CHUNK_FRAMES, within)
            .await?;
        match answer {
            Frame::LogChunk(chunk) => Ok(chunk),
            other => Err(unexpected("log_chunk", &other)),
        }
    }

    /// Tells the member, the owner of durable topic `topic`, that member `from_id` at
    /// `from_addr` holds a log of it; returns the records the owner copied from there, once it
    /// has. Waits up to `timeout` (copying a long log takes a while).
    pub async fn log_claim(
        &self,
        topic: &str,
        from_id: &str,
        from_addr: &str,
        timeout: Duration,
    ) -> Result<u64, ClientError> {
        let claim = Frame::LogClaim(LogClaim {
            request_id: 1,
            topic: checked(topic)?,
            from_id: from_id.to_string(),
            from_addr: from_addr.to_string(),
        });
        match self.link.exchange(claim, "log_claimed", 1, timeout).await? {
            Frame::LogClaimed(done) => Ok(done.records),
            other => Err(unexpected("log_claimed", &other)),
        }
    }

    /// Sends one Raft RPC of replicated topic `topic` (`rpc`: one frame of the replica crate's
    /// codec) to the member on a stream of its own, and returns the reply's codec frame; the
    /// whole call within `timeout`.
    pub async fn replica_rpc(
        &self,
        topic: &str,
        rpc: Bytes,
        timeout: Duration,
    ) -> Result<Bytes, ClientError> {
        let request = Frame::ReplicaRpc(ReplicaRpc {
            request_id: 1,
            topic: checked(topic)?,
            rpc,
        });
        match self
            .link
            .exchange(request, "replica_rpc", 1, timeout)
            .await?
        {
            Frame::ReplicaRpc(reply) => Ok(reply.rpc),
            other => Err(unexpected("replica_rpc", &other)),
        }
    }
}

/// `topic`, checked before anything is sent, as the SDK checks its own requests' topics.
fn checked(topic: &str) -> Result<String, ClientError> {
    starling_proto::validate_topic(topic)
        .map_err(|why| ClientError::InvalidTopic(format!("{topic:?}: {why}")))?;
    Ok(topic.to_string())
}

/// The error for an answer of the wrong kind.
fn unexpected(expected: &'static str, got: &Frame) -> ClientError {
    ProtocolError::UnexpectedFrame {
        expected,
        got: got.name(),
    }
    .into()
}
