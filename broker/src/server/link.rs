//! [`Link`]: what a stream's handler knows about the connection the stream arrived on. Its own
//! module so that the connection loop (which builds it) and the handlers (which read it) both
//! depend on it rather than on each other.

use crate::auth::Access;
use crate::cluster::Role;
use std::sync::Arc;

use crate::server::admit::InProgress;
use crate::server::frames::Allowance;

/// The connection a stream arrived on, as its handlers need it.
#[derive(Clone)]
pub struct Link {
    /// The connection's id (for lane picking and logs).
    pub id: u64,
    /// The QUIC connection (the drain reads its statistics to tell a silent peer).
    pub quic: quinn::Connection,
    /// Features granted in the handshake.
    pub granted: u64,
    /// What the client said it is.
    pub role: Role,
    /// The bytes of partial frames the connection's streams may hold.
    pub allowance: Allowance,
    /// The connection's open subscriptions (within `max_subscriptions_per_connection`).
    pub subscriptions: Arc<InProgress>,
    /// The connection's open wildcard subscriptions (within
    /// `max_wildcard_subscriptions_per_connection`).
    pub wildcards: Arc<InProgress>,
    /// The connection's open Raft RPC streams (within `max_replica_rpcs_per_connection`).
    pub replica_rpcs: Arc<InProgress>,
    /// What the connection's requests are checked against.
    pub access: Access,
}
