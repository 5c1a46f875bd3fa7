//! What one Raft entry of a topic carries ([`Batch`]: the message payloads of one publish)
//! and what applying it answers ([`Applied`]).
//!
//! A batch starts with a format version: what its content is (version 1 and 2: message
//! payloads only). How it is written is the entry codec's: this build stores it, and sends it
//! in appends, in the binary format of [`crate::entry_codec`] (payload bytes as they are).
//! The serde JSON below is what older builds stored and sent, and what snapshots and appends
//! to a peer that reads only JSON still use: version 1 wrote each payload as a JSON array of
//! byte values, version 2 as one base64 string. Both are read. Adding message headers later
//! is a version 3 whose decoder fills them; a replica refuses an entry whose version it does
//! not know ([`Batch::check`]) rather than guess.
//!
//! Payloads are shared [`Bytes`]: a batch decoded from a stored record or an append holds
//! slices of that record's one buffer, and a proposal holds the publish frame's own slices,
//! so no message is copied or allocated on its own between the publish and the subscriber
//! (only the encoders copy, once each, into the record or the frame they build).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use serde::de::{self, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The batch format this build writes.
pub const BATCH_VERSION: u8 = 2;
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
}

impl Batch {
    /// A batch of `messages` in this build's format (a `Vec<u8>` or a `Bytes` each: neither
    /// is copied).
    pub fn new<M: Into<Bytes>>(messages: impl IntoIterator<Item = M>) -> Batch {
        Batch {
            version: BATCH_VERSION,
            messages: messages.into_iter().map(Into::into).collect(),
        }
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
        };
        assert_eq!(newer.check(), Err(BATCH_VERSION + 1));
    }
}
