//! Validation of topics and cache keys. The decoder enforces these rules on
//! incoming frames; senders should call them before encoding so that the
//! peer never has to reject a frame.

use crate::limits::{MAX_KEY_LEN, MAX_TOPIC_LEN};

/// Checks that `topic` is 1..=[`MAX_TOPIC_LEN`] bytes and contains neither
/// control characters (which covers every ASCII control) nor whitespace.
///
/// Returns a short static reason on failure.
pub fn validate_topic(topic: &str) -> Result<(), &'static str> {
    if topic.is_empty() {
        return Err("topic is empty");
    }
    if topic.len() > MAX_TOPIC_LEN {
        return Err("topic longer than 255 bytes");
    }
    for c in topic.chars() {
        if c.is_control() {
            return Err("topic contains a control character");
        }
        if c.is_whitespace() {
            return Err("topic contains whitespace");
        }
    }
    Ok(())
}

/// Checks a header name: not empty, at most 255 bytes, no control characters, no whitespace
/// and no `:` (so `name: value` renders unambiguously). Returns a short static reason on
/// failure.
pub fn validate_header_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        return Err("header name is empty");
    }
    if name.len() > 255 {
        return Err("header name longer than 255 bytes");
    }
    for c in name.chars() {
        if c.is_control() {
            return Err("header name contains a control character");
        }
        if c.is_whitespace() {
            return Err("header name contains whitespace");
        }
        if c == ':' {
            return Err("header name contains a colon");
        }
    }
    Ok(())
}

/// Whether a `Subscribe` topic is a pattern on a connection granted
/// [`WILDCARDS`](crate::features::WILDCARDS): it holds `*` or `>` as a whole `.`-separated
/// token (`orders.*`, `orders.>`, and `a..*`, which the broker then refuses as a malformed
/// pattern). `orders` and `ord*` are not. The pattern language itself is
/// `starling_access::Pattern`'s.
pub fn is_subscription_pattern(topic: &str) -> bool {
    topic.split('.').any(|t| t == "*" || t == ">")
}

/// Checks that a cache key is 1..=[`MAX_KEY_LEN`] bytes. Keys are opaque
/// bytes; any content is allowed.
pub fn validate_key(key: &[u8]) -> Result<(), &'static str> {
    if key.is_empty() {
        return Err("key is empty");
    }
    if key.len() > MAX_KEY_LEN {
        return Err("key longer than 1024 bytes");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pattern_has_a_whole_wildcard_token() {
        for p in ["*", ">", "orders.*", "orders.>", "*.eu", "a.*.c", "a..*"] {
            assert!(is_subscription_pattern(p), "{p:?}");
        }
        for t in ["orders", "ord*", "a>", "orders.eu", "**", "a.>b"] {
            assert!(!is_subscription_pattern(t), "{t:?}");
        }
    }

    #[test]
    fn accepts_ordinary_topics() {
        for topic in [
            "a",
            "orders.eu-west",
            "sensors/42/temp",
            "ünïcödé",
            "x".repeat(255).as_str(),
        ] {
            assert_eq!(validate_topic(topic), Ok(()), "{topic:?}");
        }
    }

    #[test]
    fn rejects_bad_topics() {
        assert_eq!(validate_topic(""), Err("topic is empty"));
        assert_eq!(
            validate_topic(&"x".repeat(256)),
            Err("topic longer than 255 bytes")
        );
        // 128 two-byte characters: 256 bytes although only 128 chars.
        assert!(validate_topic(&"é".repeat(128)).is_err());
        for bad in [
            "a b",
            "a\tb",
            "a\nb",
            "a\u{0}b",
            "a\u{7f}b",
            "a\u{85}b",
            "a\u{3000}b",
        ] {
            assert!(validate_topic(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn header_names() {
        assert_eq!(validate_header_name("traceparent"), Ok(()));
        assert_eq!(validate_header_name("Content-Type"), Ok(()));
        assert_eq!(validate_header_name(""), Err("header name is empty"));
        assert_eq!(
            validate_header_name("a:b"),
            Err("header name contains a colon")
        );
        assert_eq!(
            validate_header_name("a b"),
            Err("header name contains whitespace")
        );
        assert_eq!(
            validate_header_name("a\u{1}"),
            Err("header name contains a control character")
        );
        assert!(validate_header_name(&"x".repeat(256)).is_err());
    }

    #[test]
    fn key_limits() {
        assert_eq!(validate_key(b""), Err("key is empty"));
        assert_eq!(validate_key(&[0u8; MAX_KEY_LEN]), Ok(()));
        assert_eq!(
            validate_key(&[0u8; MAX_KEY_LEN + 1]),
            Err("key longer than 1024 bytes")
        );
    }
}
