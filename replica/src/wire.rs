//! The binary append request ([`APPEND_TAG`], format 1: [`encode_append`], [`decode_append`]);
//! [`crate::rpc::encode_request`] and [`crate::rpc::decode_request`] pick it or JSON.
//!
//! An append carries the bulk of a topic's bytes, so it has a binary body: inside the usual
//! frame (a 4-byte big-endian length, [`crate::codec`]), the tag, then little-endian:
//!
//! | bytes | what |
//! |---|---|
//! | 1 | [`APPEND_TAG`] |
//! | 8, 8, 1 | the leader's vote: term, node id, committed (0 or 1) |
//! | 1 (+ 24) | the previous log id: 0 for none, or 1 and term, node id, index |
//! | 1 (+ 24) | the leader's commit, the same way |
//! | 4 | the entry count |
//! | per entry 4 + n | its length, then the entry in the Raft log's format ([`crate::entry_codec`]) |
//!
//! Votes, snapshot chunks, probes and replies stay JSON (small or rare). A receiver reads
//! both: a JSON body starts with `{` or `"`, never with the tag. A sender whose peer refuses
//! the binary append as malformed (a build from before it, during a rolling upgrade) sends
//! that peer JSON for a while ([`crate::network`]), so mixed versions keep replicating.
//!
//! The decoder bounds every length by the bytes present before it allocates, and refuses
//! truncated, trailing or malformed frames with a typed [`CodecError`], never a panic
//! (`replica/tests/replica/codec.rs`, proptests).

use bytes::Bytes;
use openraft::Vote;
use openraft::raft::AppendEntriesRequest;

use crate::codec::{CodecError, FRAME_HEADER};
use crate::entry_codec::{self, Cursor};
use crate::types::{LogId, TypeConfig};

/// The first body byte of a binary append request (format 1).
pub const APPEND_TAG: u8 = 0xA1;

fn put_log_id(out: &mut Vec<u8>, id: Option<&LogId>) {
    match id {
        None => out.push(0),
        Some(l) => {
            out.push(1);
            out.extend_from_slice(&l.leader_id.term.to_le_bytes());
            out.extend_from_slice(&l.leader_id.node_id.to_le_bytes());
            out.extend_from_slice(&l.index.to_le_bytes());
        }
    }
}

fn get_log_id(c: &mut Cursor<'_>) -> Result<Option<LogId>, CodecError> {
    match c.u8()? {
        0 => Ok(None),
        1 => Ok(Some(c.log_id()?)),
        other => Err(CodecError::Body(format!("log id flag {other}"))),
    }
}

fn too_large(len: usize, max: usize) -> CodecError {
    CodecError::TooLarge { len, max }
}

/// The frame of an append in the binary format, of at most `max` bytes (prefix included).
pub fn encode_append(
    req: &AppendEntriesRequest<TypeConfig>,
    max: usize,
) -> Result<Vec<u8>, CodecError> {
    let payload: usize = req
        .entries
        .iter()
        .map(|e| match &e.payload {
            openraft::EntryPayload::Normal(b) => 4 + entry_codec::batch_len(b),
            _ => 4 + entry_codec::HEAD_BYTES,
        })
        .fold(64usize, usize::saturating_add);
    let mut out = Vec::with_capacity(payload.min(max));
    out.extend_from_slice(&[0; FRAME_HEADER]);
    out.push(APPEND_TAG);
    out.extend_from_slice(&req.vote.leader_id.term.to_le_bytes());
    out.extend_from_slice(&req.vote.leader_id.node_id.to_le_bytes());
    out.push(u8::from(req.vote.committed));
    put_log_id(&mut out, req.prev_log_id.as_ref());
    put_log_id(&mut out, req.leader_commit.as_ref());
    let count = u32::try_from(req.entries.len()).map_err(|_| too_large(usize::MAX, max))?;
    out.extend_from_slice(&count.to_le_bytes());
    for entry in &req.entries {
        // Each entry is encoded in place after a length placeholder: its bytes are copied
        // once, into the frame.
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        entry_codec::encode_entry_into(entry, &mut out)?;
        if out.len() > max {
            return Err(too_large(out.len(), max));
        }
        let n = out.len() - at - 4;
        let len = u32::try_from(n).map_err(|_| too_large(n, max))?;
        out[at..at + 4].copy_from_slice(&len.to_le_bytes());
    }
    if out.len() > max {
        return Err(too_large(out.len(), max));
    }
    let body = u32::try_from(out.len() - FRAME_HEADER).map_err(|_| too_large(out.len(), max))?;
    out[..FRAME_HEADER].copy_from_slice(&body.to_be_bytes());
    Ok(out)
}

/// Parses the body of a binary append frame (its first byte [`APPEND_TAG`]) of at most
/// `max` bytes. Copies `body` once (one buffer for the whole frame, whose entries' messages
/// are slices of it); [`decode_append_shared`] does not copy.
pub fn decode_append(
    body: &[u8],
    max: usize,
) -> Result<AppendEntriesRequest<TypeConfig>, CodecError> {
    if body.first() != Some(&APPEND_TAG) {
        return Err(CodecError::Body("not a binary append".into()));
    }
    decode_append_shared(&Bytes::copy_from_slice(body), max)
}

/// [`decode_append`] of a shared buffer: the entries' messages are slices of it.
pub fn decode_append_shared(
    body: &Bytes,
    max: usize,
) -> Result<AppendEntriesRequest<TypeConfig>, CodecError> {
    let mut c = Cursor::new(body);
    if c.u8()? != APPEND_TAG {
        return Err(CodecError::Body("not a binary append".into()));
    }
    let term = c.u64()?;
    let node = c.u64()?;
    let committed = match c.u8()? {
        0 => false,
        1 => true,
        other => return Err(CodecError::Body(format!("vote committed flag {other}"))),
    };
    let vote = if committed {
        Vote::new_committed(term, node)
    } else {
        Vote::new(term, node)
    };
    let prev_log_id = get_log_id(&mut c)?;
    let leader_commit = get_log_id(&mut c)?;
    let count = c.u32()? as usize;
    // Each entry takes at least its 4-byte length and its fixed head.
    if count > c.left() / (4 + entry_codec::HEAD_BYTES) {
        return Err(CodecError::Body(format!(
            "{count} entries declared in {} bytes",
            c.left()
        )));
    }
    let mut entries = Vec::with_capacity(count);
    for _ in 0..count {
        let len = c.u32()? as usize;
        let bytes = c.take(len)?;
        if bytes.first() != Some(&entry_codec::ENTRY_TAG) {
            return Err(CodecError::Body("an append's entry is not binary".into()));
        }
        entries.push(entry_codec::decode_entry_shared(
            &body.slice_ref(bytes),
            max,
        )?);
    }
    c.end()?;
    Ok(AppendEntriesRequest {
        vote,
        prev_log_id,
        entries,
        leader_commit,
    })
}
