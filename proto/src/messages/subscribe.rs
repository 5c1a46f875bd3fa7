//! Subscription control frames: `Subscribe` and `Unsubscribe` (client →
//! server) and `SubscribeOk` (server → client). Events themselves travel in
//! [`EventBatch`](crate::EventBatch).

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::position::Position;
use crate::wire::{DecodeBody, EncodeBody, Reader, put_str, str_len};

/// Opens a subscription to one topic on the current stream.
///
/// Layout: `request_id u64 | topic str | resume_stream u64 | resume_seq u64`. A nonzero
/// `resume_stream` asks the broker to first replay the events it still retains from
/// `(resume_stream, resume_seq)` on (and every later stream); 0 (with `resume_seq` 0) asks for
/// live events only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscribe {
    /// Echoed in `SubscribeOk` or `Error`.
    pub request_id: u64,
    /// Topic to follow (see [`validate_topic`](crate::validate_topic)).
    pub topic: String,
    /// Where to resume: the next event wanted. `None`: live events only. A `Some` position's
    /// stream must be nonzero.
    pub resume: Option<Position>,
}

impl EncodeBody for Subscribe {
    fn body_len(&self) -> usize {
        8 + str_len(&self.topic) + 16
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        dst.put_u64(self.request_id);
        put_str(dst, &self.topic);
        let (stream, seq) = self.resume.map_or((0, 0), |p| (p.stream, p.seq));
        dst.put_u64(stream);
        dst.put_u64(seq);
    }
}

impl DecodeBody for Subscribe {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        let request_id = r.u64()?;
        let topic = r.topic()?;
        let stream = r.u64()?;
        let seq = r.u64()?;
        let resume = match (stream, seq) {
            (0, 0) => None,
            (0, _) => return Err(r.malformed("resume_seq set without a resume_stream")),
            (stream, seq) => Some(Position { stream, seq }),
        };
        Ok(Subscribe {
            request_id,
            topic,
            resume,
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
            request_id: 7,
            topic: "ab".into(),
            resume: Some(Position { stream: 9, seq: 3 }),
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
