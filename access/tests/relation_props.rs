//! Property tests of the pattern-against-pattern relations (`covers`, `overlaps`) against
//! brute force over every name short enough to tell the patterns apart.

#![allow(clippy::unwrap_used)] // a test crate: a panic is the failure report

use proptest::prelude::*;
use starling_access::Pattern;
use starling_access::relation::{covers, overlaps};

/// Patterns of at most three tokens from `a`, `b` and `*`, with an optional trailing `>`.
fn pattern() -> impl Strategy<Value = Pattern> {
    (
        prop::collection::vec(prop_oneof![Just("a"), Just("b"), Just("*")], 0..4),
        any::<bool>(),
    )
        .prop_filter("at least one token", |(t, tail)| !t.is_empty() || *tail)
        .prop_map(|(tokens, tail)| {
            let mut parts: Vec<&str> = tokens;
            if tail {
                parts.push(">");
            }
            Pattern::parse(&parts.join(".")).unwrap()
        })
}

/// Every name of one to five tokens from `a`, `b` and `z` (a token no pattern names). A
/// pattern has at most four tokens, so a longer name is matched exactly as its first five
/// tokens are.
fn names() -> Vec<String> {
    let mut all = Vec::new();
    let mut level: Vec<String> = vec![String::new()];
    for _ in 0..5 {
        let mut next = Vec::new();
        for prefix in &level {
            for t in ["a", "b", "z"] {
                let name = if prefix.is_empty() {
                    t.to_string()
                } else {
                    format!("{prefix}.{t}")
                };
                next.push(name);
            }
        }
        all.extend(next.iter().cloned());
        level = next;
    }
    all
}

proptest! {
    #[test]
    fn covers_agrees_with_brute_force(
        by in prop::collection::vec(pattern(), 0..5),
        p in pattern(),
    ) {
        let brute = names().iter().all(|n| {
            !p.matches(n.as_bytes()) || by.iter().any(|a| a.matches(n.as_bytes()))
        });
        prop_assert_eq!(covers(&by, &p), brute, "{:?} covering {}", by, p);
    }

    #[test]
    fn overlaps_agrees_with_brute_force(a in pattern(), b in pattern()) {
        let brute = names()
            .iter()
            .any(|n| a.matches(n.as_bytes()) && b.matches(n.as_bytes()));
        prop_assert_eq!(overlaps(&a, &b), brute, "{} and {}", a, b);
        prop_assert_eq!(overlaps(&b, &a), brute);
    }
}
