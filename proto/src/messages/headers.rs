//! Message headers (the `HEADERS` feature): [`Header`] (one name/value pair), the header list of
//! one message, and [`IndexedHeaders`] (the headers of one message of a batch, by its index), as
//! carried by `Publish`, `PublishBatch` and `EventHeaders`; plus `EventHeaders` itself, which
//! carries the headers of the next `EventBatch`'s messages.
//!
//! Layouts:
//! - header: `name str | value str`; a name passes
//!   [`validate_header_name`](crate::validate_header_name);
//! - header list: `count u32 | count × header`, count at least 1 (a message without headers
//!   has no list);
//! - indexed list: `entries u32 | entries × (index u32 | header list)`, indices strictly
//!   increasing (so each message appears once), each entry with at least one header.

use bytes::{BufMut, BytesMut};

use crate::error::DecodeError;
use crate::validate::validate_header_name;
use crate::wire::{DecodeBody, EncodeBody, Reader, put_str, str_len};

/// One header of a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// The name (see [`validate_header_name`](crate::validate_header_name)); case is kept and
    /// compared exactly.
    pub name: String,
    /// The value: any UTF-8 text.
    pub value: String,
}

impl Header {
    /// A header from a name and a value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Header {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }

    /// Its encoded size: both length prefixes and both texts.
    pub fn encoded_len(&self) -> usize {
        str_len(&self.name) + str_len(&self.value)
    }
}

/// The encoded size of a header list (`count u32` and every header); what a message's headers
/// are charged at in the publish and queue budgets.
pub fn headers_len(headers: &[Header]) -> usize {
    4 + headers.iter().map(Header::encoded_len).sum::<usize>()
}

/// The headers of one message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexedHeaders {
    /// The message's index in its batch (0 = the first payload).
    pub index: u32,
    /// Its headers, at least one.
    pub headers: Vec<Header>,
}

/// The encoded size of an indexed list.
pub fn indexed_headers_len(entries: &[IndexedHeaders]) -> usize {
    4 + entries
        .iter()
        .map(|e| 4 + headers_len(&e.headers))
        .sum::<usize>()
}

pub(crate) fn put_headers(dst: &mut BytesMut, headers: &[Header]) {
    dst.put_u32(u32::try_from(headers.len()).unwrap_or(u32::MAX));
    for h in headers {
        put_str(dst, &h.name);
        put_str(dst, &h.value);
    }
}

pub(crate) fn read_headers(r: &mut Reader) -> Result<Vec<Header>, DecodeError> {
    // Each header is at least its two length prefixes.
    let count = r.count(4)?;
    if count == 0 {
        return Err(r.malformed("header list is empty"));
    }
    let mut headers = Vec::with_capacity(count);
    for _ in 0..count {
        let name = r.string()?;
        validate_header_name(&name).map_err(|reason| r.malformed(reason))?;
        let value = r.string()?;
        headers.push(Header { name, value });
    }
    Ok(headers)
}

pub(crate) fn put_indexed(dst: &mut BytesMut, entries: &[IndexedHeaders]) {
    dst.put_u32(u32::try_from(entries.len()).unwrap_or(u32::MAX));
    for e in entries {
        dst.put_u32(e.index);
        put_headers(dst, &e.headers);
    }
}

pub(crate) fn read_indexed(r: &mut Reader) -> Result<Vec<IndexedHeaders>, DecodeError> {
    // Each entry is at least its index and its header count.
    let count = r.count(8)?;
    let mut entries: Vec<IndexedHeaders> = Vec::with_capacity(count);
    for _ in 0..count {
        let index = r.u32()?;
        if entries.last().is_some_and(|last| last.index >= index) {
            return Err(r.malformed("header indices not strictly increasing"));
        }
        let headers = read_headers(r)?;
        entries.push(IndexedHeaders { index, headers });
    }
    Ok(entries)
}

/// The headers of the next `EventBatch` on this subscription stream: for each of its messages
/// that has headers, the message's index in that batch and its headers. Sent only to a
/// subscriber granted [`HEADERS`](crate::features::HEADERS), immediately before an `EventBatch`
/// (after its `BatchTopic` on a wildcard subscription) that has at least one message with
/// headers; a batch without headers has no `EventHeaders`. An index at or past the next
/// batch's event count is a protocol error the receiver refuses.
///
/// Layout: an indexed list (`entries u32 | entries × (index u32 | header list)`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventHeaders {
    /// The messages with headers, by strictly increasing index.
    pub entries: Vec<IndexedHeaders>,
}

impl EncodeBody for EventHeaders {
    fn body_len(&self) -> usize {
        indexed_headers_len(&self.entries)
    }

    fn encode_body(&self, dst: &mut BytesMut) {
        put_indexed(dst, &self.entries);
    }
}

impl DecodeBody for EventHeaders {
    fn decode_body(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(EventHeaders {
            entries: read_indexed(r)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::Frame;
    use crate::kind::FrameKind;
    use crate::messages::test_util::{decode, malformed, round_trip};

    #[test]
    fn event_headers_layout() {
        let frame = Frame::EventHeaders(EventHeaders {
            entries: vec![IndexedHeaders {
                index: 1,
                headers: vec![Header::new("k", "v")],
            }],
        });
        assert_eq!(
            round_trip(&frame),
            [0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'k', 0, 1, b'v']
        );
        assert_eq!(headers_len(&[Header::new("k", "v")]), 10);
        assert_eq!(indexed_headers_len(&[]), 4);
    }

    #[test]
    fn event_headers_rejects_repeats_empty_lists_and_bad_names() {
        let repeated = [
            0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1, b'k', 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 1,
            b'k', 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::EventHeaders, &repeated),
            malformed(
                FrameKind::EventHeaders,
                "header indices not strictly increasing"
            )
        );
        let empty = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0];
        assert_eq!(
            decode(FrameKind::EventHeaders, &empty),
            malformed(FrameKind::EventHeaders, "header list is empty")
        );
        let spaced = [
            0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 3, b'a', b' ', b'b', 0, 0,
        ];
        assert_eq!(
            decode(FrameKind::EventHeaders, &spaced),
            malformed(FrameKind::EventHeaders, "header name contains whitespace")
        );
    }
}
