//! What one record of a durable topic's log holds: one sealed batch as subscribers receive
//! it, the batch's `EventHeaders` frame (only when a message of the batch has headers) and
//! then its `EventBatch` frame, back to back. So a replay sends a record whole to a
//! subscriber granted `HEADERS` (the two frames in the order docs/protocol.md gives), the
//! `EventBatch` alone (a slice, no copy) to the others, and a consumer decodes both.
//!
//! A record without headers is exactly the `EventBatch` frame, byte for byte what the log has
//! always held, so logs written before headers read unchanged.
//!
//! [`msg_ids_since`] reads the message ids (`Starling-Msg-Id`) back out of a log's recent
//! records, so a topic's de-duplication window survives a restart or an owner change
//! ([`msg_ids_of`] does the same for a replicated topic's committed entries).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{Frame, FrameDecoder, FrameKind, IndexedHeaders, msg_id, peek_frame};
use starling_storage::LogView;

/// The record of a batch: its `EventHeaders` frame, if any, then its `EventBatch` frame.
pub fn join(headers: Option<&Bytes>, batch: &Bytes) -> Bytes {
    match headers {
        None => batch.clone(),
        Some(h) => {
            let mut out = BytesMut::with_capacity(h.len() + batch.len());
            out.extend_from_slice(h);
            out.extend_from_slice(batch);
            out.freeze()
        }
    }
}

/// A record taken apart: the headers frame, if it has one, and the rest (its `EventBatch`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parts {
    /// The whole `EventHeaders` frame.
    pub headers: Option<Bytes>,
    /// The whole `EventBatch` frame (or, for a record that is not well formed, everything
    /// after the headers: its decoder reports what is wrong).
    pub batch: Bytes,
}

/// Splits `record` into its frames. A record that does not start with a complete
/// `EventHeaders` frame followed by more bytes is all batch.
pub fn split(record: &Bytes) -> Parts {
    match peek_frame(record) {
        Ok(Some((FrameKind::EventHeaders, len))) if len < record.len() => Parts {
            headers: Some(record.slice(..len)),
            batch: record.slice(len..),
        },
        _ => Parts {
            headers: None,
            batch: record.clone(),
        },
    }
}

/// What a subscriber not granted `HEADERS` receives of `record`: its `EventBatch` alone.
pub fn without_headers(record: Bytes) -> Bytes {
    match peek_frame(&record) {
        Ok(Some((FrameKind::EventHeaders, len))) if len < record.len() => record.slice(len..),
        _ => record,
    }
}

/// The entries of `frame` when it is exactly one encoded `EventHeaders` frame (`None`
/// otherwise): the headers frame of a record (`split`) or of a replicated entry.
pub fn decode_headers(frame: &[u8]) -> Option<Vec<IndexedHeaders>> {
    let decoder = FrameDecoder::new(u32::try_from(frame.len()).unwrap_or(u32::MAX));
    let mut buf = BytesMut::from(frame);
    match decoder.decode(&mut buf) {
        Ok(Some(Frame::EventHeaders(h))) if buf.is_empty() => Some(h.entries),
        _ => None,
    }
}

/// The message ids of the records `view` holds stamped at or after `since_ms`, oldest first,
/// each with its record's age at `now_ms`; at most the newest `max` (a window keeps no more).
/// Blocking (it reads the log). A record that does not read or decode ends the scan or is
/// skipped: the window is rebuilt from what reads.
pub fn msg_ids_since(
    view: &LogView,
    since_ms: u64,
    now_ms: u64,
    max: usize,
) -> Vec<(String, Duration)> {
    let frames = view
        .read_from_time(since_ms)
        .map_while(Result::ok)
        .filter_map(|rec| Some((rec.timestamp_ms, split(&rec.payload).headers?)));
    msg_ids_of(frames, now_ms, max)
}

/// The message ids in `frames` (each an `EventHeaders` frame with the stamp of the record or
/// entry it came from, oldest first), each with its age at `now_ms`; at most the newest
/// `max`. A frame that does not decode is skipped. What [`msg_ids_since`] reads from a log,
/// and what a replicated topic reads back from its committed log.
pub fn msg_ids_of(
    frames: impl IntoIterator<Item = (u64, Bytes)>,
    now_ms: u64,
    max: usize,
) -> Vec<(String, Duration)> {
    let mut ids = VecDeque::new();
    if max == 0 {
        return Vec::new();
    }
    for (stamp, frame) in frames {
        let Some(entries) = decode_headers(&frame) else {
            continue;
        };
        let age = Duration::from_millis(now_ms.saturating_sub(stamp));
        for entry in entries {
            if let Some(id) = msg_id(&entry.headers) {
                if ids.len() == max {
                    ids.pop_front();
                }
                ids.push_back((id.to_string(), age));
            }
        }
    }
    ids.into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{EventHeaders, Header, encode_event_batch};

    fn batch() -> Bytes {
        let mut b = BytesMut::new();
        encode_event_batch(
            1,
            0,
            &[Bytes::from_static(b"a"), Bytes::from_static(b"b")],
            &mut b,
        );
        b.freeze()
    }

    fn headers() -> Bytes {
        Frame::EventHeaders(EventHeaders {
            entries: vec![IndexedHeaders {
                index: 1,
                headers: vec![Header::new("k", "v")],
            }],
        })
        .to_bytes()
    }

    #[test]
    fn a_record_without_headers_is_the_batch_frame() {
        let b = batch();
        let rec = join(None, &b);
        assert_eq!(rec, b);
        assert_eq!(
            split(&rec),
            Parts {
                headers: None,
                batch: b.clone()
            }
        );
        assert_eq!(without_headers(rec), b);
    }

    #[test]
    fn a_record_with_headers_splits_into_its_two_frames() {
        let (h, b) = (headers(), batch());
        let rec = join(Some(&h), &b);
        assert_eq!(rec.len(), h.len() + b.len());
        assert_eq!(
            split(&rec),
            Parts {
                headers: Some(h),
                batch: b.clone()
            }
        );
        assert_eq!(without_headers(rec), b);
    }

    #[test]
    fn only_exactly_one_headers_frame_decodes_as_headers() {
        let (h, b) = (headers(), batch());
        let entries = decode_headers(&h).unwrap_or_default();
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].index, 1);
        // A batch frame, a frame with bytes after it, a frame cut short, nothing.
        let joined = join(Some(&h), &b);
        for frame in [&b[..], &joined[..], &h[..h.len() - 1], &[][..]] {
            assert_eq!(decode_headers(frame), None);
        }
    }

    #[test]
    fn damaged_records_are_left_whole_for_the_decoder() {
        let h = headers();
        // A headers frame alone, or cut short: nothing to split off.
        for rec in [
            h.clone(),
            h.slice(..h.len() - 1),
            Bytes::from_static(b"\x01"),
        ] {
            assert_eq!(split(&rec).headers, None);
            assert_eq!(without_headers(rec.clone()), rec);
        }
    }
}
