//! Durable consumer frames (the [`CONSUMERS`](crate::features::CONSUMERS) feature,
//! docs/consumers.md): `ConsumerOpen` (member → broker, the first frame of its stream),
//! `ConsumerOk` (broker → member), `ConsumerMessage` (broker → member, one delivery) and
//! `ConsumerAck` (member → broker: ack, nak, in progress or term of one delivery).

use bytes::{BufMut, Bytes, BytesMut};

use crate::error::DecodeError;
use crate::messages::headers::{Header, headers_len, put_headers, read_headers};
use crate::position::Position;
use crate::wire::{DecodeBody, EncodeBody, Reader, blob_len, put_blob, put_str, str_len};

/// Longest consumer name, in bytes.
pub const MAX_CONSUMER_LEN: usize = 64;

/// Most entries of a consumer's backoff schedule.
pub const MAX_BACKOFF_STEPS: usize = 16;

/// The `delay_ms` of a `nak` that waits the consumer's backoff schedule.
pub const BACKOFF_DELAY: u64 = u64::MAX;

/// Checks a consumer name: 1..=[`MAX_CONSUMER_LEN`] bytes of ASCII letters, digits, `-`, `_`
/// and `.` (the queue-group rule). Returns a short static reason on failure.
pub fn validate_consumer(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("consumer name is empty");
    }
    if name.len() > MAX_CONSUMER_LEN {
        return Err("consumer name longer than 64 bytes");
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("consumer name holds a character other than A-Z a-z 0-9 - _ .");
    }
    Ok(())
}

/// Where a new consumer starts reading its topic's log (ignored when the consumer exists).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ConsumerStart {
    /// The oldest message the log holds.
    #[default]
    First,
    /// The newest message the log holds (and everything after it).
    Last,
    /// This position (a record holding earlier events is read from this event on).
    Position(Position),
    /// The first message stamped at or after this time, Unix ms.
    TimeMs(u64),
}

/// Joins (creating it if needed) the durable consumer `consumer` of durable topic `topic` as
/// a new member. The first frame of a bidirectional stream; the broker answers `ConsumerOk`
/// (then `ConsumerMessage`s) or `Error`.
///
/// Layout: `request_id u64 | topic str | consumer str | ack_wait_ms u64 | max_deliver u32 |
/// max_ack_pending u32 | start_kind u8 | start_a u64 | start_b u64 | dead_letter str |
/// backoff_count u32 | backoff_count × u64`. `start_kind`: 0 first, 1 last, 2 position
/// (`start_a` the stream, nonzero, `start_b` the sequence number), 3 time (`start_a` Unix ms);
/// the unused `start_*` are 0. `dead_letter` empty: none. `max_deliver` 0: no limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerOpen {
    /// Echoed in `ConsumerOk` or `Error`.
    pub request_id: u64,
    /// The durable topic.
    pub topic: String,
    /// The consumer's name (see [`validate_consumer`]).
    pub consumer: String,
    /// How long a delivery may stay unacked, ms (≥ 1).
    pub ack_wait_ms: u64,
    /// Most deliveries of one message; 0: no limit.
    pub max_deliver: u32,
    /// Most messages held from the ack floor on (≥ 1).
    pub max_ack_pending: u32,
    /// Where a new consumer starts.
    pub start: ConsumerStart,
    /// The topic messages past `max_deliver` are published to, if any.
    pub dead_letter: Option<String>,
    /// Redelivery delays after the 1st, 2nd, ... failed delivery, ms (at most
    /// [`MAX_BACKOFF_STEPS`]).
    pub backoff_ms: Vec<u64>,
}

impl EncodeBody for ConsumerOpen {
    fn body_len(&self) -> usize {
        8 + str_len(&self.topic)
            + str_len(&self.consumer)
            + 8
            + 4
            + 4
            + 1
            + 16
            + str_len(self.dead_letter.as_deref().unwrap_or(""))
            + 4
            + 8 * self.backoff_ms.len()
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        put_str(dst, &self.consumer);
        dst.put_u64(self.ack_wait_ms);
        dst.put_u32(self.max_deliver);
        dst.put_u32(self.max_ack_pending);
        let (kind, a, b) = match self.start {
            ConsumerStart::First => (0, 0, 0),
            ConsumerStart::Last => (1, 0, 0),
            ConsumerStart::Position(p) => (2, p.stream, p.seq),
            ConsumerStart::TimeMs(ms) => (3, ms, 0),
        };
        dst.put_u8(kind);
        dst.put_u64(a);
        dst.put_u64(b);
        put_str(dst, self.dead_letter.as_deref().unwrap_or(""));
        dst.put_u32(self.backoff_ms.len() as u32);
        for d in &self.backoff_ms {
            dst.put_u64(*d);
        }
    }
}

impl DecodeBody for ConsumerOpen {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let topic = r.topic()?;
        let consumer = r.string()?;
        validate_consumer(&consumer).map_err(|reason| r.malformed(reason))?;
        let ack_wait_ms = r.u64()?;
        if ack_wait_ms == 0 {
            return Err(r.malformed("ack_wait_ms is 0"));
        }
        let max_deliver = r.u32()?;
        let max_ack_pending = r.u32()?;
        if max_ack_pending == 0 {
            return Err(r.malformed("max_ack_pending is 0"));
        }
        let kind = r.u8()?;
        let a = r.u64()?;
        let b = r.u64()?;
        let start = match (kind, a, b) {
            (0, 0, 0) => ConsumerStart::First,
            (1, 0, 0) => ConsumerStart::Last,
            (2, 0, _) => return Err(r.malformed("consumer start position with stream 0")),
            (2, stream, seq) => ConsumerStart::Position(Position { stream, seq }),
            (3, ms, 0) => ConsumerStart::TimeMs(ms),
            (0..=3, _, _) => return Err(r.malformed("unused consumer start field is not 0")),
            _ => return Err(r.malformed("unknown consumer start kind")),
        };
        let dead_letter = match r.string()? {
            s if s.is_empty() => None,
            s => {
                crate::validate_topic(&s).map_err(|_| r.malformed("invalid dead-letter topic"))?;
                Some(s)
            }
        };
        let steps = r.count(8)?;
        if steps > MAX_BACKOFF_STEPS {
            return Err(r.malformed("backoff schedule longer than 16 steps"));
        }
        let mut backoff_ms = Vec::with_capacity(steps);
        for _ in 0..steps {
            backoff_ms.push(r.u64()?);
        }
        Ok(ConsumerOpen {
            request_id,
            topic,
            consumer,
            ack_wait_ms,
            max_deliver,
            max_ack_pending,
            start,
            dead_letter,
            backoff_ms,
        })
    }
}

/// The member joined its consumer; `ConsumerMessage`s follow on the stream.
///
/// Layout: `request_id u64 | member_id u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerOk {
    /// The `ConsumerOpen` being answered.
    pub request_id: u64,
    /// The broker's number for this member (in its logs and errors).
    pub member_id: u64,
}

impl EncodeBody for ConsumerOk {
    fn body_len(&self) -> usize {
        16
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.member_id);
    }
}

impl DecodeBody for ConsumerOk {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(ConsumerOk {
            request_id: r.u64()?,
            member_id: r.u64()?,
        })
    }
}

/// One delivery of one message to a member.
///
/// Layout: `stream u64 | seq u64 | delivery u32 | timestamp_ms u64 | payload blob`, then the
/// message's header list (see [`headers`](crate::messages::headers)) only when it has headers
/// and the member's connection was granted [`HEADERS`](crate::features::HEADERS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMessage {
    /// The message's position in its topic (what the member's `ConsumerAck` names).
    pub position: Position,
    /// Which delivery of the message this is, from 1.
    pub delivery: u32,
    /// When the message was written to the topic's log, Unix ms.
    pub timestamp_ms: u64,
    /// The message.
    pub payload: Bytes,
    /// The message's headers as it was published; empty for none (then not encoded at all).
    pub headers: Vec<Header>,
}

impl EncodeBody for ConsumerMessage {
    fn body_len(&self) -> usize {
        let headers = if self.headers.is_empty() {
            0
        } else {
            headers_len(&self.headers)
        };
        16 + 4 + 8 + blob_len(&self.payload) + headers
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.position.stream);
        dst.put_u64(self.position.seq);
        dst.put_u32(self.delivery);
        dst.put_u64(self.timestamp_ms);
        put_blob(dst, &self.payload);
        if !self.headers.is_empty() {
            put_headers(dst, &self.headers);
        }
    }
}

impl DecodeBody for ConsumerMessage {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let stream = r.u64()?;
        let seq = r.u64()?;
        let delivery = r.u32()?;
        if delivery == 0 {
            return Err(r.malformed("delivery 0"));
        }
        let timestamp_ms = r.u64()?;
        let payload = r.blob()?;
        let headers = if r.at_end() {
            Vec::new()
        } else {
            read_headers(r)?
        };
        Ok(ConsumerMessage {
            position: Position { stream, seq },
            delivery,
            timestamp_ms,
            payload,
            headers,
        })
    }
}

/// What a member says of a delivery ([`ConsumerAck::op`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConsumerAckOp {
    /// Processed.
    Ack,
    /// Redeliver, after `delay_ms` (`None`: the consumer's backoff schedule).
    Nak {
        /// The delay, ms.
        delay_ms: Option<u64>,
    },
    /// Still working: the delivery's deadline is `ack_wait` from now.
    InProgress,
    /// Never deliver it again.
    Term,
}

/// A member's answer to a delivery. Nothing is sent back.
///
/// Layout: `stream u64 | seq u64 | op u8 | delay_ms u64`. `op`: 0 ack, 1 nak, 2 in progress,
/// 3 term; `delay_ms` is the nak's delay ([`BACKOFF_DELAY`] for the backoff schedule) and 0
/// for the other ops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerAck {
    /// The delivered message's position.
    pub position: Position,
    /// What the member says.
    pub op: ConsumerAckOp,
}

impl EncodeBody for ConsumerAck {
    fn body_len(&self) -> usize {
        16 + 1 + 8
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.position.stream);
        dst.put_u64(self.position.seq);
        let (op, delay) = match self.op {
            ConsumerAckOp::Ack => (0, 0),
            ConsumerAckOp::Nak { delay_ms } => (1, delay_ms.unwrap_or(BACKOFF_DELAY)),
            ConsumerAckOp::InProgress => (2, 0),
            ConsumerAckOp::Term => (3, 0),
        };
        dst.put_u8(op);
        dst.put_u64(delay);
    }
}

impl DecodeBody for ConsumerAck {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let stream = r.u64()?;
        let seq = r.u64()?;
        let op = r.u8()?;
        let delay = r.u64()?;
        let op = match (op, delay) {
            (0, 0) => ConsumerAckOp::Ack,
            (1, BACKOFF_DELAY) => ConsumerAckOp::Nak { delay_ms: None },
            (1, ms) => ConsumerAckOp::Nak { delay_ms: Some(ms) },
            (2, 0) => ConsumerAckOp::InProgress,
            (3, 0) => ConsumerAckOp::Term,
            (0 | 2 | 3, _) => return Err(r.malformed("delay_ms set on an op other than nak")),
            _ => return Err(r.malformed("unknown consumer ack op")),
        };
        Ok(ConsumerAck {
            position: Position { stream, seq },
            op,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    fn open() -> ConsumerOpen {
        ConsumerOpen {
            request_id: 1,
            topic: "jobs".into(),
            consumer: "w".into(),
            ack_wait_ms: 30_000,
            max_deliver: 5,
            max_ack_pending: 100,
            start: ConsumerStart::First,
            dead_letter: Some("jobs.dead".into()),
            backoff_ms: vec![100, 1_000],
        }
    }

    #[test]
    fn consumer_open_layout_and_checks() {
        let payload = round_trip(&Frame::ConsumerOpen(open()));
        assert_eq!(payload.len(), 8 + 6 + 3 + 8 + 4 + 4 + 1 + 16 + 11 + 4 + 16);
        for start in [
            ConsumerStart::Last,
            ConsumerStart::Position(Position { stream: 3, seq: 4 }),
            ConsumerStart::TimeMs(5),
        ] {
            round_trip(&Frame::ConsumerOpen(ConsumerOpen {
                start,
                dead_letter: None,
                backoff_ms: vec![],
                ..open()
            }));
        }
        let at = |off: usize, v: u8| {
            let mut p = payload.clone();
            p[off] = v;
            decode(FrameKind::ConsumerOpen, &p)
        };
        // start_kind at 8 + 6 + 3 + 16 = 33.
        assert_eq!(
            at(33, 9),
            malformed(FrameKind::ConsumerOpen, "unknown consumer start kind")
        );
        assert_eq!(
            at(41, 1),
            malformed(
                FrameKind::ConsumerOpen,
                "unused consumer start field is not 0"
            )
        );
        assert_eq!(
            at(15, b' '),
            malformed(
                FrameKind::ConsumerOpen,
                "consumer name holds a character other than A-Z a-z 0-9 - _ ."
            )
        );
        let mut zero_wait = payload.clone();
        zero_wait[17..25].fill(0);
        assert_eq!(
            decode(FrameKind::ConsumerOpen, &zero_wait),
            malformed(FrameKind::ConsumerOpen, "ack_wait_ms is 0")
        );
        assert!(validate_consumer("").is_err());
        assert!(validate_consumer(&"c".repeat(65)).is_err());
    }

    #[test]
    fn consumer_message_ok_and_ack_layouts() {
        let m = round_trip(&Frame::ConsumerMessage(ConsumerMessage {
            position: Position { stream: 1, seq: 2 },
            delivery: 3,
            timestamp_ms: 4,
            payload: Bytes::from_static(b"hi"),
            headers: Vec::new(),
        }));
        assert_eq!(m.len(), 16 + 4 + 8 + 4 + 2);
        // Headers trail the payload as a header list; none: nothing at all.
        let with = round_trip(&Frame::ConsumerMessage(ConsumerMessage {
            position: Position { stream: 1, seq: 2 },
            delivery: 3,
            timestamp_ms: 4,
            payload: Bytes::from_static(b"hi"),
            headers: vec![Header::new("a", "b")],
        }));
        assert_eq!(&with[..m.len()], &m[..]);
        assert_eq!(&with[m.len()..], [0, 0, 0, 1, 0, 1, b'a', 0, 1, b'b']);
        let mut zero = m.clone();
        zero[16..20].fill(0);
        assert_eq!(
            decode(FrameKind::ConsumerMessage, &zero),
            malformed(FrameKind::ConsumerMessage, "delivery 0")
        );
        assert_eq!(
            round_trip(&Frame::ConsumerOk(ConsumerOk {
                request_id: 1,
                member_id: 2
            })),
            [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
        );
        for op in [
            ConsumerAckOp::Ack,
            ConsumerAckOp::Nak { delay_ms: None },
            ConsumerAckOp::Nak { delay_ms: Some(0) },
            ConsumerAckOp::InProgress,
            ConsumerAckOp::Term,
        ] {
            round_trip(&Frame::ConsumerAck(ConsumerAck {
                position: Position { stream: 1, seq: 2 },
                op,
            }));
        }
        let mut ack = round_trip(&Frame::ConsumerAck(ConsumerAck {
            position: Position { stream: 1, seq: 2 },
            op: ConsumerAckOp::Ack,
        }));
        ack[24] = 1;
        assert_eq!(
            decode(FrameKind::ConsumerAck, &ack),
            malformed(
                FrameKind::ConsumerAck,
                "delay_ms set on an op other than nak"
            )
        );
        ack[16] = 7;
        assert_eq!(
            decode(FrameKind::ConsumerAck, &ack),
            malformed(FrameKind::ConsumerAck, "unknown consumer ack op")
        );
    }
}
