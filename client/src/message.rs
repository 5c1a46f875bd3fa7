//! [`Message`]: a payload with headers, as [`Client::publish_message`](crate::Client::publish_message)
//! publishes it, its message id for publish de-duplication ([`Message::with_msg_id`]), and the
//! client-side check of its headers.

use bytes::Bytes;
use starling_proto::{Header, MSG_ID, validate_header_name};

use crate::ClientError;

/// A message to publish: its payload and its headers (name/value pairs, in order; a name may
/// repeat). Headers need a broker that grants `HEADERS`.
///
/// ```
/// use starling_client::Message;
/// let m = Message::new("order 42").header("traceparent", "00-ab-cd-01");
/// assert_eq!(m.headers[0].name, "traceparent");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Message {
    /// The payload.
    pub payload: Bytes,
    /// The headers.
    pub headers: Vec<Header>,
}

impl Message {
    /// A message without headers.
    pub fn new(payload: impl Into<Bytes>) -> Message {
        Message {
            payload: payload.into(),
            headers: Vec::new(),
        }
    }

    /// The message with one more header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Message {
        self.headers.push(Header::new(name, value));
        self
    }

    /// The message with a message id (the reserved `Starling-Msg-Id` header, replacing one
    /// already set): the topic drops a repeat of an id it saw within its window
    /// (`dedup_window_ms`, default 2 minutes) and answers it with the original's ack, so a
    /// publish retried after a lost ack is delivered once. Needs a broker that grants `DEDUP`
    /// ([`ClientError::Unsupported`] otherwise, nothing sent); the broker refuses an empty id
    /// (`InvalidRequest`) and one longer than its `max_msg_id_bytes` (128 by default,
    /// `LimitExceeded`). A replicated topic's window follows its committed log on every
    /// replica, so a retry after a leader change is dropped too; there a retry of an id still
    /// being committed, or one reaching a leader elected a moment ago, is refused with
    /// `Unavailable`: publish again (docs/durability.md).
    ///
    /// ```
    /// use starling_client::Message;
    /// let m = Message::new("order 42").with_msg_id("order-42");
    /// assert_eq!(m.msg_id(), Some("order-42"));
    /// ```
    #[must_use]
    pub fn with_msg_id(mut self, id: impl Into<String>) -> Message {
        self.headers.retain(|h| h.name != MSG_ID);
        self.headers.push(Header::new(MSG_ID, id));
        self
    }

    /// The message with the trace fields of `cx` (what the global text-map propagator
    /// writes: `traceparent` and `tracestate` for W3C trace context), unless it has them
    /// already. [`Client::publish_message`](crate::Client::publish_message) adds the current
    /// context's by itself; this is for a context other than the current one.
    #[must_use]
    pub fn with_trace_context(mut self, cx: &opentelemetry::Context) -> Message {
        crate::trace::inject(cx, &mut self.headers);
        self
    }

    /// The message id, if it has one.
    pub fn msg_id(&self) -> Option<&str> {
        starling_proto::msg_id(&self.headers)
    }
}

/// Whether `headers` carry a message id (they need a broker granting `DEDUP`).
pub(crate) fn has_msg_id(headers: &[Header]) -> bool {
    starling_proto::msg_id(headers).is_some()
}

/// Checks header names before anything is sent (the broker would refuse the frame as
/// malformed and end the stream).
pub(crate) fn check_headers(headers: &[Header]) -> Result<(), ClientError> {
    for h in headers {
        validate_header_name(&h.name)
            .map_err(|why| ClientError::InvalidHeader(format!("{:?}: {why}", h.name)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_msg_id_replaces_the_previous_one() {
        let m = Message::new("x")
            .with_msg_id("a")
            .header("k", "v")
            .with_msg_id("b");
        assert_eq!(m.msg_id(), Some("b"));
        assert_eq!(m.headers.len(), 2);
        assert!(has_msg_id(&m.headers));
        assert!(!has_msg_id(&Message::new("x").headers));
    }

    #[test]
    fn names_are_checked_before_sending() {
        assert!(check_headers(&[Header::new("ok", "any value: at all")]).is_ok());
        for bad in ["", "a b", "a:b"] {
            let err = check_headers(&[Header::new(bad, "v")]).expect_err(bad);
            assert!(matches!(err, ClientError::InvalidHeader(_)), "{err}");
        }
    }
}
