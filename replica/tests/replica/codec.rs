//! The RPC frame decoder on untrusted bytes: any input is refused with a typed error or
//! decodes, never panics or allocates past the bound; frames that were encoded decode back;
//! a declared length over the bound is refused from the prefix alone.

use proptest::prelude::*;
use starling_replica::Batch;
use starling_replica::codec::{self, CodecError};
use starling_replica::rpc::Rpc;
use starling_replica::snapshot::SnapshotImage;

const MAX: usize = 4096;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let _ = codec::decode_frame::<Rpc>(&bytes, MAX);
        let _ = codec::decode_frame::<Batch>(&bytes, MAX);
        let _ = SnapshotImage::decode(&bytes, MAX);
    }

    #[test]
    fn framed_json_garbage_is_refused(body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut frame = (body.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&body);
        // Either a typed refusal or a value; the call returns.
        let _ = codec::decode_frame::<Rpc>(&frame, MAX);
    }

    #[test]
    fn batches_round_trip(messages in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8)) {
        let b = Batch::new(messages);
        let frame = codec::encode_frame(&b, MAX).unwrap();
        prop_assert_eq!(codec::decode_frame::<Batch>(&frame, MAX).unwrap(), b.clone());
        // Any strict prefix is truncated, any extra byte is trailing.
        let cut = &frame[..frame.len() - 1];
        let truncated = matches!(codec::decode_frame::<Batch>(cut, MAX), Err(CodecError::Truncated { .. }));
        prop_assert!(truncated);
        let mut long = frame.clone();
        long.push(0);
        prop_assert_eq!(codec::decode_frame::<Batch>(&long, MAX), Err(CodecError::Trailing(1)));
    }

    #[test]
    fn oversized_prefix_is_refused_before_the_body(len in (MAX as u32)..u32::MAX) {
        let frame = len.to_be_bytes();
        let too_large = matches!(codec::frame_len(&frame, MAX), Err(CodecError::TooLarge { .. }));
        prop_assert!(too_large);
        let too_large = matches!(codec::decode_frame::<Rpc>(&frame, MAX), Err(CodecError::TooLarge { .. }));
        prop_assert!(too_large);
    }
}
