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
/// The client authenticates as a user with the token in `Hello::auth_token`. The server grants
/// the bit only when the token's SHA-256 matches a known user; a client with a certificate (or
/// a broker with `auth_mode: none`) does not need it.
pub const AUTH_TOKEN: u64 = 8;
/// The connection is another member of the cluster. The server grants it only to a client
/// certificate carrying the peer identity (`starling:peer`, signed by the cluster CA), or to
/// anyone when the broker runs with `auth_mode: none` and no client CA.
pub const PEER: u64 = 16;

/// `Subscribe` may carry the optional trailing `start_time_ms`: start at the first event
/// stamped at or after a time ([`StartAt::TimeMs`](crate::StartAt::TimeMs)). A broker that
/// does not grant it (an older one) would reject that field as trailing bytes, so a client
/// sends it only when granted.
pub const SUBSCRIBE_FROM_TIME: u64 = 32;

/// A `Subscribe` topic holding `*` or `>` as a whole token is a pattern of the access pattern
/// language (`orders.*`, `orders.>`): the subscription receives every matching topic's events,
/// each `EventBatch` preceded by a [`BatchTopic`](crate::BatchTopic) naming its topic. Without
/// the bit such a topic is a literal name, as it always was. Asked for by plain and routing
/// clients, never by a peer (a broker's upstream subscriptions name single topics).
pub const WILDCARDS: u64 = 64;

/// Messages may carry headers: `Publish` and `PublishBatch` may end with their header lists,
/// and a subscriber receives the headers of a batch's messages in an
/// [`EventHeaders`](crate::EventHeaders) frame right before the `EventBatch` (a batch without
/// headers has none). A connection not granted it never receives `EventHeaders`, and its
/// subscribers get the payloads alone. Asked for by every role: a peer's forwarded publishes
/// and relayed batches carry their headers.
pub const HEADERS: u64 = 128;

/// Request/reply: a `Publish` whose headers hold [`REPLY_TO`](crate::REPLY_TO) is a request,
/// and the broker answers it with `Error` (`NoResponders`) when its topic has no subscriber
/// at that moment, instead of dropping it unseen. Its reply inbox (a topic under
/// [`INBOX_PREFIX`](crate::INBOX_PREFIX)) follows the inbox rules of docs/subjects.md. Needs
/// `HEADERS`; asked for by plain clients, never by a peer. A connection not granted it gets no
/// `NoResponders` (its request simply finds nobody, and times out).
pub const REQUEST: u64 = 256;

/// Queue groups: a `Subscribe` may end with a group name (see
/// [`Subscribe`](crate::Subscribe)); the subscription then joins that group of its topic (or
/// pattern), and each event goes to one member of the group (docs/queue-groups.md). A
/// connection not granted it never sends the field. Asked for by plain and routing clients,
/// never by a peer.
pub const QUEUE_GROUPS: u64 = 512;

/// Durable consumers (docs/consumers.md): a stream may open with
/// [`ConsumerOpen`](crate::ConsumerOpen) to join a named consumer of a durable topic, and
/// then carries `ConsumerMessage` deliveries and the member's `ConsumerAck`s. Asked for by
/// plain and routing clients, never by a peer.
pub const CONSUMERS: u64 = 1024;

/// Publish de-duplication: a message whose headers hold [`MSG_ID`](crate::MSG_ID) carries a
/// publisher-chosen id, and its topic drops a repeat of an id it saw within its window
/// (`dedup_window_ms`, `dedup_max_ids`), answering the repeat with the original's ack once
/// the original reached the ack level (docs/protocol.md, *De-duplication*). Needs `HEADERS`;
/// asked for by every role (a peer forwards publishes with their ids to the topic's owner). A
/// client sends a message id only when granted it: a broker without it would deliver the
/// repeat.
pub const DEDUP: u64 = 2048;

/// Every feature bit defined by protocol version 2.
pub const ALL: u64 = BATCH_PUBLISH
    | CACHE
    | CLUSTER
    | AUTH_TOKEN
    | PEER
    | SUBSCRIBE_FROM_TIME
    | WILDCARDS
    | HEADERS
    | REQUEST
    | QUEUE_GROUPS
    | CONSUMERS
    | DEDUP;

/// Features every connection asks for, whatever its role.
pub const BASE: u64 = BATCH_PUBLISH | CACHE | SUBSCRIBE_FROM_TIME;

/// What a connection is to the broker, as its feature bits say. The SDK asks for
/// [`Role::requested`]; the broker reads the role back from what it granted with
/// [`Role::from_granted`] (after checking the certificate of a peer). This is the one mapping
/// between roles and bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// An ordinary client: requests for other members' topics and keys are forwarded.
    Plain,
    /// A routing SDK (asked for [`CLUSTER`]): a subscription or cache request for a topic or
    /// key owned elsewhere is answered with `Moved`; publishes are still forwarded.
    Routed,
    /// Another member, authenticated by its peer certificate ([`PEER`]): served where it
    /// arrives, never forwarded.
    Peer,
}

impl Role {
    /// The feature bits a connection of this role asks for in its `Hello`.
    pub const fn requested(self) -> u64 {
        match self {
            Role::Plain => BASE | WILDCARDS | HEADERS | REQUEST | QUEUE_GROUPS | CONSUMERS | DEDUP,
            Role::Routed => {
                BASE | CLUSTER | WILDCARDS | HEADERS | REQUEST | QUEUE_GROUPS | CONSUMERS | DEDUP
            }
            // Headers and message ids: a forwarded publish and a relayed batch keep them.
            // Patterns and groups: a member feeds its clients' wildcard subscriptions, reply
            // inboxes and pattern groups from every other member (`cluster::fan_in`). Requests:
            // a forwarded request is answered `NoResponders` by the topic's owner.
            Role::Peer => BASE | PEER | HEADERS | DEDUP | WILDCARDS | QUEUE_GROUPS | REQUEST,
        }
    }

    /// The role of a connection that was granted `granted`. A peer's bit wins over the
    /// routing bit: a member is never redirected.
    pub const fn from_granted(granted: u64) -> Role {
        if granted & PEER != 0 {
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
