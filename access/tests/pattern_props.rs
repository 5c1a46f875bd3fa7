//! Property tests of the pattern language against a direct reference model.

use proptest::prelude::*;
use starling_access::Pattern;

fn token() -> impl Strategy<Value = String> {
    prop_oneof![Just("a".to_string()), Just("b".to_string()), "[a-c]{1,3}"]
}

fn name() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(token(), 1..5)
}

fn pattern_tokens() -> impl Strategy<Value = (Vec<String>, bool)> {
    (
        prop::collection::vec(prop_oneof![token(), Just("*".to_string())], 0..5),
        any::<bool>(),
    )
        .prop_filter("a pattern has at least one token", |(t, tail)| {
            !t.is_empty() || *tail
        })
}

/// The reference: literal tokens equal, `*` any one token, a trailing `>` one or more.
fn model(pattern: &[String], tail: bool, name: &[String]) -> bool {
    if tail {
        if name.len() <= pattern.len() {
            return false;
        }
    } else if name.len() != pattern.len() {
        return false;
    }
    pattern.iter().zip(name).all(|(p, n)| p == "*" || p == n)
}

proptest! {
    #[test]
    fn matching_agrees_with_the_model((p, tail) in pattern_tokens(), n in name()) {
        let mut text = p.join(".");
        if tail {
            if !text.is_empty() { text.push('.'); }
            text.push('>');
        }
        let pattern = Pattern::parse(&text).unwrap();
        prop_assert_eq!(pattern.matches(n.join(".").as_bytes()), model(&p, tail, &n));
    }

    #[test]
    fn an_exact_pattern_matches_only_its_own_name(n in name(), other in name()) {
        let text = n.join(".");
        let pattern = Pattern::parse(&text).unwrap();
        prop_assert!(pattern.is_exact());
        prop_assert!(pattern.matches(text.as_bytes()));
        prop_assert_eq!(pattern.matches(other.join(".").as_bytes()), other == n);
    }

    #[test]
    fn parsing_arbitrary_text_never_panics(text in ".{0,64}", name in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(p) = Pattern::parse(&text) {
            let _ = p.matches(&name);
            prop_assert_eq!(p.as_str(), text.as_str());
        }
    }
}
