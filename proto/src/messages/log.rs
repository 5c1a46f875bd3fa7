//! Durable log transfer between cluster members (peer connections only): `LogRead` asks a
//! member for the records of a durable topic's log from a position on, `LogChunk` answers with
//! one page of them; `LogClaim` tells a topic's new owner that the sender holds a log of the
//! topic, and `LogClaimed` answers once the owner has read it (see `docs/architecture.md`,
//! "Durable topics across owner changes").
//!
//! A `LogChunk` carries records in the storage's own record encoding (header with its
//! position, event count, timestamp and CRC, then the payload), concatenated; this crate
//! treats them as opaque bytes and the receiver decodes and checks them with the storage's
//! record decoder, so there is one record format, on disk and on the wire.

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::position::Position;
use crate::wire::{DecodeBody, EncodeBody, Reader, blob_len, put_blob, put_bool, put_str, str_len};

/// Encodes an optional position as `stream u64 | seq u64`, `(0, 0)` for none.
fn put_position(dst: &mut BytesMut, p: Option<Position>) {
    let (stream, seq) = p.map_or((0, 0), |p| (p.stream, p.seq));
    dst.put_u64(stream);
    dst.put_u64(seq);
}

/// Decodes what [`put_position`] wrote; a sequence number without a stream is malformed.
fn position(r: &mut Reader) -> Result<Option<Position>, DecodeError> {
    match (r.u64()?, r.u64()?) {
        (0, 0) => Ok(None),
        (0, _) => Err(r.malformed("seq set without a stream")),
        (stream, seq) => Ok(Some(Position { stream, seq })),
    }
}

/// Asks for the records of `topic`'s durable log from `from` on.
///
/// Layout: `request_id u64 | topic str | from_stream u64 | from_seq u64 | max_bytes u32`.
/// `from` is the next event the asker wants (one past the last it holds): the answer starts
/// with the record holding it, or the first after it, including every later stream;
/// `(0, 0)` asks for the whole log. `max_bytes` bounds the page (at least one record is sent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRead {
    /// Echoed in `LogChunk` or `Error`.
    pub request_id: u64,
    /// The durable topic.
    pub topic: String,
    /// Where to start; `None`: the whole log.
    pub from: Option<Position>,
    /// Most record bytes wanted in the answer.
    pub max_bytes: u32,
}

impl EncodeBody for LogRead {
    fn body_len(&self) -> usize {
        8 + str_len(&self.topic) + 16 + 4
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        put_position(dst, self.from);
        dst.put_u32(self.max_bytes);
    }
}

impl DecodeBody for LogRead {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LogRead {
            request_id: r.u64()?,
            topic: r.topic()?,
            from: position(r)?,
            max_bytes: r.u32()?,
        })
    }
}

/// One page of a durable log.
///
/// Layout: `request_id u64 | next_stream u64 | next_seq u64 | more bool | owner bool |
/// records blob`. `next` is one past the last record of the answering member's log
/// (`(0, 0)`: empty); `more` says the page stopped at `max_bytes` with records left; `owner`
/// says the answering member owns the topic in its own view (it has not seen the change yet,
/// so its log may still grow); `records` holds whole storage records, concatenated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogChunk {
    /// The `LogRead` being answered.
    pub request_id: u64,
    /// One past the last record of the answering member's log, `None` when it is empty.
    pub next: Option<Position>,
    /// Records remain after this page.
    pub more: bool,
    /// The answering member owns the topic in its own view (its log may still grow).
    pub owner: bool,
    /// Whole storage records, concatenated.
    pub records: Bytes,
}

impl EncodeBody for LogChunk {
    fn body_len(&self) -> usize {
        8 + 16 + 1 + 1 + blob_len(&self.records)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_position(dst, self.next);
        put_bool(dst, self.more);
        put_bool(dst, self.owner);
        put_blob(dst, &self.records);
    }
}

impl DecodeBody for LogChunk {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LogChunk {
            request_id: r.u64()?,
            next: position(r)?,
            more: r.bool()?,
            owner: r.bool()?,
            records: r.blob()?,
        })
    }
}

/// Tells `topic`'s owner that the sender (member `from_id` at `from_addr`) holds a log of the
/// topic and no longer owns it: the owner reads what it lacks from there, then answers.
///
/// Layout: `request_id u64 | topic str | from_id str | from_addr str`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogClaim {
    /// Echoed in `LogClaimed` or `Error`.
    pub request_id: u64,
    /// The durable topic.
    pub topic: String,
    /// The sender's member id.
    pub from_id: String,
    /// The sender's member address (`host:port`).
    pub from_addr: String,
}

impl EncodeBody for LogClaim {
    fn body_len(&self) -> usize {
        8 + str_len(&self.topic) + str_len(&self.from_id) + str_len(&self.from_addr)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        put_str(dst, &self.from_id);
        put_str(dst, &self.from_addr);
    }
}

impl DecodeBody for LogClaim {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LogClaim {
            request_id: r.u64()?,
            topic: r.topic()?,
            from_id: r.string()?,
            from_addr: r.string()?,
        })
    }
}

/// The owner has read the claimed log: its own log now ends at or past the sender's.
///
/// Layout: `request_id u64 | records u64` (records copied by this claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogClaimed {
    /// The `LogClaim` being answered.
    pub request_id: u64,
    /// Records the owner copied from the sender for this claim.
    pub records: u64,
}

impl EncodeBody for LogClaimed {
    fn body_len(&self) -> usize {
        16
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.records);
    }
}

impl DecodeBody for LogClaimed {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(LogClaimed {
            request_id: r.u64()?,
            records: r.u64()?,
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
    fn read_layout() {
        let payload = round_trip(&Frame::LogRead(LogRead {
            request_id: 1,
            topic: "t".into(),
            from: Some(Position { stream: 2, seq: 3 }),
            max_bytes: 4,
        }));
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3,
                0, 0, 0, 4
            ]
        );
    }

    #[test]
    fn chunk_layout() {
        let payload = round_trip(&Frame::LogChunk(LogChunk {
            request_id: 1,
            next: None,
            more: true,
            owner: false,
            records: Bytes::from_static(b"ab"),
        }));
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0,
                0, 2, b'a', b'b'
            ]
        );
    }

    #[test]
    fn claim_round_trips() {
        round_trip(&Frame::LogClaim(LogClaim {
            request_id: 7,
            topic: "orders.eu".into(),
            from_id: "b-1".into(),
            from_addr: "b-1.b:7400".into(),
        }));
        let payload = round_trip(&Frame::LogClaimed(LogClaimed {
            request_id: 7,
            records: 9,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9]);
    }

    #[test]
    fn seq_without_stream_is_malformed() {
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0,
            0, 0, 4,
        ];
        assert_eq!(
            decode(FrameKind::LogRead, &payload),
            malformed(FrameKind::LogRead, "seq set without a stream")
        );
    }

    #[test]
    fn topic_is_validated() {
        let payload = [
            0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert!(decode(FrameKind::LogRead, &payload).is_err());
    }
}
