//! Publish de-duplication's one wire fact: the reserved header that carries a message's
//! publisher-chosen id ([`MSG_ID`], like NATS's `Nats-Msg-Id`), how it is read from a
//! message's headers ([`msg_id`]) and the protocol's bound on its length
//! ([`MAX_MSG_ID_LEN`]; a broker's `max_msg_id_bytes` may be lower). The id travels as a
//! header so a de-duplicated publish needs no new frame: `Publish` and `PublishBatch` carry
//! headers per message already (docs/protocol.md, *De-duplication*).

use crate::Header;

/// The header holding a message's id. A broker granting
/// [`DEDUP`](crate::features::DEDUP) drops a repeat of an id its topic saw within its window.
pub const MSG_ID: &str = "Starling-Msg-Id";

/// Most bytes a message id may have on any broker (`max_msg_id_bytes` is validated at or
/// below it).
pub const MAX_MSG_ID_LEN: usize = 1024;

/// The message id among `headers`, if any (the value of the first [`MSG_ID`] header; names
/// compare exactly).
pub fn msg_id(headers: &[Header]) -> Option<&str> {
    headers
        .iter()
        .find(|h| h.name == MSG_ID)
        .map(|h| h.value.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_exact_header_is_the_id() {
        let headers = vec![
            Header::new("starling-msg-id", "lower"),
            Header::new(MSG_ID, "a"),
            Header::new(MSG_ID, "b"),
        ];
        assert_eq!(msg_id(&headers), Some("a"));
        assert_eq!(msg_id(&headers[..1]), None);
        assert_eq!(msg_id(&[]), None);
        assert!(crate::validate_header_name(MSG_ID).is_ok());
    }
}
