//! [`FrameKind`]: the stable frame type numbers carried in the header's
//! `frame_type` byte, and a short name per kind for logs and metrics.
//!
//! Numbers are grouped by area in the high nibble (0x0_ handshake,
//! 0x1_ publish, 0x2_ subscribe, 0x3_ cache, 0x4_ errors, 0x5_ cluster,
//! 0x6_ liveness, 0x70..=0x77 durable consumers). Once assigned, a number is never reused.

/// The type of a frame, as carried in the header's `frame_type` byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum FrameKind {
    /// Client handshake opening.
    Hello = 0x01,
    /// Server handshake acceptance.
    HelloOk = 0x02,
    /// One message published to a topic.
    Publish = 0x10,
    /// Several messages published to one topic.
    PublishBatch = 0x11,
    /// Acknowledgement of a publish.
    PublishAck = 0x12,
    /// Start of a subscription.
    Subscribe = 0x20,
    /// Subscription accepted.
    SubscribeOk = 0x21,
    /// End of a subscription.
    Unsubscribe = 0x22,
    /// Events delivered to a subscriber.
    EventBatch = 0x23,
    /// The topic of the next `EventBatch` on a wildcard subscription.
    BatchTopic = 0x24,
    /// The headers of the next `EventBatch`'s messages (`HEADERS` feature).
    EventHeaders = 0x25,
    /// Cache write.
    CachePut = 0x30,
    /// Cache read.
    CacheGet = 0x31,
    /// Cache delete.
    CacheDelete = 0x32,
    /// Cache read result.
    CacheValue = 0x33,
    /// Cache write/delete result.
    CacheOk = 0x34,
    /// Error report.
    Error = 0x40,
    /// Redirect to the owning cluster member (reserved).
    Moved = 0x50,
    /// Request for cluster membership (reserved).
    ClusterInfoRequest = 0x51,
    /// Cluster membership (reserved).
    ClusterInfo = 0x52,
    /// Durable log read (peers only).
    LogRead = 0x53,
    /// Durable log page (peers only).
    LogChunk = 0x54,
    /// Durable log claim (peers only).
    LogClaim = 0x55,
    /// Durable log claim answered (peers only).
    LogClaimed = 0x56,
    /// A replicated topic's Raft request or reply (peers only).
    ReplicaRpc = 0x58,
    /// Liveness probe.
    Ping = 0x60,
    /// Liveness probe answer.
    Pong = 0x61,
    /// Join a durable consumer as a member (`CONSUMERS` feature).
    ConsumerOpen = 0x70,
    /// Durable consumer member accepted.
    ConsumerOk = 0x71,
    /// One delivery of a durable consumer's message.
    ConsumerMessage = 0x72,
    /// A member's ack, nak, in-progress or term of a delivery.
    ConsumerAck = 0x73,
}

impl FrameKind {
    /// Every frame kind, in type-number order.
    pub const ALL: [FrameKind; 31] = [
        FrameKind::Hello,
        FrameKind::HelloOk,
        FrameKind::Publish,
        FrameKind::PublishBatch,
        FrameKind::PublishAck,
        FrameKind::Subscribe,
        FrameKind::SubscribeOk,
        FrameKind::Unsubscribe,
        FrameKind::EventBatch,
        FrameKind::BatchTopic,
        FrameKind::EventHeaders,
        FrameKind::CachePut,
        FrameKind::CacheGet,
        FrameKind::CacheDelete,
        FrameKind::CacheValue,
        FrameKind::CacheOk,
        FrameKind::Error,
        FrameKind::Moved,
        FrameKind::ClusterInfoRequest,
        FrameKind::ClusterInfo,
        FrameKind::LogRead,
        FrameKind::LogChunk,
        FrameKind::LogClaim,
        FrameKind::LogClaimed,
        FrameKind::ReplicaRpc,
        FrameKind::Ping,
        FrameKind::Pong,
        FrameKind::ConsumerOpen,
        FrameKind::ConsumerOk,
        FrameKind::ConsumerMessage,
        FrameKind::ConsumerAck,
    ];

    /// The wire number of this kind.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// Looks up a wire number; `None` for numbers no frame uses.
    pub const fn from_u8(value: u8) -> Option<FrameKind> {
        Some(match value {
            0x01 => FrameKind::Hello,
            0x02 => FrameKind::HelloOk,
            0x10 => FrameKind::Publish,
            0x11 => FrameKind::PublishBatch,
            0x12 => FrameKind::PublishAck,
            0x20 => FrameKind::Subscribe,
            0x21 => FrameKind::SubscribeOk,
            0x22 => FrameKind::Unsubscribe,
            0x23 => FrameKind::EventBatch,
            0x24 => FrameKind::BatchTopic,
            0x25 => FrameKind::EventHeaders,
            0x30 => FrameKind::CachePut,
            0x31 => FrameKind::CacheGet,
            0x32 => FrameKind::CacheDelete,
            0x33 => FrameKind::CacheValue,
            0x34 => FrameKind::CacheOk,
            0x40 => FrameKind::Error,
            0x50 => FrameKind::Moved,
            0x51 => FrameKind::ClusterInfoRequest,
            0x52 => FrameKind::ClusterInfo,
            0x53 => FrameKind::LogRead,
            0x54 => FrameKind::LogChunk,
            0x55 => FrameKind::LogClaim,
            0x56 => FrameKind::LogClaimed,
            0x58 => FrameKind::ReplicaRpc,
            0x60 => FrameKind::Ping,
            0x61 => FrameKind::Pong,
            0x70 => FrameKind::ConsumerOpen,
            0x71 => FrameKind::ConsumerOk,
            0x72 => FrameKind::ConsumerMessage,
            0x73 => FrameKind::ConsumerAck,
            _ => return None,
        })
    }

    /// A stable snake_case name, suitable as a log field or metric label.
    pub const fn name(self) -> &'static str {
        match self {
            FrameKind::Hello => "hello",
            FrameKind::HelloOk => "hello_ok",
            FrameKind::Publish => "publish",
            FrameKind::PublishBatch => "publish_batch",
            FrameKind::PublishAck => "publish_ack",
            FrameKind::Subscribe => "subscribe",
            FrameKind::SubscribeOk => "subscribe_ok",
            FrameKind::Unsubscribe => "unsubscribe",
            FrameKind::EventBatch => "event_batch",
            FrameKind::BatchTopic => "batch_topic",
            FrameKind::EventHeaders => "event_headers",
            FrameKind::CachePut => "cache_put",
            FrameKind::CacheGet => "cache_get",
            FrameKind::CacheDelete => "cache_delete",
            FrameKind::CacheValue => "cache_value",
            FrameKind::CacheOk => "cache_ok",
            FrameKind::Error => "error",
            FrameKind::Moved => "moved",
            FrameKind::ClusterInfoRequest => "cluster_info_request",
            FrameKind::ClusterInfo => "cluster_info",
            FrameKind::LogRead => "log_read",
            FrameKind::LogChunk => "log_chunk",
            FrameKind::LogClaim => "log_claim",
            FrameKind::LogClaimed => "log_claimed",
            FrameKind::ReplicaRpc => "replica_rpc",
            FrameKind::Ping => "ping",
            FrameKind::Pong => "pong",
            FrameKind::ConsumerOpen => "consumer_open",
            FrameKind::ConsumerOk => "consumer_ok",
            FrameKind::ConsumerMessage => "consumer_message",
            FrameKind::ConsumerAck => "consumer_ack",
        }
    }
}

impl std::fmt::Display for FrameKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for kind in FrameKind::ALL {
            assert_eq!(FrameKind::from_u8(kind.as_u8()), Some(kind));
            assert!(seen.insert(kind.as_u8()));
        }
        let known = (0..=u8::MAX)
            .filter(|n| FrameKind::from_u8(*n).is_some())
            .count();
        assert_eq!(known, FrameKind::ALL.len());
    }

    #[test]
    fn names_are_unique() {
        let names: std::collections::HashSet<_> = FrameKind::ALL.iter().map(|k| k.name()).collect();
        assert_eq!(names.len(), FrameKind::ALL.len());
    }
}
