//! Publish frames: `Publish` and `PublishBatch` (client → server) and
//! `PublishAck` (server → client), plus the [`AckMode`] they carry, and what a
//! decoded publish costs in memory ([`decoded_bytes`]).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::messages::headers::{
    Header, IndexedHeaders, headers_len, indexed_headers_len, put_headers, put_indexed,
    read_headers, read_indexed,
};
use crate::wire::{
    DecodeBody, EncodeBody, Reader, blob_len, blobs_len, put_blob, put_blobs, put_str, str_len,
};

/// What each payload of a decoded publish costs in memory besides its own bytes:
/// its handle in the decoded request (a `Bytes`, 32 bytes on 64-bit targets)
/// and its 4-byte length prefix, which stays in the received frame the payload
/// is a slice of. An empty payload is 4 bytes on the wire and this many in memory.
pub const DECODED_ITEM_BYTES: usize = std::mem::size_of::<Bytes>() + 4;

/// What a decoded publish of `items` payloads of `payload_bytes` bytes in all
/// holds in memory: the payloads and [`DECODED_ITEM_BYTES`] per payload.
/// Saturating, so a hostile sum cannot wrap around to a small charge.
pub const fn decoded_bytes(payload_bytes: usize, items: usize) -> usize {
    payload_bytes.saturating_add(items.saturating_mul(DECODED_ITEM_BYTES))
}

/// Whether the publisher wants a [`PublishAck`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum AckMode {
    /// Fire and forget: no `PublishAck` is sent (errors still are).
    #[default]
    None = 0,
    /// The broker answers with `PublishAck`: on receipt, or, when the
    /// broker's `ack_level` is `committed` or `persisted`, once the messages are enqueued to
    /// every current subscriber.
    Ack = 1,
}

impl AckMode {
    /// The wire value.
    pub const fn as_u8(self) -> u8 {
        self as u8
    }

    /// Parses a wire value; `None` for values other than 0 and 1.
    pub const fn from_u8(value: u8) -> Option<AckMode> {
        match value {
            0 => Some(AckMode::None),
            1 => Some(AckMode::Ack),
            _ => None,
        }
    }
}

fn read_ack(r: &mut Reader) -> Result<AckMode, DecodeError> {
    let value = r.u8()?;
    AckMode::from_u8(value).ok_or_else(|| r.malformed("ack mode is neither 0 nor 1"))
}

/// One message for one topic.
///
/// Layout: `request_id u64 | ack u8 | topic str | payload blob | [header list]`. The trailing
/// header list (see [`headers`](crate::messages::headers)) is present only when the message has
/// headers, which a client sends only to a broker that granted
/// [`HEADERS`](crate::features::HEADERS): an older broker rejects it as trailing bytes. Without
/// it the layout is the one protocol version 2 started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publish {
    /// Echoed in the `PublishAck` or `Error`.
    pub request_id: u64,
    /// Acknowledgement wanted.
    pub ack: AckMode,
    /// Destination topic (see [`validate_topic`](crate::validate_topic)).
    pub topic: String,
    /// Opaque message body.
    pub payload: Bytes,
    /// The message's headers; empty for none (then not encoded at all).
    pub headers: Vec<Header>,
}

impl EncodeBody for Publish {
    fn body_len(&self) -> usize {
        let headers = if self.headers.is_empty() {
            0
        } else {
            headers_len(&self.headers)
        };
        8 + 1 + str_len(&self.topic) + blob_len(&self.payload) + headers
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u8(self.ack.as_u8());
        put_str(dst, &self.topic);
        put_blob(dst, &self.payload);
        if !self.headers.is_empty() {
            put_headers(dst, &self.headers);
        }
    }
}

impl DecodeBody for Publish {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let ack = read_ack(r)?;
        let topic = r.topic()?;
        let payload = r.blob()?;
        let headers = if r.at_end() {
            Vec::new()
        } else {
            read_headers(r)?
        };
        Ok(Publish {
            request_id,
            ack,
            topic,
            payload,
            headers,
        })
    }
}

/// Several messages for one topic, published in order.
///
/// Layout: `request_id u64 | ack u8 | topic str | count u32 | count × blob | [indexed list]`.
/// The trailing indexed header list (see [`headers`](crate::messages::headers)) is present only
/// when at least one message has headers (sent only to a broker that granted
/// [`HEADERS`](crate::features::HEADERS)); every index in it is below `count`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishBatch {
    /// Echoed in the `PublishAck` or `Error`.
    pub request_id: u64,
    /// Acknowledgement wanted (one ack covers the whole batch).
    pub ack: AckMode,
    /// Destination topic (see [`validate_topic`](crate::validate_topic)).
    pub topic: String,
    /// Message bodies, in publish order.
    pub payloads: Vec<Bytes>,
    /// The headers of the messages that have any, by strictly increasing index into
    /// `payloads`; empty when none has (then not encoded at all).
    pub headers: Vec<IndexedHeaders>,
}

impl EncodeBody for PublishBatch {
    fn body_len(&self) -> usize {
        let headers = if self.headers.is_empty() {
            0
        } else {
            indexed_headers_len(&self.headers)
        };
        8 + 1 + str_len(&self.topic) + blobs_len(&self.payloads) + headers
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u8(self.ack.as_u8());
        put_str(dst, &self.topic);
        put_blobs(dst, &self.payloads);
        if !self.headers.is_empty() {
            put_indexed(dst, &self.headers);
        }
    }
}

impl DecodeBody for PublishBatch {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let ack = read_ack(r)?;
        let topic = r.topic()?;
        // Checked against the bytes left and the decoder's item cap before the
        // vector of handles (`DECODED_ITEM_BYTES` each) is allocated.
        let count = r.capped_count(4)?;
        let mut payloads = Vec::with_capacity(count);
        for _ in 0..count {
            payloads.push(r.blob()?);
        }
        let headers = if r.at_end() {
            Vec::new()
        } else {
            let entries = read_indexed(r)?;
            if entries.is_empty() {
                return Err(r.malformed("header list is empty"));
            }
            // Indices increase strictly, so the last one bounds them all.
            if entries
                .last()
                .is_some_and(|e| usize::try_from(e.index).map_or(true, |i| i >= count))
            {
                return Err(r.malformed("header index past the last payload"));
            }
            entries
        };
        Ok(PublishBatch {
            request_id,
            ack,
            topic,
            payloads,
            headers,
        })
    }
}

/// Acknowledgement of a `Publish` (count 1) or `PublishBatch` (count =
/// number of payloads accepted).
///
/// Layout: `request_id u64 | count u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PublishAck {
    /// The acknowledged request.
    pub request_id: u64,
    /// Number of messages accepted.
    pub count: u32,
}

impl EncodeBody for PublishAck {
    fn body_len(&self) -> usize {
        8 + 4
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u32(self.count);
    }
}

impl DecodeBody for PublishAck {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(PublishAck {
            request_id: r.u64()?,
            count: r.u32()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    #[test]
    fn publish_layout() {
        let frame = Frame::Publish(Publish {
            request_id: 5,
            ack: AckMode::Ack,
            topic: "t".into(),
            payload: Bytes::from_static(b"hi"),
            headers: Vec::new(),
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 5, 1, 0, 1, b't', 0, 0, 0, 2, b'h', b'i'
            ]
        );
    }

    #[test]
    fn publish_rejects_bad_ack_and_topic() {
        let bad_ack = [0, 0, 0, 0, 0, 0, 0, 5, 2, 0, 1, b't', 0, 0, 0, 0];
        assert_eq!(
            decode(FrameKind::Publish, &bad_ack),
            malformed(FrameKind::Publish, "ack mode is neither 0 nor 1")
        );
        let empty_topic = [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            decode(FrameKind::Publish, &empty_topic),
            malformed(FrameKind::Publish, "topic is empty")
        );
        let spaced = [
            0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 3, b'a', b' ', b'b', 0, 0, 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::Publish, &spaced),
            malformed(FrameKind::Publish, "topic contains whitespace")
        );
    }

    #[test]
    fn publish_rejects_trailing_bytes() {
        // A byte after the payload starts a header list, here a cut one.
        let payload = [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, b't', 0, 0, 0, 0, 0xaa];
        assert_eq!(
            decode(FrameKind::Publish, &payload),
            malformed(FrameKind::Publish, "truncated integer field")
        );
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b'k', 0, 0, 0xaa,
        ];
        assert_eq!(
            decode(FrameKind::Publish, &payload),
            malformed(FrameKind::Publish, "trailing bytes after last field")
        );
    }

    #[test]
    fn publish_batch_layout() {
        let frame = Frame::PublishBatch(PublishBatch {
            request_id: 1,
            ack: AckMode::None,
            topic: "t".into(),
            payloads: vec![Bytes::from_static(b"a"), Bytes::new()],
            headers: Vec::new(),
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0, 0, 0, 2, 0, 0, 0, 1, b'a', 0, 0, 0, 0
            ]
        );
    }

    #[test]
    fn publish_batch_count_bounded_by_remaining_bytes() {
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::PublishBatch, &payload),
            malformed(
                FrameKind::PublishBatch,
                "element count exceeds remaining bytes"
            )
        );
    }

    #[test]
    fn publish_batch_over_the_item_cap_is_refused_before_allocating() {
        let frame = Frame::PublishBatch(PublishBatch {
            request_id: 1,
            ack: AckMode::None,
            topic: "t".into(),
            payloads: vec![Bytes::new(); 3],
            headers: Vec::new(),
        });
        let mut capped = BytesMut::from(&frame.to_bytes()[..]);
        let dec = crate::FrameDecoder::new(1 << 10);
        assert_eq!(
            dec.with_max_batch_items(2).decode(&mut capped.clone()),
            Err(DecodeError::TooManyItems {
                frame: "publish_batch",
                count: 3,
                max: 2
            })
        );
        assert_eq!(
            dec.with_max_batch_items(3).decode(&mut capped),
            Ok(Some(frame))
        );
    }

    #[test]
    fn decoded_bytes_count_each_item_and_saturate() {
        assert_eq!(DECODED_ITEM_BYTES, 36);
        assert_eq!(decoded_bytes(10, 0), 10);
        assert_eq!(decoded_bytes(0, 1_000_000), 36_000_000);
        assert_eq!(decoded_bytes(usize::MAX, 1), usize::MAX);
        assert_eq!(decoded_bytes(1, usize::MAX), usize::MAX);
    }

    #[test]
    fn publish_with_headers_layout() {
        let frame = Frame::Publish(Publish {
            request_id: 5,
            ack: AckMode::None,
            topic: "t".into(),
            payload: Bytes::new(),
            headers: vec![Header::new("k", "v")],
        });
        assert_eq!(
            round_trip(&frame),
            [
                0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b'k', 0, 1,
                b'v'
            ]
        );
        // A header list that is present must hold a header.
        let empty = [
            0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::Publish, &empty),
            malformed(FrameKind::Publish, "header list is empty")
        );
    }

    #[test]
    fn publish_batch_headers_index_its_payloads() {
        let frame = Frame::PublishBatch(PublishBatch {
            request_id: 1,
            ack: AckMode::None,
            topic: "t".into(),
            payloads: vec![Bytes::new(), Bytes::new()],
            headers: vec![IndexedHeaders {
                index: 1,
                headers: vec![Header::new("k", "")],
            }],
        });
        let payload = round_trip(&frame);
        assert_eq!(
            payload[24..],
            [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'k', 0, 0]
        );
        let mut past = payload.clone();
        past[31] = 2; // index 2 of 2 payloads
        assert_eq!(
            decode(FrameKind::PublishBatch, &past),
            malformed(
                FrameKind::PublishBatch,
                "header index past the last payload"
            )
        );
        let mut none = payload[..24].to_vec();
        none.extend([0, 0, 0, 0]);
        assert_eq!(
            decode(FrameKind::PublishBatch, &none),
            malformed(FrameKind::PublishBatch, "header list is empty")
        );
    }

    #[test]
    fn publish_ack_layout() {
        let payload = round_trip(&Frame::PublishAck(PublishAck {
            request_id: 2,
            count: 3,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 3]);
    }

    #[test]
    fn ack_mode_values() {
        assert_eq!(AckMode::from_u8(0), Some(AckMode::None));
        assert_eq!(AckMode::from_u8(1), Some(AckMode::Ack));
        assert_eq!(AckMode::from_u8(2), None);
        assert_eq!(AckMode::default(), AckMode::None);
    }
}
