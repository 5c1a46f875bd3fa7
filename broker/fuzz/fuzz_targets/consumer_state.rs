//! Fuzz target: a durable consumer's state file (`consumer.<name>.state`), read from the
//! topic's volume at every load. Arbitrary bytes must decode or be refused, never panic or
//! allocate past what they hold; an accepted state must encode back to the same bytes (the
//! checksum covers every byte, so a second reading of one file cannot differ).
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_broker::consumer::store;

fuzz_target!(|data: &[u8]| {
    let Ok(stored) = store::decode(data) else {
        return;
    };
    let again = store::encode(&stored);
    assert_eq!(again, data, "an accepted state file did not encode back to itself");
    assert_eq!(store::decode(&again), Ok(stored));
});
