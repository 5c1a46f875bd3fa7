//! Subscription control frames: `Subscribe` and `Unsubscribe` (client →
//! server) and `SubscribeOk` (server → client). Events themselves travel in
//! [`EventBatch`](crate::EventBatch). [`StartAt`] is where a subscription starts: live, at a
//! resume position, or at a time.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::position::Position;
use crate::wire::{DecodeBody, EncodeBody, Reader, put_str, str_len};

/// Where a subscription starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum StartAt {
    /// Live events only: those the topic delivers after the broker registered the
    /// subscription.
    #[default]
    Live,
    /// Resume at a position: the next event wanted (one past the last received). The broker
    /// first replays what it still holds from there on (and every later stream). The
    /// position's stream must be nonzero.
    Position(Position),
    /// Start at the first event stamped at or after this time, in Unix milliseconds (the
    /// time its batch was written to the topic's log, or retained, at the owner). Needs the
    /// [`SUBSCRIBE_FROM_TIME`](crate::features::SUBSCRIBE_FROM_TIME) feature.
    TimeMs(u64),
}

impl StartAt {
    /// `Live` for `None`, else `Position`.
    pub fn from_resume(resume: Option<Position>) -> StartAt {
        resume.map_or(StartAt::Live, StartAt::Position)
    }

    /// The resume position, if this is one.
    pub fn position(self) -> Option<Position> {
        match self {
            StartAt::Position(p) => Some(p),
            StartAt::Live | StartAt::TimeMs(_) => None,
        }
    }
}

impl From<Option<Position>> for StartAt {
    fn from(resume: Option<Position>) -> StartAt {
        StartAt::from_resume(resume)
    }
}

/// Opens a subscription to one topic on the current stream.
///
/// Layout: `request_id u64 | topic str | resume_stream u64 | resume_seq u64 |
/// [start_time_ms u64 [group str]]`. A nonzero `resume_stream` asks the broker to first replay the events
/// it still holds from `(resume_stream, resume_seq)` on (and every later stream); 0 (with
/// `resume_seq` 0) asks for live events only, or, when the optional trailing `start_time_ms`
/// is present, for the events from that time on. `start_time_ms` is present only with
/// `resume_stream` and `resume_seq` 0, and is sent only to a broker that granted
/// [`SUBSCRIBE_FROM_TIME`](crate::features::SUBSCRIBE_FROM_TIME): an older broker rejects it
/// as trailing bytes. Without it the layout is the one protocol version 2 started with.
///
/// A queue-group subscription (docs/queue-groups.md) ends with its `group` name (see
/// [`validate_group`]) after `start_time_ms`, which is then always present and is
/// [`NO_START_TIME`] (`u64::MAX`) when the subscription has no start time. It is sent only to a
/// broker that granted [`QUEUE_GROUPS`](crate::features::QUEUE_GROUPS): an older broker
/// rejects it as trailing bytes, and a subscription without a group keeps the layouts above.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Echoed in `SubscribeOk` or `Error`.
    pub request_id: u64,
    /// Topic to follow (see [`validate_topic`](crate::validate_topic)).
    pub topic: String,
    /// Where to start.
    pub start: StartAt,
    /// The queue group this subscription joins, if any: each event of the topic goes to one
    /// member of the group (needs [`QUEUE_GROUPS`](crate::features::QUEUE_GROUPS)).
    pub group: Option<String>,
}

/// The `start_time_ms` of a queue-group `Subscribe` without a start time.
pub const NO_START_TIME: u64 = u64::MAX;

/// Longest queue-group name, in bytes.
pub const MAX_GROUP_LEN: usize = 64;

/// Checks a queue-group name: 1..=[`MAX_GROUP_LEN`] bytes of ASCII letters, digits, `-`, `_`
/// and `.`. Returns a short static reason on failure.
pub fn validate_group(group: &str) -> Result<(), &'static str> {
    if group.is_empty() {
        return Err("group name is empty");
    }
    if group.len() > MAX_GROUP_LEN {
        return Err("group name longer than 64 bytes");
    }
    if !group
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        return Err("group name holds a character other than A-Z a-z 0-9 - _ .");
    }
    Ok(())
}

impl EncodeBody for Subscribe {
    fn body_len(&self) -> usize {
        let time = match (self.start, &self.group) {
            (_, Some(_)) | (StartAt::TimeMs(_), None) => 8,
            (StartAt::Live | StartAt::Position(_), None) => 0,
        };
        let group = self.group.as_deref().map_or(0, str_len);
        8 + str_len(&self.topic) + 16 + time + group
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        let (stream, seq) = self.start.position().map_or((0, 0), |p| (p.stream, p.seq));
        dst.put_u64(stream);
        dst.put_u64(seq);
        match (self.start, &self.group) {
            (StartAt::TimeMs(ms), _) => dst.put_u64(ms),
            (StartAt::Live | StartAt::Position(_), Some(_)) => dst.put_u64(NO_START_TIME),
            (StartAt::Live | StartAt::Position(_), None) => {}
        }
        if let Some(group) = &self.group {
            put_str(dst, group);
        }
    }
}

impl DecodeBody for Subscribe {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let topic = r.topic()?;
        let stream = r.u64()?;
        let seq = r.u64()?;
        let mut time = if r.at_end() { None } else { Some(r.u64()?) };
        // A group is at least 3 bytes (its length and one byte): fewer left after the time
        // are trailing bytes, as they were before groups existed.
        let group = if r.remaining() < 3 {
            None
        } else {
            let group = r.string()?;
            validate_group(&group).map_err(|reason| r.malformed(reason))?;
            if time == Some(NO_START_TIME) {
                time = None;
            }
            Some(group)
        };
        let start = match (stream, seq, time) {
            (0, 0, None) => StartAt::Live,
            (0, 0, Some(ms)) => StartAt::TimeMs(ms),
            (0, _, _) => return Err(r.malformed("resume_seq set without a resume_stream")),
            (_, _, Some(_)) => {
                return Err(r.malformed("start_time_ms set together with a resume position"));
            }
            (stream, seq, None) => StartAt::Position(Position { stream, seq }),
        };
        Ok(Subscribe {
            request_id,
            topic,
            start,
            group,
        })
    }
}

/// Subscription accepted; `EventBatch` frames follow on the same stream.
///
/// Layout: `request_id u64 | subscription_id u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscribeOk {
    /// The `Subscribe` being answered.
    pub request_id: u64,
    /// Server-assigned id, used by `Unsubscribe`.
    pub subscription_id: u64,
}

impl EncodeBody for SubscribeOk {
    fn body_len(&self) -> usize {
        16
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.subscription_id);
    }
}

impl DecodeBody for SubscribeOk {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(SubscribeOk {
            request_id: r.u64()?,
            subscription_id: r.u64()?,
        })
    }
}

/// Ends a subscription.
///
/// Layout: `request_id u64 | subscription_id u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsubscribe {
    /// Correlates an `Error` answer, if any.
    pub request_id: u64,
    /// The id from `SubscribeOk`.
    pub subscription_id: u64,
}

impl EncodeBody for Unsubscribe {
    fn body_len(&self) -> usize {
        16
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        dst.put_u64(self.subscription_id);
    }
}

impl DecodeBody for Unsubscribe {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(Unsubscribe {
            request_id: r.u64()?,
            subscription_id: r.u64()?,
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
    fn subscribe_layout() {
        let payload = round_trip(&Frame::Subscribe(Subscribe {
            group: None,
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Position(Position { stream: 9, seq: 3 }),
        }));
        assert_eq!(
            payload,
            [
                0, 0, 0, 0, 0, 0, 0, 7, 0, 2, b'a', b'b', 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0,
                0, 3
            ]
        );
    }

    #[test]
    fn subscribe_from_a_time_appends_it() {
        let payload = round_trip(&Frame::Subscribe(Subscribe {
            group: None,
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::TimeMs(0x0102),
        }));
        assert_eq!(payload.len(), 8 + 4 + 16 + 8);
        assert_eq!(&payload[12..28], &[0; 16], "no resume position");
        assert_eq!(&payload[28..], &[0, 0, 0, 0, 0, 0, 1, 2]);
        // Time 0 (the start of every log) is a time, not "live".
        let zero = round_trip(&Frame::Subscribe(Subscribe {
            group: None,
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::TimeMs(0),
        }));
        assert_eq!(zero.len(), 36);
        // Without it, the live layout every broker knows.
        let live = round_trip(&Frame::Subscribe(Subscribe {
            group: None,
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Live,
        }));
        assert_eq!(live, payload[..28]);
    }

    #[test]
    fn subscribe_time_and_position_are_exclusive() {
        let mut payload = round_trip(&Frame::Subscribe(Subscribe {
            group: None,
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Position(Position { stream: 9, seq: 3 }),
        }));
        payload.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 5]);
        assert_eq!(
            decode(FrameKind::Subscribe, &payload),
            malformed(
                FrameKind::Subscribe,
                "start_time_ms set together with a resume position"
            )
        );
        // A time cut short is a truncated field, not a live subscription.
        let mut cut = payload[..28].to_vec();
        cut[19] = 0; // resume_stream 0 ...
        cut[27] = 0; // ... and resume_seq 0
        cut.extend_from_slice(&[0, 0, 1]);
        assert_eq!(
            decode(FrameKind::Subscribe, &cut),
            malformed(FrameKind::Subscribe, "truncated integer field")
        );
    }

    #[test]
    fn subscribe_with_a_group_appends_no_time_and_the_group() {
        let payload = round_trip(&Frame::Subscribe(Subscribe {
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Live,
            group: Some("wk".into()),
        }));
        assert_eq!(payload.len(), 8 + 4 + 16 + 8 + 4);
        assert_eq!(&payload[28..36], &[0xff; 8], "no start time");
        assert_eq!(&payload[36..], &[0, 2, b'w', b'k']);
        // With a start time, the time itself.
        let timed = round_trip(&Frame::Subscribe(Subscribe {
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::TimeMs(5),
            group: Some("wk".into()),
        }));
        assert_eq!(&timed[28..36], &[0, 0, 0, 0, 0, 0, 0, 5]);
        // A resume position keeps its fields; the time is "none".
        round_trip(&Frame::Subscribe(Subscribe {
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Position(Position { stream: 9, seq: 3 }),
            group: Some("wk".into()),
        }));
    }

    #[test]
    fn subscribe_rejects_a_bad_group() {
        let live = round_trip(&Frame::Subscribe(Subscribe {
            request_id: 7,
            topic: "ab".into(),
            start: StartAt::Live,
            group: Some("wk".into()),
        }));
        let with = |name: &[u8]| {
            let mut p = live[..36].to_vec();
            p.extend_from_slice(&(name.len() as u16).to_be_bytes());
            p.extend_from_slice(name);
            decode(FrameKind::Subscribe, &p)
        };
        // An empty name is two bytes: too short to be a group, so trailing bytes.
        assert_eq!(
            with(&b""[..]),
            malformed(FrameKind::Subscribe, "trailing bytes after last field")
        );
        assert_eq!(validate_group(""), Err("group name is empty"));
        assert_eq!(
            with(&[b'g'; 65][..]),
            malformed(FrameKind::Subscribe, "group name longer than 64 bytes")
        );
        assert_eq!(
            with(&b"a b"[..]),
            malformed(
                FrameKind::Subscribe,
                "group name holds a character other than A-Z a-z 0-9 - _ ."
            )
        );
        assert!(with(&[b'g'; 64][..]).is_ok());
        assert!(validate_group("work-ers_1.eu").is_ok());
        assert!(validate_group("é").is_err());
        // A group cut short is malformed, not a subscription without one.
        assert_eq!(
            decode(FrameKind::Subscribe, &live[..live.len() - 1]),
            malformed(FrameKind::Subscribe, "string overruns payload")
        );
    }

    #[test]
    fn start_at_from_a_resume_position() {
        assert_eq!(StartAt::from(None), StartAt::Live);
        let p = Position { stream: 1, seq: 2 };
        assert_eq!(StartAt::from(Some(p)), StartAt::Position(p));
        assert_eq!(StartAt::Position(p).position(), Some(p));
        assert_eq!(StartAt::TimeMs(5).position(), None);
        assert_eq!(StartAt::default(), StartAt::Live);
    }

    #[test]
    fn subscribe_rejects_long_topic() {
        let mut payload = vec![0u8; 8];
        payload.extend_from_slice(&256u16.to_be_bytes());
        payload.extend(std::iter::repeat_n(b'x', 256));
        assert_eq!(
            decode(FrameKind::Subscribe, &payload),
            malformed(FrameKind::Subscribe, "topic longer than 255 bytes")
        );
    }

    #[test]
    fn subscribe_ok_layout() {
        let payload = round_trip(&Frame::SubscribeOk(SubscribeOk {
            request_id: 1,
            subscription_id: 0x0102,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn unsubscribe_layout_and_truncation() {
        let payload = round_trip(&Frame::Unsubscribe(Unsubscribe {
            request_id: 3,
            subscription_id: 4,
        }));
        assert_eq!(payload, [0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 4]);
        assert_eq!(
            decode(FrameKind::Unsubscribe, &payload[..15]),
            malformed(FrameKind::Unsubscribe, "truncated integer field")
        );
    }
}
