//! Fuzz target: the member list, which a broker reads from a file or from the operator's
//! ConfigMap through the API server and re-reads on every change. Arbitrary text must parse or
//! be refused, never panic. An accepted list must be sorted with unique ids; written back one
//! member per line, in reverse order, it must parse to the same set with the same epoch (the
//! epoch names the list, not its order); and every member must be found by `contains`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use starling_broker::cluster::members::MemberSet;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(set) = MemberSet::parse(text) else {
        return;
    };
    let members = set.members();
    assert!(!members.is_empty());
    assert!(members.windows(2).all(|w| w[0].id < w[1].id));
    for m in members {
        assert!(set.contains(&m.id));
    }
    let rewritten: String = members
        .iter()
        .rev()
        .map(|m| format!("{} {}\n", m.id, m.addr))
        .collect();
    match MemberSet::parse(&rewritten) {
        Ok(again) => {
            assert_eq!(again, set);
            assert_eq!(again.epoch(), set.epoch());
        }
        Err(e) => panic!("an accepted list did not read back: {e}"),
    }
});
