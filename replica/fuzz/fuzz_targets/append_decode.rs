//! Fuzz target: arbitrary bytes as the body of a binary append (`AppendEntries` from a peer,
//! the largest replica RPC). The decoder must never panic nor allocate from a declared count
//! or length; an accepted append must re-encode (length prefix included) to a frame that decodes
//! again and re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_replica::codec::FRAME_HEADER;
use starling_replica::wire::{decode_append, encode_append};

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = decode_append(data, MAX) {
        let frame = encode_append(&req, MAX + FRAME_HEADER).expect("an accepted append re-encodes");
        let again = decode_append(&frame[FRAME_HEADER..], MAX).expect("decodes again");
        let twice = encode_append(&again, MAX + FRAME_HEADER).expect("re-encodes");
        assert_eq!(twice, frame);
    }
});
