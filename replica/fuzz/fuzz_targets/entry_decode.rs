//! Fuzz target: arbitrary bytes as a Raft log entry and as a committed record, the two
//! on-disk formats a replica reads back at start (binary, or the JSON of older builds). The
//! decoders must never panic nor allocate from a declared length; whatever they accept must
//! re-encode to bytes that decode again and re-encode to the same bytes (the binary format is
//! canonical after one round), within the size bound given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_replica::entry_codec::{decode_entry, decode_record, encode_entry, encode_record};

const MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    if let Ok(entry) = decode_entry(data, MAX) {
        let once = encode_entry(&entry).expect("an accepted entry re-encodes");
        let again = decode_entry(&once, MAX).expect("a re-encoded entry decodes");
        assert_eq!(encode_entry(&again).expect("re-encodes"), once);
    }
    if let Ok(record) = decode_record(data, MAX) {
        let once = encode_record(&record).expect("an accepted record re-encodes");
        let again = decode_record(&once, MAX).expect("a re-encoded record decodes");
        assert_eq!(encode_record(&again).expect("re-encodes"), once);
    }
});
