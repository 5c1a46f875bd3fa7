//! The binary format of one Raft entry as the Raft log stores it and an append carries it
//! ([`encode_entry`], [`decode_entry`]), and of one committed-log record
//! ([`encode_record`], [`decode_record`]).
//!
//! Both are the same layout (little-endian), after a tag byte that says which of the two it
//! is and which format:
//!
//! | bytes | what |
//! |---|---|
//! | 1 | tag: [`ENTRY_TAG`] (a Raft log entry) or [`RECORD_TAG`] (a committed record), format 1 |
//! | 8, 8, 8 | the log id: term, leader node id, index |
//! | 1 | kind: 0 a leader's blank entry, 1 a publish, 2 a membership change |
//! | publish: 1, 4, then per message 4 + n | the batch's version, the message count, each message's length and bytes |
//! | publish, batch version 3 on: 4 + h | the headers' length and bytes (opaque here: `Batch::headers`) |
//! | membership: the rest | the configuration as JSON (rare and small) |
//!
//! Payload bytes are copied once when encoded and never when decoded: a decoder given the
//! record's or the frame's shared buffer ([`decode_entry_shared`], [`decode_record_shared`])
//! returns each message as a slice of it (no base64, no JSON scan, no allocation per
//! message). The format before this
//! one was the serde JSON of the same values (batch versions 1 and 2: payloads as arrays of
//! byte values, then as base64 strings); a JSON body starts with `{`, never with a tag byte,
//! so both decoders read either and a log written by an older build still opens.
//!
//! These bytes come from a disk or the network: the decoders bound every length by the bytes
//! present (and the whole by `max`) before they allocate, and refuse truncated, trailing or
//! malformed input with a typed [`CodecError`]; they never panic (`replica/tests/replica/codec.rs`,
//! proptests).

use bytes::Bytes;
use openraft::{CommittedLeaderId, EntryPayload, Membership};

use crate::batch::Batch;
use crate::codec::{self, CodecError};
use crate::committed::CommittedRecord;
use crate::types::{Entry, LogId, Node, NodeId};

/// The first byte of a binary Raft log entry (format 1).
pub const ENTRY_TAG: u8 = 0xB1;
/// The first byte of a binary committed record (format 1).
pub const RECORD_TAG: u8 = 0xB2;
/// Bytes of the fixed part: tag, log id, kind.
pub const HEAD_BYTES: usize = 1 + 24 + 1;
/// Bytes a publish adds besides its messages' bytes: the batch version and the count, and
/// 4 per message.
pub const BATCH_HEAD_BYTES: usize = 1 + 4;

const KIND_BLANK: u8 = 0;
const KIND_BATCH: u8 = 1;
const KIND_MEMBERSHIP: u8 = 2;

/// What an entry or a record carries, borrowed for encoding.
enum Parts<'a> {
    Blank,
    Batch(&'a Batch),
    Membership(&'a Membership<NodeId, Node>),
}

/// What an entry or a record carries, decoded.
enum Payload {
    Blank,
    Batch(Batch),
    Membership(Membership<NodeId, Node>),
}

/// The exact encoded length of an entry carrying `messages` (of these lengths) and no
/// headers section (a batch of version 2 and before).
pub fn batch_entry_len<'a>(messages: impl IntoIterator<Item = &'a Bytes>) -> usize {
    HEAD_BYTES
        + BATCH_HEAD_BYTES
        + messages
            .into_iter()
            .map(|m| 4usize.saturating_add(m.len()))
            .fold(0usize, usize::saturating_add)
}

/// The exact encoded length of an entry carrying `batch`, its headers section included.
pub fn batch_len(batch: &Batch) -> usize {
    let headers = if batch.has_headers_section() {
        4usize.saturating_add(batch.headers.len())
    } else {
        0
    };
    batch_entry_len(&batch.messages).saturating_add(headers)
}

fn put_log_id(out: &mut Vec<u8>, log_id: &LogId) {
    out.extend_from_slice(&log_id.leader_id.term.to_le_bytes());
    out.extend_from_slice(&log_id.leader_id.node_id.to_le_bytes());
    out.extend_from_slice(&log_id.index.to_le_bytes());
}

fn u32_of(n: usize) -> Result<u32, CodecError> {
    u32::try_from(n).map_err(|_| CodecError::TooLarge {
        len: n,
        max: u32::MAX as usize,
    })
}

fn encode(tag: u8, log_id: &LogId, parts: Parts<'_>) -> Result<Vec<u8>, CodecError> {
    let mut out = Vec::with_capacity(match &parts {
        Parts::Batch(batch) => batch_len(batch),
        _ => HEAD_BYTES,
    });
    encode_into(tag, log_id, parts, &mut out)?;
    Ok(out)
}

/// Appends the encoding to `out` (an append frame builds its entries in place).
fn encode_into(
    tag: u8,
    log_id: &LogId,
    parts: Parts<'_>,
    out: &mut Vec<u8>,
) -> Result<(), CodecError> {
    out.push(tag);
    put_log_id(out, log_id);
    match parts {
        Parts::Blank => out.push(KIND_BLANK),
        Parts::Batch(batch) => {
            out.reserve(batch_len(batch) - HEAD_BYTES);
            out.push(KIND_BATCH);
            out.push(batch.version);
            out.extend_from_slice(&u32_of(batch.messages.len())?.to_le_bytes());
            for m in &batch.messages {
                out.extend_from_slice(&u32_of(m.len())?.to_le_bytes());
                out.extend_from_slice(m);
            }
            if batch.has_headers_section() {
                out.extend_from_slice(&u32_of(batch.headers.len())?.to_le_bytes());
                out.extend_from_slice(&batch.headers);
            } else if !batch.headers.is_empty() {
                return Err(CodecError::Body(format!(
                    "a version {} batch has no place for headers",
                    batch.version
                )));
            }
        }
        Parts::Membership(m) => {
            out.push(KIND_MEMBERSHIP);
            out.extend_from_slice(&codec::encode_body(m)?);
        }
    }
    Ok(())
}

/// A cursor over untrusted bytes: every read checks what is left.
pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Cursor<'a> {
        Cursor { bytes, at: 0 }
    }

    pub(crate) fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.bytes.len());
        let Some(end) = end else {
            return Err(CodecError::Truncated {
                have: self.bytes.len(),
                need: self.at.saturating_add(n),
            });
        };
        let out = &self.bytes[self.at..end];
        self.at = end;
        Ok(out)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, CodecError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, CodecError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    pub(crate) fn log_id(&mut self) -> Result<LogId, CodecError> {
        let term = self.u64()?;
        let node = self.u64()?;
        let index = self.u64()?;
        Ok(LogId::new(CommittedLeaderId::new(term, node), index))
    }

    pub(crate) fn rest(&mut self) -> &'a [u8] {
        let out = &self.bytes[self.at..];
        self.at = self.bytes.len();
        out
    }

    /// Refuses bytes left over.
    pub(crate) fn end(&self) -> Result<(), CodecError> {
        match self.left() {
            0 => Ok(()),
            n => Err(CodecError::Trailing(n)),
        }
    }
}

fn decode(tag: u8, bytes: &Bytes, max: usize) -> Result<(LogId, Payload), CodecError> {
    if bytes.len() > max {
        return Err(CodecError::TooLarge {
            len: bytes.len(),
            max,
        });
    }
    let mut c = Cursor::new(bytes);
    let got = c.u8()?;
    if got != tag {
        return Err(CodecError::Body(format!(
            "tag {got:#04x}, expected {tag:#04x}"
        )));
    }
    let log_id = c.log_id()?;
    let payload = match c.u8()? {
        KIND_BLANK => Payload::Blank,
        KIND_BATCH => {
            let version = c.u8()?;
            let count = c.u32()? as usize;
            // Each message takes at least its 4-byte length: a count the bytes cannot hold is
            // refused before anything is allocated for it.
            if count > c.left() / 4 {
                return Err(CodecError::Body(format!(
                    "{count} messages declared in {} bytes",
                    c.left()
                )));
            }
            let mut messages = Vec::with_capacity(count);
            for _ in 0..count {
                let len = c.u32()? as usize;
                // A slice of the shared buffer: no copy.
                messages.push(bytes.slice_ref(c.take(len)?));
            }
            let mut batch = Batch {
                version,
                messages,
                headers: Bytes::new(),
            };
            if batch.has_headers_section() {
                let len = c.u32()? as usize;
                batch.headers = bytes.slice_ref(c.take(len)?);
            }
            Payload::Batch(batch)
        }
        KIND_MEMBERSHIP => Payload::Membership(codec::decode_body(c.rest(), max)?),
        other => return Err(CodecError::Body(format!("unknown entry kind {other}"))),
    };
    c.end()?;
    Ok((log_id, payload))
}

fn parts_of(entry: &Entry) -> Parts<'_> {
    match &entry.payload {
        EntryPayload::Blank => Parts::Blank,
        EntryPayload::Normal(b) => Parts::Batch(b),
        EntryPayload::Membership(m) => Parts::Membership(m),
    }
}

/// A Raft log entry's bytes (this build's format).
pub fn encode_entry(entry: &Entry) -> Result<Vec<u8>, CodecError> {
    encode(ENTRY_TAG, &entry.log_id, parts_of(entry))
}

/// Appends a Raft log entry's bytes (this build's format) to `out`.
pub fn encode_entry_into(entry: &Entry, out: &mut Vec<u8>) -> Result<(), CodecError> {
    encode_into(ENTRY_TAG, &entry.log_id, parts_of(entry), out)
}

/// Parses a Raft log entry of at most `max` bytes, in this build's format or the JSON of
/// older builds. Copies `bytes` once; [`decode_entry_shared`] does not.
pub fn decode_entry(bytes: &[u8], max: usize) -> Result<Entry, CodecError> {
    if bytes.first() != Some(&ENTRY_TAG) {
        return codec::decode_body(bytes, max);
    }
    decode_entry_shared(&Bytes::copy_from_slice(bytes), max)
}

/// [`decode_entry`] of a shared buffer: the messages are slices of it.
pub fn decode_entry_shared(bytes: &Bytes, max: usize) -> Result<Entry, CodecError> {
    if bytes.first() != Some(&ENTRY_TAG) {
        return codec::decode_body(bytes, max);
    }
    let (log_id, payload) = decode(ENTRY_TAG, bytes, max)?;
    let payload = match payload {
        Payload::Blank => EntryPayload::Blank,
        Payload::Batch(b) => EntryPayload::Normal(b),
        Payload::Membership(m) => EntryPayload::Membership(m),
    };
    Ok(Entry { log_id, payload })
}

/// A committed record's bytes (this build's format).
pub fn encode_record(record: &CommittedRecord) -> Result<Vec<u8>, CodecError> {
    match record {
        CommittedRecord::Blank { log_id } => encode(RECORD_TAG, log_id, Parts::Blank),
        CommittedRecord::Batch { log_id, batch } => encode(RECORD_TAG, log_id, Parts::Batch(batch)),
        CommittedRecord::Membership { log_id, membership } => {
            encode(RECORD_TAG, log_id, Parts::Membership(membership))
        }
    }
}

/// Parses a committed record of at most `max` bytes, in this build's format or the JSON of
/// older builds. Copies `bytes` once; [`decode_record_shared`] does not.
pub fn decode_record(bytes: &[u8], max: usize) -> Result<CommittedRecord, CodecError> {
    if bytes.first() != Some(&RECORD_TAG) {
        return codec::decode_body(bytes, max);
    }
    decode_record_shared(&Bytes::copy_from_slice(bytes), max)
}

/// [`decode_record`] of a shared buffer: the messages are slices of it.
pub fn decode_record_shared(bytes: &Bytes, max: usize) -> Result<CommittedRecord, CodecError> {
    if bytes.first() != Some(&RECORD_TAG) {
        return codec::decode_body(bytes, max);
    }
    let (log_id, payload) = decode(RECORD_TAG, bytes, max)?;
    Ok(match payload {
        Payload::Blank => CommittedRecord::Blank { log_id },
        Payload::Batch(batch) => CommittedRecord::Batch { log_id, batch },
        Payload::Membership(membership) => CommittedRecord::Membership { log_id, membership },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log_id(term: u64, node: u64, index: u64) -> LogId {
        LogId::new(CommittedLeaderId::new(term, node), index)
    }

    #[test]
    fn layout_is_as_documented() {
        let entry = Entry {
            log_id: log_id(2, 7, 9),
            payload: EntryPayload::Normal(Batch::new([b"ab".to_vec(), Vec::new()])),
        };
        let bytes = encode_entry(&entry).unwrap();
        let mut want = vec![ENTRY_TAG];
        for v in [2u64, 7, 9] {
            want.extend_from_slice(&v.to_le_bytes());
        }
        want.extend_from_slice(&[KIND_BATCH, crate::batch::PLAIN_BATCH_VERSION, 2, 0, 0, 0]);
        want.extend_from_slice(&[2, 0, 0, 0, b'a', b'b', 0, 0, 0, 0]);
        assert_eq!(bytes, want);
        assert_eq!(
            bytes.len(),
            batch_entry_len(&[Bytes::from_static(b"ab"), Bytes::new()])
        );
        assert_eq!(decode_entry(&bytes, 1 << 20).unwrap(), entry);
        // The JSON of an older build still reads, and a record is not an entry.
        let json = codec::encode_body(&entry).unwrap();
        assert_eq!(decode_entry(&json, 1 << 20).unwrap(), entry);
        let record = CommittedRecord::of(entry);
        let r = encode_record(&record).unwrap();
        assert_eq!(decode_record(&r, 1 << 20).unwrap(), record);
        assert!(decode_entry(&r, 1 << 20).is_err());
        assert!(decode_entry(&bytes, bytes.len() - 1).is_err());
    }

    #[test]
    fn a_batch_with_headers_ends_with_its_headers_section() {
        let batch = Batch::with_headers([b"ab".to_vec()], Bytes::from_static(b"hdr"));
        let entry = Entry {
            log_id: log_id(1, 1, 1),
            payload: EntryPayload::Normal(batch.clone()),
        };
        let bytes = encode_entry(&entry).unwrap();
        assert_eq!(bytes.len(), batch_len(&batch));
        assert_eq!(bytes[HEAD_BYTES], crate::batch::HEADERS_BATCH_VERSION);
        assert!(bytes.ends_with(&[3, 0, 0, 0, b'h', b'd', b'r']));
        assert_eq!(decode_entry(&bytes, 1 << 20).unwrap(), entry);
        // Its JSON (a peer that reads only JSON, a snapshot) keeps the headers too.
        let json = codec::encode_body(&entry).unwrap();
        assert_eq!(decode_entry(&json, 1 << 20).unwrap(), entry);
        // A headers section cut short is refused, never read past.
        assert!(decode_entry(&bytes[..bytes.len() - 1], 1 << 20).is_err());
        // A version 2 batch cannot carry headers.
        let wrong = Entry {
            log_id: log_id(1, 1, 1),
            payload: EntryPayload::Normal(Batch {
                version: crate::batch::PLAIN_BATCH_VERSION,
                ..batch
            }),
        };
        assert!(encode_entry(&wrong).is_err());
    }
}
