//! Property tests: every valid frame survives encode → decode unchanged,
//! alone or in a stream split into arbitrary chunks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod common;

use bytes::{Bytes, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use starling_proto::{
    EventBatch, Frame, FrameDecoder, encode_event_batch, event_batch_encoded_len,
};

const NO_LIMIT: FrameDecoder = FrameDecoder::new(u32::MAX);

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn encode_then_decode_is_identity(frame in common::arb_frame()) {
        let wire = frame.to_bytes();
        prop_assert_eq!(wire.len(), frame.encoded_len());
        prop_assert_eq!(wire.len() - 8, frame.payload_len());
        let mut buf = BytesMut::from(&wire[..]);
        let decoded = NO_LIMIT.decode(&mut buf);
        prop_assert_eq!(decoded, Ok(Some(frame.clone())));
        prop_assert!(buf.is_empty());
    }

    #[test]
    fn exact_limit_is_accepted(frame in common::arb_frame()) {
        let limit = u32::try_from(frame.payload_len()).unwrap();
        let mut buf = BytesMut::from(&frame.to_bytes()[..]);
        prop_assert_eq!(FrameDecoder::new(limit).decode(&mut buf), Ok(Some(frame.clone())));
        if limit > 0 {
            let mut buf = BytesMut::from(&frame.to_bytes()[..]);
            let too_small = FrameDecoder::new(limit - 1).decode(&mut buf);
            prop_assert!(
                matches!(too_small, Err(starling_proto::DecodeError::FrameTooLarge { .. })),
                "expected FrameTooLarge"
            );
        }
    }

    #[test]
    fn stream_in_arbitrary_chunks(
        frames in vec(common::arb_frame(), 1..6),
        chunk_sizes in vec(1usize..64, 1..16),
    ) {
        let mut wire = BytesMut::new();
        for f in &frames {
            f.encode(&mut wire);
        }
        let mut buf = BytesMut::new();
        let mut out = Vec::new();
        let mut pos = 0;
        let mut sizes = chunk_sizes.iter().cycle();
        while pos < wire.len() {
            let n = (*sizes.next().unwrap()).min(wire.len() - pos);
            buf.extend_from_slice(&wire[pos..pos + n]);
            pos += n;
            while let Some(f) = NO_LIMIT.decode(&mut buf).unwrap() {
                out.push(f);
            }
        }
        prop_assert!(buf.is_empty());
        prop_assert_eq!(out, frames);
    }

    #[test]
    fn event_batch_helper_matches_frame(
        stream in any::<u64>(),
        first_seq in any::<u64>(),
        events in vec(vec(any::<u8>(), 0..32).prop_map(Bytes::from), 0..10),
    ) {
        let mut direct = BytesMut::new();
        encode_event_batch(stream, first_seq, &events, &mut direct);
        prop_assert_eq!(direct.len(), event_batch_encoded_len(&events));
        let frame = Frame::EventBatch(EventBatch { stream, first_seq, events });
        prop_assert_eq!(&direct[..], &frame.to_bytes()[..]);
    }
}
