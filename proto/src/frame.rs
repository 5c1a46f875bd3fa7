//! [`Frame`]: every message of the protocol, with the encoder
//! ([`Frame::encode`]) and the payload dispatch used by the decoder.

use bytes::{Bytes, BytesMut};

use crate::error::DecodeError;
use crate::header::put_header;
use crate::kind::FrameKind;
use crate::limits::HEADER_LEN;
use crate::messages::{
    BatchTopic, CacheDelete, CacheGet, CacheOk, CachePut, CacheValue, ClusterInfo,
    ClusterInfoRequest, ConsumerAck, ConsumerMessage, ConsumerOk, ConsumerOpen, ErrorFrame,
    EventBatch, EventHeaders, Hello, HelloOk, LogChunk, LogClaim, LogClaimed, LogRead, Moved, Ping,
    Publish, PublishAck, PublishBatch, ReplicaRpc, Subscribe, SubscribeOk, Unsubscribe,
};
use crate::wire::{DecodeBody, EncodeBody, Reader};

/// One protocol frame. See `docs/protocol.md` for which side sends which
/// frame on which stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Client handshake (type 0x01).
    Hello(Hello),
    /// Server handshake acceptance (0x02).
    HelloOk(HelloOk),
    /// Publish one message (0x10).
    Publish(Publish),
    /// Publish several messages to one topic (0x11).
    PublishBatch(PublishBatch),
    /// Publish acknowledgement (0x12).
    PublishAck(PublishAck),
    /// Open a subscription (0x20).
    Subscribe(Subscribe),
    /// Subscription accepted (0x21).
    SubscribeOk(SubscribeOk),
    /// Close a subscription (0x22).
    Unsubscribe(Unsubscribe),
    /// Events for a subscription (0x23).
    EventBatch(EventBatch),
    /// The topic of the next `EventBatch` on a wildcard subscription (0x24).
    BatchTopic(BatchTopic),
    /// The headers of the next `EventBatch`'s messages (0x25).
    EventHeaders(EventHeaders),
    /// Cache write (0x30).
    CachePut(CachePut),
    /// Cache read (0x31).
    CacheGet(CacheGet),
    /// Cache delete (0x32).
    CacheDelete(CacheDelete),
    /// Cache read result (0x33).
    CacheValue(CacheValue),
    /// Cache write/delete result (0x34).
    CacheOk(CacheOk),
    /// Error report (0x40).
    Error(ErrorFrame),
    /// Cluster redirect, reserved (0x50).
    Moved(Moved),
    /// Cluster membership request, reserved (0x51).
    ClusterInfoRequest(ClusterInfoRequest),
    /// Cluster membership, reserved (0x52).
    ClusterInfo(ClusterInfo),
    /// Durable log read, peers only (0x53).
    LogRead(LogRead),
    /// Durable log page, peers only (0x54).
    LogChunk(LogChunk),
    /// Durable log claim, peers only (0x55).
    LogClaim(LogClaim),
    /// Durable log claim answered, peers only (0x56).
    LogClaimed(LogClaimed),
    /// A replicated topic's Raft request or reply, peers only (0x58).
    ReplicaRpc(ReplicaRpc),
    /// Liveness probe (0x60).
    Ping(Ping),
    /// Liveness answer (0x61).
    Pong(Ping),
    /// Join a durable consumer (0x70).
    ConsumerOpen(ConsumerOpen),
    /// Durable consumer member accepted (0x71).
    ConsumerOk(ConsumerOk),
    /// One delivery of a durable consumer (0x72).
    ConsumerMessage(ConsumerMessage),
    /// A member's answer to a delivery (0x73).
    ConsumerAck(ConsumerAck),
}

impl Frame {
    /// The frame's type.
    pub fn kind(&self) -> FrameKind {
        match self {
            Frame::Hello(_) => FrameKind::Hello,
            Frame::HelloOk(_) => FrameKind::HelloOk,
            Frame::Publish(_) => FrameKind::Publish,
            Frame::PublishBatch(_) => FrameKind::PublishBatch,
            Frame::PublishAck(_) => FrameKind::PublishAck,
            Frame::Subscribe(_) => FrameKind::Subscribe,
            Frame::SubscribeOk(_) => FrameKind::SubscribeOk,
            Frame::Unsubscribe(_) => FrameKind::Unsubscribe,
            Frame::EventBatch(_) => FrameKind::EventBatch,
            Frame::BatchTopic(_) => FrameKind::BatchTopic,
            Frame::EventHeaders(_) => FrameKind::EventHeaders,
            Frame::CachePut(_) => FrameKind::CachePut,
            Frame::CacheGet(_) => FrameKind::CacheGet,
            Frame::CacheDelete(_) => FrameKind::CacheDelete,
            Frame::CacheValue(_) => FrameKind::CacheValue,
            Frame::CacheOk(_) => FrameKind::CacheOk,
            Frame::Error(_) => FrameKind::Error,
            Frame::Moved(_) => FrameKind::Moved,
            Frame::ClusterInfoRequest(_) => FrameKind::ClusterInfoRequest,
            Frame::ClusterInfo(_) => FrameKind::ClusterInfo,
            Frame::LogRead(_) => FrameKind::LogRead,
            Frame::LogChunk(_) => FrameKind::LogChunk,
            Frame::LogClaim(_) => FrameKind::LogClaim,
            Frame::LogClaimed(_) => FrameKind::LogClaimed,
            Frame::ReplicaRpc(_) => FrameKind::ReplicaRpc,
            Frame::Ping(_) => FrameKind::Ping,
            Frame::Pong(_) => FrameKind::Pong,
            Frame::ConsumerOpen(_) => FrameKind::ConsumerOpen,
            Frame::ConsumerOk(_) => FrameKind::ConsumerOk,
            Frame::ConsumerMessage(_) => FrameKind::ConsumerMessage,
            Frame::ConsumerAck(_) => FrameKind::ConsumerAck,
        }
    }

    /// Short snake_case name of the frame's type, for logs and metrics.
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    fn body(&self) -> &dyn EncodeBody {
        match self {
            Frame::Hello(b) => b,
            Frame::HelloOk(b) => b,
            Frame::Publish(b) => b,
            Frame::PublishBatch(b) => b,
            Frame::PublishAck(b) => b,
            Frame::Subscribe(b) => b,
            Frame::SubscribeOk(b) => b,
            Frame::Unsubscribe(b) => b,
            Frame::EventBatch(b) => b,
            Frame::BatchTopic(b) => b,
            Frame::EventHeaders(b) => b,
            Frame::CachePut(b) => b,
            Frame::CacheGet(b) => b,
            Frame::CacheDelete(b) => b,
            Frame::CacheValue(b) => b,
            Frame::CacheOk(b) => b,
            Frame::Error(b) => b,
            Frame::Moved(b) => b,
            Frame::ClusterInfoRequest(b) => b,
            Frame::ClusterInfo(b) => b,
            Frame::LogRead(b) => b,
            Frame::LogChunk(b) => b,
            Frame::LogClaim(b) => b,
            Frame::LogClaimed(b) => b,
            Frame::ReplicaRpc(b) => b,
            Frame::Ping(b) | Frame::Pong(b) => b,
            Frame::ConsumerOpen(b) => b,
            Frame::ConsumerOk(b) => b,
            Frame::ConsumerMessage(b) => b,
            Frame::ConsumerAck(b) => b,
        }
    }

    /// Length of the payload alone (the header's `payload_len`).
    pub fn payload_len(&self) -> usize {
        self.body().body_len()
    }

    /// Total encoded size, header included. Compare the payload part
    /// ([`Frame::payload_len`]) with the peer's `max_frame_bytes` before
    /// sending.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.payload_len()
    }

    /// Appends the encoded frame (header and payload) to `dst`.
    ///
    /// Never fails or panics. Text and byte fields longer than their length
    /// prefix allows are truncated; validate topics and keys first.
    pub fn encode(&self, dst: &mut BytesMut) {
        let body = self.body();
        let payload_len = body.body_len();
        dst.reserve(HEADER_LEN + payload_len);
        put_header(dst, self.kind(), payload_len);
        body.encode_body(dst);
    }

    /// Encodes the frame into a fresh buffer.
    pub fn to_bytes(&self) -> Bytes {
        let mut dst = BytesMut::with_capacity(self.encoded_len());
        self.encode(&mut dst);
        dst.freeze()
    }
}

fn body<T: DecodeBody>(r: &mut Reader) -> Result<T, DecodeError> {
    T::decode_body(r)
}

/// Decodes a complete payload of a frame of `kind`, rejecting trailing bytes and batches of
/// more than `max_batch_items` items.
pub(crate) fn decode_payload(
    kind: FrameKind,
    payload: Bytes,
    max_batch_items: u32,
) -> Result<Frame, DecodeError> {
    let r = &mut Reader::new(kind.name(), payload).with_max_items(max_batch_items);
    let frame = match kind {
        FrameKind::Hello => Frame::Hello(body(r)?),
        FrameKind::HelloOk => Frame::HelloOk(body(r)?),
        FrameKind::Publish => Frame::Publish(body(r)?),
        FrameKind::PublishBatch => Frame::PublishBatch(body(r)?),
        FrameKind::PublishAck => Frame::PublishAck(body(r)?),
        FrameKind::Subscribe => Frame::Subscribe(body(r)?),
        FrameKind::SubscribeOk => Frame::SubscribeOk(body(r)?),
        FrameKind::Unsubscribe => Frame::Unsubscribe(body(r)?),
        FrameKind::EventBatch => Frame::EventBatch(body(r)?),
        FrameKind::BatchTopic => Frame::BatchTopic(body(r)?),
        FrameKind::EventHeaders => Frame::EventHeaders(body(r)?),
        FrameKind::CachePut => Frame::CachePut(body(r)?),
        FrameKind::CacheGet => Frame::CacheGet(body(r)?),
        FrameKind::CacheDelete => Frame::CacheDelete(body(r)?),
        FrameKind::CacheValue => Frame::CacheValue(body(r)?),
        FrameKind::CacheOk => Frame::CacheOk(body(r)?),
        FrameKind::Error => Frame::Error(body(r)?),
        FrameKind::Moved => Frame::Moved(body(r)?),
        FrameKind::ClusterInfoRequest => Frame::ClusterInfoRequest(body(r)?),
        FrameKind::ClusterInfo => Frame::ClusterInfo(body(r)?),
        FrameKind::LogRead => Frame::LogRead(body(r)?),
        FrameKind::LogChunk => Frame::LogChunk(body(r)?),
        FrameKind::LogClaim => Frame::LogClaim(body(r)?),
        FrameKind::LogClaimed => Frame::LogClaimed(body(r)?),
        FrameKind::ReplicaRpc => Frame::ReplicaRpc(body(r)?),
        FrameKind::Ping => Frame::Ping(body(r)?),
        FrameKind::Pong => Frame::Pong(body(r)?),
        FrameKind::ConsumerOpen => Frame::ConsumerOpen(body(r)?),
        FrameKind::ConsumerOk => Frame::ConsumerOk(body(r)?),
        FrameKind::ConsumerMessage => Frame::ConsumerMessage(body(r)?),
        FrameKind::ConsumerAck => Frame::ConsumerAck(body(r)?),
    };
    r.finish()?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_written() {
        let bytes = Frame::Ping(Ping { nonce: 1 }).to_bytes();
        assert_eq!(
            &bytes[..],
            &[1, 0x60, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1]
        );
    }

    #[test]
    fn encode_appends() {
        let mut buf = BytesMut::from(&b"xy"[..]);
        Frame::Pong(Ping { nonce: 0 }).encode(&mut buf);
        assert_eq!(buf.len(), 2 + 16);
        assert_eq!(&buf[..3], &[b'x', b'y', 1]);
    }

    #[test]
    fn names_follow_kinds() {
        assert_eq!(Frame::Pong(Ping { nonce: 0 }).name(), "pong");
        assert_eq!(Frame::Pong(Ping { nonce: 0 }).kind(), FrameKind::Pong);
    }
}
