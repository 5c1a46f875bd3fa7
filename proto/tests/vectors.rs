//! Checks the hand-written vectors in `tests/vectors/`: valid ones decode
//! to the expected value and re-encode byte for byte; invalid ones fail
//! with the stated error.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod common;

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use starling_proto::{
    AckMode, BatchTopic, CacheDelete, CacheGet, CacheOk, CachePut, CacheValue, ClusterInfo,
    ClusterInfoRequest, ConsumerAck, ConsumerAckOp, ConsumerMessage, ConsumerOk, ConsumerOpen,
    ConsumerStart, ErrorCode, ErrorFrame, EventBatch, EventHeaders, Frame, FrameDecoder, FrameKind,
    Header, Hello, HelloOk, IndexedHeaders, LogChunk, LogClaim, LogClaimed, LogRead, Member, Moved,
    Ping, Position, Publish, PublishAck, PublishBatch, ReplicaRpc, StartAt, Subscribe, SubscribeOk,
    Unsubscribe, features,
};

const LIMIT: u32 = 1 << 20;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

fn hex_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .expect("vectors dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    files.sort();
    files
}

fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

/// The value each valid vector must decode to, written from the vector's
/// comment, independently of the encoder.
fn expected(name: &str) -> Frame {
    match name {
        "hello" => Frame::Hello(Hello {
            min_version: 2,
            max_version: 2,
            features: features::BATCH_PUBLISH | features::CACHE | features::AUTH_TOKEN,
            client_name: "app".into(),
            auth_token: Some(b(b"secret")),
        }),
        "hello.no_token" => Frame::Hello(Hello {
            min_version: 2,
            max_version: 3,
            features: 0,
            client_name: String::new(),
            auth_token: None,
        }),
        "hello_ok" => Frame::HelloOk(HelloOk {
            version: 2,
            features: 3,
            server_id: "node-1".into(),
            max_frame_bytes: 1 << 20,
            epoch: 7,
        }),
        "publish" => Frame::Publish(Publish {
            request_id: 1,
            ack: AckMode::Ack,
            topic: "orders".into(),
            payload: b(b"hello"),
            headers: Vec::new(),
        }),
        "publish.headers" => Frame::Publish(Publish {
            request_id: 1,
            ack: AckMode::Ack,
            topic: "orders".into(),
            payload: b(b"hello"),
            headers: vec![Header::new("trace", "t1")],
        }),
        "publish_batch.headers" => Frame::PublishBatch(PublishBatch {
            request_id: 2,
            ack: AckMode::None,
            topic: "t.1".into(),
            payloads: vec![b(b"a"), b(b""), b(b"bc")],
            headers: vec![IndexedHeaders {
                index: 2,
                headers: vec![Header::new("k", "v")],
            }],
        }),
        "event_headers" => Frame::EventHeaders(EventHeaders {
            entries: vec![
                IndexedHeaders {
                    index: 0,
                    headers: vec![Header::new("traceparent", "00-ab")],
                },
                IndexedHeaders {
                    index: 3,
                    headers: vec![Header::new("a", "1"), Header::new("b", "")],
                },
            ],
        }),
        "publish_batch" => Frame::PublishBatch(PublishBatch {
            request_id: 2,
            ack: AckMode::None,
            topic: "t.1".into(),
            payloads: vec![b(b"a"), b(b""), b(b"bc")],
            headers: Vec::new(),
        }),
        "publish_ack" => Frame::PublishAck(PublishAck {
            request_id: 2,
            count: 3,
        }),
        "subscribe" => Frame::Subscribe(Subscribe {
            group: None,
            request_id: 3,
            topic: "orders".into(),
            start: StartAt::Live,
        }),
        "subscribe.resume" => Frame::Subscribe(Subscribe {
            group: None,
            request_id: 4,
            topic: "orders".into(),
            start: StartAt::Position(Position {
                stream: 0x0a0b_0c0d_0e0f_1011,
                seq: 500,
            }),
        }),
        "subscribe.time" => Frame::Subscribe(Subscribe {
            group: None,
            request_id: 5,
            topic: "orders".into(),
            start: StartAt::TimeMs(1_767_225_600_000),
        }),
        "subscribe.group" => Frame::Subscribe(Subscribe {
            group: Some("workers".into()),
            request_id: 6,
            topic: "orders.>".into(),
            start: StartAt::Live,
        }),
        "subscribe_ok" => Frame::SubscribeOk(SubscribeOk {
            request_id: 3,
            subscription_id: 0x0102_0304_0506_0708,
        }),
        "unsubscribe" => Frame::Unsubscribe(Unsubscribe {
            request_id: 4,
            subscription_id: 0x0102_0304_0506_0708,
        }),
        "event_batch" => Frame::EventBatch(EventBatch {
            stream: 0x0a0b_0c0d_0e0f_1011,
            first_seq: 100,
            events: vec![b(b"x"), b(b"yz")],
        }),
        "batch_topic" => Frame::BatchTopic(BatchTopic {
            topic: "orders.eu".into(),
        }),
        "cache_put" => Frame::CachePut(CachePut {
            request_id: 5,
            key: b(b"k1"),
            value: b(b"v"),
            ttl_ms: 60_000,
        }),
        "cache_get" => Frame::CacheGet(CacheGet {
            request_id: 6,
            key: b(b"k1"),
        }),
        "cache_delete" => Frame::CacheDelete(CacheDelete {
            request_id: 7,
            key: b(b"k1"),
        }),
        "cache_value" => Frame::CacheValue(CacheValue {
            request_id: 6,
            value: Some(b(b"v")),
        }),
        "cache_value.missing" => Frame::CacheValue(CacheValue {
            request_id: 6,
            value: None,
        }),
        "cache_ok" => Frame::CacheOk(CacheOk {
            request_id: 5,
            existed: false,
        }),
        "error" => Frame::Error(ErrorFrame {
            request_id: 5,
            code: ErrorCode::NotFound,
            message: "no such key".into(),
        }),
        "error.other_code" => Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::Other(1024),
            message: String::new(),
        }),
        "moved" => Frame::Moved(Moved {
            request_id: 8,
            epoch: 2,
            owner: "node-2:7400".into(),
        }),
        "cluster_info_request" => Frame::ClusterInfoRequest(ClusterInfoRequest { request_id: 9 }),
        "cluster_info" => Frame::ClusterInfo(ClusterInfo {
            request_id: 9,
            epoch: 2,
            members: vec![
                Member {
                    id: "n1".into(),
                    addr: "a:1".into(),
                },
                Member {
                    id: "n2".into(),
                    addr: "b:2".into(),
                },
            ],
        }),
        "log_read" => Frame::LogRead(LogRead {
            request_id: 10,
            topic: "orders".into(),
            from: Some(Position { stream: 5, seq: 7 }),
            max_bytes: 65536,
        }),
        "log_read.whole" => Frame::LogRead(LogRead {
            request_id: 10,
            topic: "t".into(),
            from: None,
            max_bytes: 1,
        }),
        "log_chunk" => Frame::LogChunk(LogChunk {
            request_id: 10,
            next: Some(Position { stream: 5, seq: 9 }),
            more: true,
            owner: false,
            records: b(b"abc"),
        }),
        "log_claim" => Frame::LogClaim(LogClaim {
            request_id: 11,
            topic: "orders".into(),
            from_id: "b-1".into(),
            from_addr: "h:1".into(),
        }),
        "log_claimed" => Frame::LogClaimed(LogClaimed {
            request_id: 11,
            records: 3,
        }),
        "replica_rpc" => Frame::ReplicaRpc(ReplicaRpc {
            request_id: 12,
            topic: "orders".into(),
            rpc: b(b"\x00\x00\x00\x02{}"),
        }),
        "ping" => Frame::Ping(Ping {
            nonce: 0x0123_4567_89ab_cdef,
        }),
        "pong" => Frame::Pong(Ping {
            nonce: 0x0123_4567_89ab_cdef,
        }),
        "consumer_open" => Frame::ConsumerOpen(ConsumerOpen {
            request_id: 9,
            topic: "jobs".into(),
            consumer: "w1".into(),
            ack_wait_ms: 30_000,
            max_deliver: 5,
            max_ack_pending: 100,
            start: ConsumerStart::First,
            dead_letter: Some("dlq".into()),
            backoff_ms: vec![1_000, 5_000],
        }),
        "consumer_open.position" => Frame::ConsumerOpen(ConsumerOpen {
            request_id: 1,
            topic: "j".into(),
            consumer: "c".into(),
            ack_wait_ms: 1,
            max_deliver: 0,
            max_ack_pending: 1,
            start: ConsumerStart::Position(Position { stream: 7, seq: 3 }),
            dead_letter: None,
            backoff_ms: vec![],
        }),
        "consumer_ok" => Frame::ConsumerOk(ConsumerOk {
            request_id: 9,
            member_id: 0x0102,
        }),
        "consumer_message" => Frame::ConsumerMessage(ConsumerMessage {
            position: Position {
                stream: 0x0a0b_0c0d_0e0f_1011,
                seq: 100,
            },
            delivery: 2,
            timestamp_ms: 0x01_0203_0405,
            payload: b(b"job"),
            headers: Vec::new(),
        }),
        "consumer_ack" => Frame::ConsumerAck(ConsumerAck {
            position: Position { stream: 5, seq: 6 },
            op: ConsumerAckOp::Ack,
        }),
        "consumer_ack.nak" => Frame::ConsumerAck(ConsumerAck {
            position: Position { stream: 5, seq: 6 },
            op: ConsumerAckOp::Nak {
                delay_ms: Some(250),
            },
        }),
        other => panic!("vector {other}.hex has no expected value in tests/vectors.rs"),
    }
}

#[test]
fn valid_vectors_decode_and_reencode_identically() {
    let mut kinds_seen = BTreeSet::new();
    let files = hex_files(&vectors_dir());
    assert!(!files.is_empty());
    for path in files {
        let name = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("utf-8 name")
            .to_owned();
        let wire = common::parse_hex(&fs::read_to_string(&path).expect("read vector"));
        let mut buf = BytesMut::from(&wire[..]);
        let frame = FrameDecoder::new(LIMIT)
            .decode(&mut buf)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: incomplete"));
        assert!(buf.is_empty(), "{name}: bytes left over");
        assert_eq!(frame, expected(&name), "{name}: decoded value");
        let kind_name = name.split('.').next().unwrap_or_default();
        assert_eq!(
            frame.name(),
            kind_name,
            "{name}: file name must start with the frame name"
        );
        kinds_seen.insert(frame.kind());
        assert_eq!(
            &frame.to_bytes()[..],
            &wire[..],
            "{name}: re-encoding differs"
        );
        assert_eq!(frame.encoded_len(), wire.len(), "{name}: encoded_len");
    }
    let missing: Vec<_> = FrameKind::ALL
        .iter()
        .filter(|k| !kinds_seen.contains(k))
        .collect();
    assert!(missing.is_empty(), "no vector for {missing:?}");
}

#[test]
fn invalid_vectors_are_rejected_as_stated() {
    let files = hex_files(&vectors_dir().join("invalid"));
    assert!(files.len() >= 10);
    for path in files {
        let text = fs::read_to_string(&path).expect("read vector");
        let expect = text
            .lines()
            .find_map(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{}: no '# expect:' line", path.display()));
        let mut buf = BytesMut::from(&common::parse_hex(&text)[..]);
        let err = FrameDecoder::new(LIMIT)
            .decode(&mut buf)
            .expect_err(&format!("{} decoded", path.display()));
        assert_eq!(err.to_string(), expect.trim(), "{}", path.display());
    }
}
