//! Feature bits advertised in [`Hello::features`](crate::Hello::features)
//! and granted in [`HelloOk::features`](crate::HelloOk::features).
//!
//! The server grants the intersection of what the client asked for and
//! what it supports. Unknown bits must be ignored by both sides.

/// `PublishBatch` frames are accepted.
pub const BATCH_PUBLISH: u64 = 1;
/// The cache frames (`CachePut`, `CacheGet`, `CacheDelete`) are served.
pub const CACHE: u64 = 2;
/// Cluster redirects (`Moved`) and `ClusterInfo` may be used.
pub const CLUSTER: u64 = 4;
/// The server checks `Hello::auth_token`.
pub const AUTH_TOKEN: u64 = 8;

/// Every feature bit defined by protocol version 1.
pub const ALL: u64 = BATCH_PUBLISH | CACHE | CLUSTER | AUTH_TOKEN;

/// Features every connection asks for, whatever its role.
pub const BASE: u64 = BATCH_PUBLISH | CACHE;

/// What a connection is to the broker, as its feature bits say. The SDK asks for
/// [`Role::requested`]; the broker reads the role back from what it granted with
/// [`Role::from_granted`] (after checking the token of a peer). This is the one mapping
/// between roles and bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An ordinary client: requests for other members' topics and keys are forwarded.
    Plain,
    /// A routing SDK (asked for [`CLUSTER`]): a subscription or cache request for a topic or
    /// key owned elsewhere is answered with `Moved`; publishes are still forwarded.
    Routed,
    /// Another member, authenticated with the cluster token ([`AUTH_TOKEN`]): served where
    /// it arrives, never forwarded.
    Peer,
}

impl Role {
    /// The feature bits a connection of this role asks for in its `Hello`.
    pub const fn requested(self) -> u64 {
        match self {
            Role::Plain => BASE,
            Role::Routed => BASE | CLUSTER,
            Role::Peer => BASE | AUTH_TOKEN,
        }
    }

    /// The role of a connection that was granted `granted`. A peer's bit wins over the
    /// routing bit: a member is never redirected.
    pub const fn from_granted(granted: u64) -> Role {
        if granted & AUTH_TOKEN != 0 {
            Role::Peer
        } else if granted & CLUSTER != 0 {
            Role::Routed
        } else {
            Role::Plain
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_role_reads_back_from_its_own_request() {
        for role in [Role::Plain, Role::Routed, Role::Peer] {
            assert_eq!(Role::from_granted(role.requested()), role);
            assert_eq!(role.requested() & BASE, BASE);
        }
        assert_eq!(Role::from_granted(0), Role::Plain);
        assert_eq!(Role::from_granted(ALL), Role::Peer);
    }
}
