//! [`Message`]: a payload with headers, as [`Client::publish_message`](crate::Client::publish_message)
//! publishes it, and the client-side check of its headers.

use bytes::Bytes;
use starling_proto::{Header, validate_header_name};

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
    fn names_are_checked_before_sending() {
        assert!(check_headers(&[Header::new("ok", "any value: at all")]).is_ok());
        for bad in ["", "a b", "a:b"] {
            let err = check_headers(&[Header::new(bad, "v")]).expect_err(bad);
            assert!(matches!(err, ClientError::InvalidHeader(_)), "{err}");
        }
    }
}
