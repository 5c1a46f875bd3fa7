//! The binary decoders on untrusted bytes (a stored entry, a committed record, an append
//! frame): any input, and any corruption of a valid encoding, is refused with a typed error
//! or decodes, never panics or allocates past what the bytes hold; encoded values decode back;
//! the JSON an older build wrote still reads.

use std::collections::{BTreeMap, BTreeSet};

use openraft::raft::AppendEntriesRequest;
use openraft::{BasicNode, CommittedLeaderId, EntryPayload, LogId, Membership, Vote};
use proptest::prelude::*;
use starling_replica::codec::{self, CodecError};
use starling_replica::committed::CommittedRecord;
use starling_replica::entry_codec::{self, ENTRY_TAG, RECORD_TAG};
use starling_replica::rpc::{self, Rpc};
use starling_replica::types::Entry;
use starling_replica::wire::{self, APPEND_TAG};
use starling_replica::{Batch, TypeConfig};

const MAX: usize = 1 << 16;

fn log_id() -> impl Strategy<Value = LogId<u64>> {
    (any::<u64>(), any::<u64>(), any::<u64>())
        .prop_map(|(t, n, i)| LogId::new(CommittedLeaderId::new(t, n), i))
}

fn batch() -> impl Strategy<Value = Batch> {
    (
        any::<u8>(),
        proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..8),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(|(version, messages, headers)| {
            // Only a format with a headers section (version 3 on) can carry headers.
            let headers = if version >= starling_replica::HEADERS_BATCH_VERSION {
                bytes::Bytes::from(headers)
            } else {
                bytes::Bytes::new()
            };
            Batch {
                version,
                messages: messages.into_iter().map(bytes::Bytes::from).collect(),
                headers,
            }
        })
}

fn membership() -> impl Strategy<Value = Membership<u64, BasicNode>> {
    proptest::collection::btree_set(0u64..6, 1..4).prop_map(|ids| {
        let nodes: BTreeMap<u64, BasicNode> = ids
            .iter()
            .map(|&id| (id, BasicNode::new(format!("n{id}"))))
            .collect();
        Membership::new(vec![ids.into_iter().collect::<BTreeSet<u64>>()], nodes)
    })
}

fn entry() -> impl Strategy<Value = Entry> {
    let payload = prop_oneof![
        Just(EntryPayload::<TypeConfig>::Blank),
        batch().prop_map(EntryPayload::Normal),
        membership().prop_map(EntryPayload::Membership),
    ];
    (log_id(), payload).prop_map(|(log_id, payload)| Entry { log_id, payload })
}

fn append() -> impl Strategy<Value = AppendEntriesRequest<TypeConfig>> {
    (
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
        proptest::option::of(log_id()),
        proptest::option::of(log_id()),
        proptest::collection::vec(entry(), 0..5),
    )
        .prop_map(
            |(term, node, committed, prev_log_id, leader_commit, entries)| {
                let vote = if committed {
                    Vote::new_committed(term, node)
                } else {
                    Vote::new(term, node)
                };
                AppendEntriesRequest {
                    vote,
                    prev_log_id,
                    entries,
                    leader_commit,
                }
            },
        )
}

fn same_append(a: &AppendEntriesRequest<TypeConfig>, b: &AppendEntriesRequest<TypeConfig>) -> bool {
    a.vote == b.vote
        && a.prev_log_id == b.prev_log_id
        && a.leader_commit == b.leader_commit
        && a.entries == b.entries
}

fn decoded_append(frame: &[u8]) -> AppendEntriesRequest<TypeConfig> {
    match rpc::decode_request(frame, MAX).unwrap() {
        Rpc::Append(a) => a,
        other => panic!("not an append: {other:?}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(tag in prop_oneof![Just(ENTRY_TAG), Just(RECORD_TAG), Just(APPEND_TAG), any::<u8>()],
                                   rest in proptest::collection::vec(any::<u8>(), 0..400)) {
        let mut bytes = vec![tag];
        bytes.extend_from_slice(&rest);
        let _ = entry_codec::decode_entry(&bytes, MAX);
        let _ = entry_codec::decode_record(&bytes, MAX);
        let mut frame = (bytes.len() as u32).to_be_bytes().to_vec();
        frame.extend_from_slice(&bytes);
        let _ = rpc::decode_request(&frame, MAX);
        let _ = rpc::decode_request(&bytes, MAX);
    }

    #[test]
    fn entries_and_records_round_trip(e in entry()) {
        let bytes = entry_codec::encode_entry(&e).unwrap();
        prop_assert_eq!(bytes[0], ENTRY_TAG);
        prop_assert_eq!(entry_codec::decode_entry(&bytes, MAX).unwrap(), e.clone());
        if let EntryPayload::Normal(b) = &e.payload {
            prop_assert_eq!(bytes.len(), entry_codec::batch_len(b));
        }
        // Any strict prefix or one more byte is refused.
        for cut in 0..bytes.len() {
            prop_assert!(entry_codec::decode_entry(&bytes[..cut], MAX).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        prop_assert!(entry_codec::decode_entry(&long, MAX).is_err());
        // What an older build wrote (JSON) reads to the same entry.
        let json = codec::encode_body(&e).unwrap();
        prop_assert_eq!(entry_codec::decode_entry(&json, MAX).unwrap(), e.clone());

        let record = CommittedRecord::of(e);
        let bytes = entry_codec::encode_record(&record).unwrap();
        prop_assert_eq!(bytes[0], RECORD_TAG);
        prop_assert_eq!(entry_codec::decode_record(&bytes, MAX).unwrap(), record.clone());
        let json = codec::encode_body(&record).unwrap();
        prop_assert_eq!(entry_codec::decode_record(&json, MAX).unwrap(), record);
    }

    #[test]
    fn corrupted_entries_never_panic(e in entry(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut bytes = entry_codec::encode_entry(&e).unwrap();
        let i = at.index(bytes.len());
        bytes[i] = byte;
        let _ = entry_codec::decode_entry(&bytes, MAX);
        bytes[0] = RECORD_TAG;
        let _ = entry_codec::decode_record(&bytes, MAX);
    }

    #[test]
    fn appends_round_trip(a in append()) {
        let frame = wire::encode_append(&a, MAX).unwrap();
        prop_assert_eq!(frame[codec::FRAME_HEADER], APPEND_TAG);
        prop_assert!(same_append(&decoded_append(&frame), &a));
        // The same request as JSON (what an older build sends) still decodes.
        let req = Rpc::Append(a.clone());
        let json = rpc::encode_request(&req, MAX, false).unwrap();
        prop_assert!(same_append(&decoded_append(&json), &a));
        let cut = &frame[..frame.len() - 1];
        let truncated = matches!(rpc::decode_request(cut, MAX), Err(CodecError::Truncated { .. }));
        prop_assert!(truncated);
        let mut long = frame.clone();
        long.push(0);
        prop_assert_eq!(rpc::decode_request(&long, MAX).err(), Some(CodecError::Trailing(1)));
        // A frame whose body lost its last byte (length prefix fixed up) is refused too.
        if frame.len() > codec::FRAME_HEADER + 1 {
            let mut short = frame[..frame.len() - 1].to_vec();
            let body = (short.len() - codec::FRAME_HEADER) as u32;
            short[..codec::FRAME_HEADER].copy_from_slice(&body.to_be_bytes());
            prop_assert!(rpc::decode_request(&short, MAX).is_err());
        }
    }

    #[test]
    fn corrupted_appends_never_panic(a in append(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
        let mut frame = wire::encode_append(&a, MAX).unwrap();
        let i = codec::FRAME_HEADER + at.index(frame.len() - codec::FRAME_HEADER);
        frame[i] = byte;
        let _ = rpc::decode_request(&frame, MAX);
    }

    #[test]
    fn huge_declared_counts_are_refused_before_allocating(count in any::<u32>()) {
        // An entry that declares `count` messages and holds none.
        let e = Entry { log_id: LogId::new(CommittedLeaderId::new(1, 1), 1), payload: EntryPayload::Normal(Batch::new(Vec::<Vec<u8>>::new())) };
        let mut bytes = entry_codec::encode_entry(&e).unwrap();
        let n = bytes.len();
        bytes[n - 4..].copy_from_slice(&count.to_le_bytes());
        let r = entry_codec::decode_entry(&bytes, MAX);
        prop_assert_eq!(r.is_ok(), count == 0);
    }
}

#[test]
fn an_append_over_the_bound_is_too_large() {
    let big = Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), 1),
        payload: EntryPayload::Normal(Batch::new(vec![vec![7; 2000]])),
    };
    let a = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(1, 1),
        prev_log_id: None,
        entries: vec![big.clone(), big],
        leader_commit: None,
    };
    assert!(matches!(
        wire::encode_append(&a, 3000),
        Err(CodecError::TooLarge { .. })
    ));
    assert!(wire::encode_append(&a, 5000).is_ok());
    // A receiver with a smaller bound refuses it from the prefix.
    let frame = wire::encode_append(&a, 5000).unwrap();
    assert!(matches!(
        rpc::decode_request(&frame, 3000),
        Err(CodecError::TooLarge { .. })
    ));
}

/// Whether `part` lies inside `whole`'s memory (a slice of it, not a copy).
fn within(part: &[u8], whole: &[u8]) -> bool {
    let (start, end) = (
        whole.as_ptr() as usize,
        whole.as_ptr() as usize + whole.len(),
    );
    let p = part.as_ptr() as usize;
    p >= start && p + part.len() <= end
}

#[test]
fn shared_decoders_hand_out_slices_of_the_buffer_not_copies() {
    let messages = vec![vec![1u8; 300], Vec::new(), b"three".to_vec()];
    let entry = Entry {
        log_id: LogId::new(CommittedLeaderId::new(3, 2), 9),
        payload: EntryPayload::Normal(Batch::new(messages.clone())),
    };
    // A stored Raft log entry.
    let stored = bytes::Bytes::from(entry_codec::encode_entry(&entry).unwrap());
    let decoded = entry_codec::decode_entry_shared(&stored, MAX).unwrap();
    assert_eq!(decoded, entry);
    let EntryPayload::Normal(batch) = &decoded.payload else {
        panic!("not a batch: {decoded:?}")
    };
    assert_eq!(batch.messages, messages);
    for m in batch.messages.iter().filter(|m| !m.is_empty()) {
        assert!(within(m, &stored), "a message was copied out of the entry");
    }
    // A committed record.
    let record = CommittedRecord::of(entry.clone());
    let stored = bytes::Bytes::from(entry_codec::encode_record(&record).unwrap());
    let CommittedRecord::Batch { batch, .. } =
        entry_codec::decode_record_shared(&stored, MAX).unwrap()
    else {
        panic!("not a batch record")
    };
    assert_eq!(batch.messages, messages);
    for m in batch.messages.iter().filter(|m| !m.is_empty()) {
        assert!(within(m, &stored), "a message was copied out of the record");
    }
    // An append frame: every entry's messages are slices of the frame's body.
    let a = AppendEntriesRequest::<TypeConfig> {
        vote: Vote::new_committed(3, 2),
        prev_log_id: None,
        entries: vec![entry.clone(), entry],
        leader_commit: None,
    };
    let frame = wire::encode_append(&a, MAX).unwrap();
    let body = bytes::Bytes::from(codec::frame_body(&frame, MAX).unwrap().to_vec());
    let got = wire::decode_append_shared(&body, MAX).unwrap();
    assert_eq!(got.entries, a.entries);
    for e in &got.entries {
        let EntryPayload::Normal(batch) = &e.payload else {
            panic!("not a batch: {e:?}")
        };
        for m in batch.messages.iter().filter(|m| !m.is_empty()) {
            assert!(within(m, &body), "a message was copied out of the append");
        }
    }
}
