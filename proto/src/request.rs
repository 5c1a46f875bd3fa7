//! Request/reply names: the reserved `reply-to` header a request carries, and the reply inbox
//! topics (`_INBOX.<token>.<id>`) it names. The one place these facts are defined; the broker
//! checks inboxes with them and the SDK builds them with them (docs/subjects.md, *Request and
//! reply*).

use crate::Header;

/// The header naming a request's reply inbox. A `Publish` carrying it on a connection granted
/// [`REQUEST`](crate::features::REQUEST) is a request.
pub const REPLY_TO: &str = "reply-to";

/// The first token of every reply inbox topic: `_INBOX.<token>.<id>`.
pub const INBOX_PREFIX: &str = "_INBOX";

/// Fewest bytes of an inbox token: unguessable tokens are long (the SDK's are 32 hex digits,
/// 128 random bits). A shorter one is refused, so no connection claims an easily guessed name.
pub const MIN_INBOX_TOKEN_LEN: usize = 16;

/// The value of the `reply-to` header among `headers`, if any (the first one).
pub fn reply_to(headers: &[Header]) -> Option<&str> {
    headers
        .iter()
        .find(|h| h.name == REPLY_TO)
        .map(|h| h.value.as_str())
}

/// Whether `topic` (or pattern) lies under the inbox namespace: its first token is
/// [`INBOX_PREFIX`].
pub fn is_inbox(topic: &str) -> bool {
    topic.split('.').next() == Some(INBOX_PREFIX)
}

/// The token of an inbox topic or pattern (`_INBOX.<token>.…`: the second token), when it
/// has one; `None` for a name outside the namespace or without a second token.
pub fn inbox_token(topic: &str) -> Option<&str> {
    let mut tokens = topic.split('.');
    if tokens.next() != Some(INBOX_PREFIX) {
        return None;
    }
    tokens.next()
}

/// Whether `token` may name an inbox: at least [`MIN_INBOX_TOKEN_LEN`] bytes of ASCII letters
/// and digits (no wildcard, no separator).
pub fn valid_inbox_token(token: &str) -> bool {
    token.len() >= MIN_INBOX_TOKEN_LEN && token.bytes().all(|b| b.is_ascii_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inbox_names() {
        let t = "0123456789abcdef0123456789abcdef";
        let topic = format!("_INBOX.{t}.7");
        assert!(is_inbox(&topic));
        assert_eq!(inbox_token(&topic), Some(t));
        assert!(valid_inbox_token(t));
        assert!(!valid_inbox_token("short"));
        assert!(!valid_inbox_token("*"));
        assert!(!valid_inbox_token("0123456789abcdef0123456789abcde>"));
        assert!(!is_inbox("orders._INBOX"));
        assert!(!is_inbox("_INBOXES.x"));
        assert_eq!(inbox_token("_INBOX"), None);
        assert_eq!(inbox_token("orders.x"), None);
    }

    proptest::proptest! {
        /// The token of `_INBOX.<t>.<rest>` is `t`, and it is valid exactly when it is long
        /// enough and alphanumeric.
        #[test]
        fn token_round_trips(t in "[A-Za-z0-9*>_-]{0,40}", rest in "[a-z0-9.]{0,10}") {
            let topic = format!("{INBOX_PREFIX}.{t}.{rest}");
            proptest::prop_assert!(is_inbox(&topic));
            proptest::prop_assert_eq!(inbox_token(&topic), Some(t.as_str()));
            let valid = t.len() >= MIN_INBOX_TOKEN_LEN
                && t.chars().all(|c| c.is_ascii_alphanumeric());
            proptest::prop_assert_eq!(valid_inbox_token(&t), valid);
        }
    }

    #[test]
    fn reply_to_is_found_by_exact_name() {
        let headers = vec![Header::new("a", "1"), Header::new(REPLY_TO, "_INBOX.x.1")];
        assert_eq!(reply_to(&headers), Some("_INBOX.x.1"));
        assert_eq!(reply_to(&[Header::new("Reply-To", "x")]), None);
        assert_eq!(reply_to(&[]), None);
    }
}
