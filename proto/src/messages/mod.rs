//! Frame bodies: one struct per frame, grouped by area, each implementing
//! its own payload layout. The header is handled by [`crate::frame`].
//!
//! | module | frames |
//! | --- | --- |
//! | [`handshake`] | `Hello`, `HelloOk` |
//! | [`publish`] | `Publish`, `PublishBatch`, `PublishAck` (+ [`AckMode`]) |
//! | [`subscribe`] | `Subscribe` (+ [`StartAt`]), `SubscribeOk`, `Unsubscribe` |
//! | [`events`] | `EventBatch`, `BatchTopic` |
//! | [`headers`] | `EventHeaders` (+ [`Header`], [`IndexedHeaders`], the header lists of `Publish` and `PublishBatch`) |
//! | [`cache`] | `CachePut`, `CacheGet`, `CacheDelete`, `CacheValue`, `CacheOk` |
//! | [`error_frame`] | `Error` |
//! | [`cluster`] | `Moved`, `ClusterInfoRequest`, `ClusterInfo` (+ [`Member`]) |
//! | [`log`] | `LogRead`, `LogChunk`, `LogClaim`, `LogClaimed` (peers only) |
//! | [`replica`] | `ReplicaRpc` (peers only) |
//! | [`ping`] | `Ping`, `Pong` |
//! | [`consumer`] | `ConsumerOpen` (+ [`ConsumerStart`]), `ConsumerOk`, `ConsumerMessage`, `ConsumerAck` (+ [`ConsumerAckOp`]) |

pub mod cache;
pub mod cluster;
pub mod consumer;
pub mod error_frame;
pub mod events;
pub mod handshake;
pub mod headers;
pub mod log;
pub mod ping;
pub mod publish;
pub mod replica;
pub mod subscribe;

#[cfg(test)]
mod test_util;

pub use cache::{CacheDelete, CacheGet, CacheOk, CachePut, CacheValue};
pub use cluster::{ClusterInfo, ClusterInfoRequest, Member, Moved};
pub use consumer::{
    BACKOFF_DELAY, ConsumerAck, ConsumerAckOp, ConsumerMessage, ConsumerOk, ConsumerOpen,
    ConsumerStart, MAX_BACKOFF_STEPS, MAX_CONSUMER_LEN, validate_consumer,
};
pub use error_frame::ErrorFrame;
pub use events::{BatchTopic, EventBatch};
pub use handshake::{Hello, HelloOk};
pub use headers::{EventHeaders, Header, IndexedHeaders, headers_len, indexed_headers_len};
pub use log::{LogChunk, LogClaim, LogClaimed, LogRead};
pub use ping::Ping;
pub use publish::{AckMode, DECODED_ITEM_BYTES, Publish, PublishAck, PublishBatch, decoded_bytes};
pub use replica::ReplicaRpc;
pub use subscribe::{
    MAX_GROUP_LEN, NO_START_TIME, StartAt, Subscribe, SubscribeOk, Unsubscribe, validate_group,
};
