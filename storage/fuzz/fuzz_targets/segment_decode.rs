//! Fuzz target: arbitrary bytes as a segment and as an index file. Scanning must never panic
//! nor allocate from a declared length; every record it accepts must re-encode to exactly the
//! bytes it was read from, lie within the input and follow the previous one; the index
//! decoder must keep only a valid prefix that re-encodes to the input's bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_storage::index::{self, ENTRY_LEN, INDEX_HEADER_LEN, SparseIndex};
use starling_storage::record::{self, key};
use starling_storage::segment;

const MAX: u32 = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let scan = segment::scan(data, MAX);
    assert!(scan.valid_len as usize <= data.len());
    assert_eq!(scan.stop.is_none(), scan.valid_len as usize == data.len());
    let mut at = 0u64;
    let mut prev: Option<record::Header> = None;
    for (offset, h) in &scan.records {
        assert_eq!(*offset, at, "records are back to back");
        let start = *offset as usize;
        let end = start + h.record_len() as usize;
        let (h2, payload) = record::decode(&data[start..end], MAX).unwrap();
        assert_eq!(&h2, h);
        let mut again = Vec::new();
        record::encode(h.position, h.events, h.timestamp_ms, payload, &mut again);
        assert_eq!(&again[..], &data[start..end]);
        if let Some(p) = prev {
            assert!(key(h.position) >= key(p.end()) && h.timestamp_ms >= p.timestamp_ms);
        }
        prev = Some(*h);
        at += h.record_len();
    }
    assert_eq!(at, scan.valid_len);

    let loaded = index::decode_file(data);
    if !loaded.entries.is_empty() || loaded.clean {
        let bytes = SparseIndex::new(1, loaded.entries.clone()).encode_file();
        assert_eq!(&bytes[..], &data[..INDEX_HEADER_LEN + loaded.entries.len() * ENTRY_LEN]);
    }
});
