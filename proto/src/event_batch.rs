//! Encode-once fan-out: [`encode_event_batch`] writes a complete
//! `EventBatch` frame from borrowed payloads, so the broker can encode a
//! batch once and share the resulting `Bytes` with every subscriber.

use bytes::{Bytes, BytesMut};

use crate::header::put_header;
use crate::kind::FrameKind;
use crate::limits::HEADER_LEN;
use crate::messages::events::{event_batch_body_len, put_event_batch_body};

/// Total encoded size (header included) of an `EventBatch` carrying
/// `events`. The payload part is this minus [`HEADER_LEN`].
pub fn event_batch_encoded_len(events: &[Bytes]) -> usize {
    HEADER_LEN + event_batch_body_len(events)
}

/// Appends a complete `EventBatch` frame to `dst`; byte-identical to encoding
/// `Frame::EventBatch(EventBatch { stream, first_seq, events: events.to_vec() })`.
pub fn encode_event_batch(stream: u64, first_seq: u64, events: &[Bytes], dst: &mut BytesMut) {
    let payload_len = event_batch_body_len(events);
    dst.reserve(HEADER_LEN + payload_len);
    put_header(dst, FrameKind::EventBatch, payload_len);
    put_event_batch_body(stream, first_seq, events, dst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{EventBatch, Frame};

    #[test]
    fn matches_frame_encoding() {
        let events = vec![
            Bytes::from_static(b"one"),
            Bytes::new(),
            Bytes::from_static(b"three"),
        ];
        let mut direct = BytesMut::new();
        encode_event_batch(7, 42, &events, &mut direct);
        let via_frame = Frame::EventBatch(EventBatch {
            stream: 7,
            first_seq: 42,
            events: events.clone(),
        })
        .to_bytes();
        assert_eq!(&direct[..], &via_frame[..]);
        assert_eq!(event_batch_encoded_len(&events), direct.len());
    }
}
