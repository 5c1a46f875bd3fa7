//! `EventBatch` (server → subscriber): consecutive events of one topic; and `BatchTopic`,
//! which names the topic of the next `EventBatch` on a wildcard subscription.
//!
//! The body codec is exposed as free functions over borrowed events so that
//! [`encode_event_batch`](crate::encode_event_batch) can encode straight
//! from the broker's buffers without building an `EventBatch` value.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::wire::{DecodeBody, EncodeBody, Reader, blobs_len, put_blobs, put_str, str_len};

/// Events for one subscription. Event `i` has position `(stream, first_seq + i)` (see
/// [`Position`](crate::Position)).
///
/// Layout: `stream u64 | first_seq u64 | count u32 | count × blob`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventBatch {
    /// The stream the events belong to (the topic owner's stream id; nonzero from a broker).
    pub stream: u64,
    /// Sequence number of the first event in the batch, within `stream`.
    pub first_seq: u64,
    /// Event payloads, in sequence order.
    pub events: Vec<Bytes>,
}

/// Payload length of an `EventBatch` carrying `events`.
pub(crate) fn event_batch_body_len(events: &[Bytes]) -> usize {
    16 + blobs_len(events)
}

/// Writes the payload of an `EventBatch` (no header).
pub(crate) fn put_event_batch_body(
    stream: u64,
    first_seq: u64,
    events: &[Bytes],
    dst: &mut BytesMut,
) {
    dst.put_u64(stream);
    dst.put_u64(first_seq);
    put_blobs(dst, events);
}

impl EncodeBody for EventBatch {
    fn body_len(&self) -> usize {
        event_batch_body_len(&self.events)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        put_event_batch_body(self.stream, self.first_seq, &self.events, dst);
    }
}

impl DecodeBody for EventBatch {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let stream = r.u64()?;
        let first_seq = r.u64()?;
        let count = r.count(4)?;
        let mut events = Vec::with_capacity(count);
        for _ in 0..count {
            events.push(r.blob()?);
        }
        Ok(EventBatch {
            stream,
            first_seq,
            events,
        })
    }
}

/// The topic the next `EventBatch` on this subscription stream comes from. Sent only on a
/// wildcard subscription (a `Subscribe` whose topic is a pattern, which needs the
/// [`WILDCARDS`](crate::features::WILDCARDS) feature), immediately before every
/// `EventBatch`; a subscription to one topic never carries it.
///
/// Layout: `topic str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchTopic {
    /// The topic (see [`validate_topic`](crate::validate_topic)).
    pub topic: String,
}

impl EncodeBody for BatchTopic {
    fn body_len(&self) -> usize {
        str_len(&self.topic)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        put_str(dst, &self.topic);
    }
}

impl DecodeBody for BatchTopic {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(BatchTopic { topic: r.topic()? })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    #[test]
    fn layout() {
        let frame = Frame::EventBatch(EventBatch {
            stream: 5,
            first_seq: 10,
            events: vec![Bytes::from_static(b"x"), Bytes::from_static(b"yz")],
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 2, 0, 0, 0, 1, b'x', 0,
                0, 0, 2, b'y', b'z'
            ]
        );
    }

    #[test]
    fn empty_batch_round_trips() {
        let payload = round_trip(&Frame::EventBatch(EventBatch {
            stream: 0,
            first_seq: 0,
            events: vec![],
        }));
        assert_eq!(payload, [0; 20]);
    }

    #[test]
    fn event_overrunning_payload() {
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 9, 1, 2,
        ];
        assert_eq!(
            decode(FrameKind::EventBatch, &payload),
            malformed(FrameKind::EventBatch, "byte blob overruns payload")
        );
    }

    #[test]
    fn huge_count() {
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff,
        ];
        assert_eq!(
            decode(FrameKind::EventBatch, &payload),
            malformed(
                FrameKind::EventBatch,
                "element count exceeds remaining bytes"
            )
        );
    }
}
