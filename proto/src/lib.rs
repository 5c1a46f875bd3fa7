//! Starling wire protocol: frame types, the frame encoder, a bounded
//! streaming decoder and async read/write helpers.
//!
//! Every frame is an 8-byte header followed by a payload; the full
//! specification lives in `docs/protocol.md` at the workspace root.
//!
//! # Module map
//!
//! | module | job |
//! | --- | --- |
//! | [`limits`] | protocol version, header length and field limits |
//! | [`alpn`] | the ALPN names of event and cache connections |
//! | [`features`] | feature bits exchanged in the handshake, and the [`Role`] they encode |
//! | [`kind`] | [`FrameKind`]: frame type numbers and metric names |
//! | [`frame`] | the [`Frame`] enum, its encoder and payload dispatch |
//! | `header` (private) | reading and writing the 8-byte frame header |
//! | `wire` (private) | bounded payload reader and length-prefixed writers |
//! | [`messages`] | one struct per frame body, each with its own codec |
//! | [`error_code`] | [`ErrorCode`]: stable numeric error codes |
//! | [`validate`] | topic and key validation shared by encoder users and decoder |
//! | [`error`] | [`DecodeError`] |
//! | [`decoder`] | [`FrameDecoder`]: streaming, allocation-bounded decoding |
//! | [`event_batch`] | [`encode_event_batch`]: encode-once fan-out of events |
//! | [`io`] | [`read_frame`] / [`write_frame`] over tokio I/O traits |
//! | [`dedup`] | the reserved message id header ([`MSG_ID`]) and its bound |
//! | [`position`] | [`Position`] of an event in a topic's streams, [`SeenStreams`] |
//! | [`quic`] | below the frames: the default port, the UDP datagram sizes both ends accept |
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        clippy::indexing_slicing,
        clippy::unreachable,
        clippy::todo
    )
)]

pub mod alpn;
pub mod decoder;
pub mod dedup;
pub mod error;
pub mod error_code;
pub mod event_batch;
pub mod features;
pub mod frame;
mod header;
pub mod io;
pub mod kind;
pub mod limits;
pub mod messages;
pub mod position;
pub mod quic;
pub mod request;
pub mod validate;
mod wire;

pub use decoder::{FrameDecoder, GROW_FLOOR, peek_frame};
pub use dedup::{MAX_MSG_ID_LEN, MSG_ID, msg_id};
pub use error::DecodeError;
pub use error_code::ErrorCode;
pub use event_batch::{encode_event_batch, event_batch_encoded_len};
pub use features::Role;
pub use frame::Frame;
pub use io::{ReadError, read_frame, write_frame};
pub use kind::FrameKind;
pub use limits::{FRAMING_VERSION, HEADER_LEN, MAX_KEY_LEN, MAX_TOPIC_LEN, PROTOCOL_VERSION};
pub use messages::{
    AckMode, BatchTopic, CacheDelete, CacheGet, CacheOk, CachePut, CacheValue, ClusterInfo,
    ClusterInfoRequest, ConsumerAck, ConsumerAckOp, ConsumerMessage, ConsumerOk, ConsumerOpen,
    ConsumerStart, ErrorFrame, EventBatch, EventHeaders, Header, Hello, HelloOk, IndexedHeaders,
    LogChunk, LogClaim, LogClaimed, LogRead, MAX_GROUP_LEN, Member, Moved, NO_START_TIME, Ping,
    Publish, PublishAck, PublishBatch, ReplicaRpc, StartAt, Subscribe, SubscribeOk, Unsubscribe,
    validate_consumer, validate_group,
};
pub use messages::{BACKOFF_DELAY, MAX_BACKOFF_STEPS, MAX_CONSUMER_LEN};
pub use messages::{DECODED_ITEM_BYTES, decoded_bytes, headers_len, indexed_headers_len};
pub use position::{Position, SeenStreams};
pub use quic::DEFAULT_QUIC_PORT;
pub use request::{INBOX_PREFIX, REPLY_TO};
pub use validate::{is_subscription_pattern, validate_header_name, validate_key, validate_topic};
