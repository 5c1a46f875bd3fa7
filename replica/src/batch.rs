//! What one Raft entry of a topic carries ([`Batch`]: the message payloads of one publish,
//! and their headers) and what applying it answers ([`Applied`]).
//!
//! A batch starts with a format version: what its content is. Versions 1 and 2 are message
//! payloads only; version 3 adds the messages' headers ([`Batch::headers`]). A batch without
//! headers is still written as version 2, so a replica of an older build (which refuses an
//! entry whose version it does not know, [`Batch::check`], rather than guess) keeps
//! applying every entry until a publish with headers comes: mixing builds during a roll
//! works as long as no publish on the topic carries headers.
//!
//! How a batch is written is the entry codec's: this build stores it, and sends it in
//! appends, in the binary format of [`crate::entry_codec`] (payload bytes as they are). The
//! serde JSON below is what older builds stored and sent, and what snapshots and appends to a
//! peer that reads only JSON still use: version 1 wrote each payload as a JSON array of byte
//! values, version 2 as one base64 string; version 3 adds `headers` as one base64 string.
//! All are read.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The newest batch format this build writes and reads: payloads and headers.
pub const BATCH_VERSION: u8 = 3;
/// The format of a batch without headers (what this build writes for one).
pub const PLAIN_BATCH_VERSION: u8 = 2;
/// The first format with headers.
pub const HEADERS_BATCH_VERSION: u8 = 3;
/// The oldest batch format this build reads.
pub const OLDEST_BATCH_VERSION: u8 = 1;

/// One publish: message payloads committed together under one log index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Batch {
    /// The format version ([`BATCH_VERSION`]).
    pub version: u8,
    /// The messages, in order.
    #[serde(serialize_with = "payloads_out", deserialize_with = "payloads_in")]
    pub messages: Vec<Bytes>,
    /// The messages' headers (version 3 on; empty for none): bytes the crate keeps and
    /// returns as they are (the broker's encoding of an indexed header list, which it
    /// checks and reads).
    #[serde(
        default,
        skip_serializing_if = "Bytes::is_empty",
        serialize_with = "headers_out",
        deserialize_with = "headers_in"
    )]
    pub headers: Bytes,
}

impl Batch {
    /// A batch of `messages` in this build's format (a `Vec<u8>` or a `Bytes` each: neither
    /// is copied).
    pub fn new<M: Into<Bytes>>(messages: impl IntoIterator<Item = M>) -> Batch {
        Batch::with_headers(messages, Bytes::new())
    }

    /// A batch of `messages` with their `headers` (empty for none): version 3 with headers,
    /// version 2 without.
    pub fn with_headers<M: Into<Bytes>>(
        messages: impl IntoIterator<Item = M>,
        headers: Bytes,
    ) -> Batch {
        Batch {
            version: if headers.is_empty() {
                PLAIN_BATCH_VERSION
            } else {
                HEADERS_BATCH_VERSION
            },
            messages: messages.into_iter().map(Into::into).collect(),
            headers,
        }
    }

    /// Whether its format has a headers section (version 3 on).
    pub fn has_headers_section(&self) -> bool {
        self.version >= HEADERS_BATCH_VERSION
    }

    /// Whether this build can read the batch: `Err(version)` for an unknown format.
    pub fn check(&self) -> Result<(), u8> {
        if (OLDEST_BATCH_VERSION..=BATCH_VERSION).contains(&self.version) {
            Ok(())
        } else {
            Err(self.version)
        }
    }

    /// Payload bytes in the batch.
    pub fn bytes(&self) -> usize {
        self.messages.iter().map(Bytes::len).sum()
    }
}

/// Writes each payload as a base64 string (version 2).
fn payloads_out<S: Serializer>(messages: &[Bytes], s: S) -> Result<S::Ok, S::Error> {
    let mut seq = s.serialize_seq(Some(messages.len()))?;
    for m in messages {
        seq.serialize_element(&STANDARD.encode(m))?;
    }
    seq.end()
}

/// Writes the headers as one base64 string (version 3).
fn headers_out<S: Serializer>(headers: &Bytes, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&STANDARD.encode(headers))
}

/// Reads the headers: one base64 string.
fn headers_in<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
    let text = String::deserialize(d)?;
    STANDARD
        .decode(text)
        .map(Bytes::from)
        .map_err(|e| de::Error::custom(format!("headers are not base64: {e}")))
}

/// Reads the payloads, each a base64 string (version 2) or an array of byte values
/// (version 1).
fn payloads_in<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Bytes>, D::Error> {
    struct Payloads;
    impl<'de> Visitor<'de> for Payloads {
        type Value = Vec<Bytes>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a list of payloads")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            // The size hint comes from the input: cap what it may preallocate.
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
            while let Some(Payload(p)) = seq.next_element()? {
                out.push(Bytes::from(p));
            }
            Ok(out)
        }
    }
    d.deserialize_seq(Payloads)
}

/// One payload in either format.
struct Payload(Vec<u8>);

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Payload, D::Error> {
        struct One;
        impl<'de> Visitor<'de> for One {
            type Value = Payload;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a base64 string or an array of byte values")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Payload, E> {
                STANDARD
                    .decode(v)
                    .map(Payload)
                    .map_err(|e| E::custom(format!("payload is not base64: {e}")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Payload, A::Error> {
                let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64 * 1024));
                while let Some(b) = seq.next_element::<u8>()? {
                    out.push(b);
                }
                Ok(Payload(out))
            }
        }
        d.deserialize_any(One)
    }
}

/// What the state machine answers for an applied entry: its position in the committed log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Applied {
    /// The entry's log index, which is its position (`seq`) in the committed log.
    pub index: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_are_base64_and_version_1_arrays_still_read() {
        let b = Batch::new([b"hello".to_vec(), vec![0, 255, 7], Vec::new()]);
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(json, r#"{"version":2,"messages":["aGVsbG8=","AP8H",""]}"#);
        assert_eq!(serde_json::from_str::<Batch>(&json).unwrap(), b);
        // What a version-1 build wrote.
        let old: Batch =
            serde_json::from_str(r#"{"version":1,"messages":[[104,105],[]]}"#).unwrap();
        assert_eq!(old.messages, vec![b"hi".to_vec(), Vec::new()]);
        assert_eq!(old.check(), Ok(()));
        // Malformed payloads are typed errors, never a panic.
        for bad in [
            r#"{"version":2,"messages":["%%%"]}"#,
            r#"{"version":1,"messages":[[256]]}"#,
            r#"{"version":2,"messages":[7]}"#,
        ] {
            assert!(serde_json::from_str::<Batch>(bad).is_err(), "{bad}");
        }
        let newer = Batch {
            version: BATCH_VERSION + 1,
            messages: Vec::new(),
            headers: Bytes::new(),
        };
        assert_eq!(newer.check(), Err(BATCH_VERSION + 1));
    }

    #[test]
    fn headers_make_a_version_3_batch_and_none_a_version_2_one() {
        let plain = Batch::with_headers([b"a".to_vec()], Bytes::new());
        assert_eq!(plain.version, PLAIN_BATCH_VERSION);
        assert!(!serde_json::to_string(&plain).unwrap().contains("headers"));
        let b = Batch::with_headers([b"a".to_vec()], Bytes::from_static(b"\x00\x01"));
        assert_eq!(b.version, HEADERS_BATCH_VERSION);
        let json = serde_json::to_string(&b).unwrap();
        assert_eq!(
            json,
            r#"{"version":3,"messages":["YQ=="],"headers":"AAE="}"#
        );
        assert_eq!(serde_json::from_str::<Batch>(&json).unwrap(), b);
        assert!(
            serde_json::from_str::<Batch>(r#"{"version":3,"messages":[],"headers":"%"}"#).is_err()
        );
        assert!(
            serde_json::from_str::<Batch>(r#"{"version":3,"messages":[],"headers":7}"#).is_err()
        );
    }
}
