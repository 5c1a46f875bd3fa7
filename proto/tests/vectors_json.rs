//! Generates `proto/vectors/frames.json`, the machine-readable conformance vectors other
//! implementations of the protocol (the Go client, `clients/go/wire`) decode and encode: frame
//! bytes in hex next to the decoded fields, and malformed frames next to the error they must
//! produce.
//!
//! The file is produced here, by this crate's encoder and decoder, from the hand-written vectors
//! in `tests/vectors/` plus generated cases (edge values, every truncation of every valid
//! vector, a trailing byte after each). Every valid case is encoded, decoded back and compared,
//! every invalid one is decoded and must fail. Without `UPDATE_VECTORS=1` the test fails when
//! the committed file differs from what it generates (the drift check `make test` runs); with
//! it, the test writes the file:
//!
//! ```sh
//! UPDATE_VECTORS=1 cargo test -p starling-proto --test vectors_json
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test crate

mod common;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use bytes::{Bytes, BytesMut};
use starling_proto::{
    AckMode, BatchTopic, CacheDelete, CacheGet, CacheOk, CachePut, CacheValue, ClusterInfo,
    ClusterInfoRequest, ConsumerAck, ConsumerAckOp, ConsumerMessage, ConsumerOpen, ConsumerStart,
    DecodeError, ErrorCode, ErrorFrame, EventBatch, EventHeaders, Frame, FrameDecoder, Header,
    Hello, HelloOk, IndexedHeaders, LogChunk, LogClaim, LogClaimed, LogRead, Member, Moved, Ping,
    Position, Publish, PublishAck, PublishBatch, ReplicaRpc, StartAt, Subscribe, SubscribeOk,
    Unsubscribe, features,
};

/// The decoder limit every vector is decoded with, unless a case names its own.
const LIMIT: u32 = 1 << 20;

fn proto_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

fn json_path() -> PathBuf {
    proto_dir().join("vectors/frames.json")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// A JSON string literal (RFC 8259): quotes, backslashes and control characters escaped.
fn js(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn jhex(bytes: &[u8]) -> String {
    js(&hex(bytes))
}

fn jpos(p: Option<Position>) -> String {
    match p {
        None => "null".into(),
        Some(p) => format!("{{\"stream\": {}, \"seq\": {}}}", p.stream, p.seq),
    }
}

fn jlist(items: impl IntoIterator<Item = String>) -> String {
    format!("[{}]", items.into_iter().collect::<Vec<_>>().join(", "))
}

/// A header list: `[{"name": ..., "value": ...}, ...]`.
fn jheaders(headers: &[Header]) -> String {
    jlist(
        headers
            .iter()
            .map(|h| format!("{{\"name\": {}, \"value\": {}}}", js(&h.name), js(&h.value))),
    )
}

/// An indexed header list: `[{"index": ..., "headers": [...]}, ...]`.
fn jindexed(entries: &[IndexedHeaders]) -> String {
    jlist(entries.iter().map(|e| {
        format!(
            "{{\"index\": {}, \"headers\": {}}}",
            e.index,
            jheaders(&e.headers)
        )
    }))
}

/// The decoded fields of a frame, named as in `docs/protocol.md`: integers as JSON numbers
/// (read them as 64-bit unsigned), byte fields as hex strings, an absent optional field as
/// `null`.
fn fields(frame: &Frame) -> String {
    let pairs: Vec<(&str, String)> = match frame {
        Frame::Hello(h) => vec![
            ("min_version", h.min_version.to_string()),
            ("max_version", h.max_version.to_string()),
            ("features", h.features.to_string()),
            ("client_name", js(&h.client_name)),
            (
                "auth_token",
                h.auth_token.as_ref().map_or("null".into(), |t| jhex(t)),
            ),
        ],
        Frame::HelloOk(h) => vec![
            ("version", h.version.to_string()),
            ("features", h.features.to_string()),
            ("server_id", js(&h.server_id)),
            ("max_frame_bytes", h.max_frame_bytes.to_string()),
            ("epoch", h.epoch.to_string()),
        ],
        Frame::Publish(p) => {
            let mut f = vec![
                ("request_id", p.request_id.to_string()),
                ("ack", p.ack.as_u8().to_string()),
                ("topic", js(&p.topic)),
                ("payload", jhex(&p.payload)),
            ];
            // Listed only when present, so the cases without headers read as they always did.
            if !p.headers.is_empty() {
                f.push(("headers", jheaders(&p.headers)));
            }
            f
        }
        Frame::PublishBatch(p) => {
            let mut f = vec![
                ("request_id", p.request_id.to_string()),
                ("ack", p.ack.as_u8().to_string()),
                ("topic", js(&p.topic)),
                ("payloads", jlist(p.payloads.iter().map(|b| jhex(b)))),
            ];
            if !p.headers.is_empty() {
                f.push(("headers", jindexed(&p.headers)));
            }
            f
        }
        Frame::EventHeaders(e) => vec![("entries", jindexed(&e.entries))],
        Frame::PublishAck(a) => vec![
            ("request_id", a.request_id.to_string()),
            ("count", a.count.to_string()),
        ],
        Frame::Subscribe(s) => {
            let (stream, seq) = s.start.position().map_or((0, 0), |p| (p.stream, p.seq));
            let time = match s.start {
                StartAt::TimeMs(ms) => ms.to_string(),
                StartAt::Live | StartAt::Position(_) => "null".into(),
            };
            let mut fields = vec![
                ("request_id", s.request_id.to_string()),
                ("topic", js(&s.topic)),
                ("resume_stream", stream.to_string()),
                ("resume_seq", seq.to_string()),
                ("start_time_ms", time),
            ];
            // Listed only for a queue-group subscription (`QUEUE_GROUPS`).
            if let Some(group) = &s.group {
                fields.push(("group", js(group)));
            }
            fields
        }
        Frame::SubscribeOk(s) => vec![
            ("request_id", s.request_id.to_string()),
            ("subscription_id", s.subscription_id.to_string()),
        ],
        Frame::Unsubscribe(s) => vec![
            ("request_id", s.request_id.to_string()),
            ("subscription_id", s.subscription_id.to_string()),
        ],
        Frame::EventBatch(e) => vec![
            ("stream", e.stream.to_string()),
            ("first_seq", e.first_seq.to_string()),
            ("events", jlist(e.events.iter().map(|b| jhex(b)))),
        ],
        Frame::BatchTopic(t) => vec![("topic", js(&t.topic))],
        Frame::CachePut(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("key", jhex(&c.key)),
            ("value", jhex(&c.value)),
            ("ttl_ms", c.ttl_ms.to_string()),
        ],
        Frame::CacheGet(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("key", jhex(&c.key)),
        ],
        Frame::CacheDelete(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("key", jhex(&c.key)),
        ],
        Frame::CacheValue(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("value", c.value.as_ref().map_or("null".into(), |v| jhex(v))),
        ],
        Frame::CacheOk(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("existed", c.existed.to_string()),
        ],
        Frame::Error(e) => vec![
            ("request_id", e.request_id.to_string()),
            ("code", e.code.as_u16().to_string()),
            ("message", js(&e.message)),
        ],
        Frame::Moved(m) => vec![
            ("request_id", m.request_id.to_string()),
            ("epoch", m.epoch.to_string()),
            ("owner", js(&m.owner)),
        ],
        Frame::ClusterInfoRequest(r) => vec![("request_id", r.request_id.to_string())],
        Frame::ClusterInfo(c) => vec![
            ("request_id", c.request_id.to_string()),
            ("epoch", c.epoch.to_string()),
            (
                "members",
                jlist(
                    c.members
                        .iter()
                        .map(|m| format!("{{\"id\": {}, \"addr\": {}}}", js(&m.id), js(&m.addr))),
                ),
            ),
        ],
        Frame::LogRead(l) => vec![
            ("request_id", l.request_id.to_string()),
            ("topic", js(&l.topic)),
            ("from", jpos(l.from)),
            ("max_bytes", l.max_bytes.to_string()),
        ],
        Frame::LogChunk(l) => vec![
            ("request_id", l.request_id.to_string()),
            ("next", jpos(l.next)),
            ("more", l.more.to_string()),
            ("owner", l.owner.to_string()),
            ("records", jhex(&l.records)),
        ],
        Frame::LogClaim(l) => vec![
            ("request_id", l.request_id.to_string()),
            ("topic", js(&l.topic)),
            ("from_id", js(&l.from_id)),
            ("from_addr", js(&l.from_addr)),
        ],
        Frame::LogClaimed(l) => vec![
            ("request_id", l.request_id.to_string()),
            ("records", l.records.to_string()),
        ],
        Frame::ReplicaRpc(r) => vec![
            ("request_id", r.request_id.to_string()),
            ("topic", js(&r.topic)),
            ("rpc", jhex(&r.rpc)),
        ],
        Frame::Ping(p) | Frame::Pong(p) => vec![("nonce", p.nonce.to_string())],
        Frame::ConsumerOpen(o) => {
            let (kind, a, b) = match o.start {
                ConsumerStart::First => (0, 0, 0),
                ConsumerStart::Last => (1, 0, 0),
                ConsumerStart::Position(p) => (2, p.stream, p.seq),
                ConsumerStart::TimeMs(ms) => (3, ms, 0),
            };
            vec![
                ("request_id", o.request_id.to_string()),
                ("topic", js(&o.topic)),
                ("consumer", js(&o.consumer)),
                ("ack_wait_ms", o.ack_wait_ms.to_string()),
                ("max_deliver", o.max_deliver.to_string()),
                ("max_ack_pending", o.max_ack_pending.to_string()),
                ("start_kind", kind.to_string()),
                ("start_a", a.to_string()),
                ("start_b", b.to_string()),
                (
                    "dead_letter",
                    o.dead_letter.as_deref().map_or("null".into(), js),
                ),
                ("backoff_ms", jlist(o.backoff_ms.iter().map(u64::to_string))),
            ]
        }
        Frame::ConsumerOk(o) => vec![
            ("request_id", o.request_id.to_string()),
            ("member_id", o.member_id.to_string()),
        ],
        Frame::ConsumerMessage(m) => {
            let mut f = vec![
                ("position", jpos(Some(m.position))),
                ("delivery", m.delivery.to_string()),
                ("timestamp_ms", m.timestamp_ms.to_string()),
                ("payload", jhex(&m.payload)),
            ];
            if !m.headers.is_empty() {
                f.push(("headers", jheaders(&m.headers)));
            }
            f
        }
        Frame::ConsumerAck(a) => {
            let (op, delay) = match a.op {
                ConsumerAckOp::Ack => (0, 0),
                ConsumerAckOp::Nak { delay_ms } => (1, delay_ms.unwrap_or(u64::MAX)),
                ConsumerAckOp::InProgress => (2, 0),
                ConsumerAckOp::Term => (3, 0),
            };
            vec![
                ("position", jpos(Some(a.position))),
                ("op", op.to_string()),
                ("delay_ms", delay.to_string()),
            ]
        }
    };
    format!(
        "{{{}}}",
        pairs
            .iter()
            .map(|(k, v)| format!("{}: {v}", js(k)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// The expected error of an invalid case: its kind, the matching wire error code, the fields
/// of the kind, and the exact `Display` text.
fn error_json(e: &DecodeError) -> String {
    let detail = match e {
        DecodeError::UnsupportedVersion(v) => {
            format!("\"kind\": \"unsupported_version\", \"version\": {v}")
        }
        DecodeError::UnknownFrameType(t) => {
            format!("\"kind\": \"unknown_frame_type\", \"frame_type\": {t}")
        }
        DecodeError::FrameTooLarge { len, max } => {
            format!("\"kind\": \"frame_too_large\", \"len\": {len}, \"max\": {max}")
        }
        DecodeError::TooManyItems { frame, count, max } => format!(
            "\"kind\": \"too_many_items\", \"frame\": {}, \"count\": {count}, \"max\": {max}",
            js(frame)
        ),
        DecodeError::Malformed { frame, reason } => format!(
            "\"kind\": \"malformed\", \"frame\": {}, \"reason\": {}",
            js(frame),
            js(reason)
        ),
    };
    format!(
        "{{{detail}, \"code\": {}, \"message\": {}}}",
        e.code().as_u16(),
        js(&e.to_string())
    )
}

fn b(s: &'static [u8]) -> Bytes {
    Bytes::from_static(s)
}

/// Valid frames beyond the hand-written files: boundary values of every field type.
fn generated_valid() -> Vec<(String, Frame)> {
    let max_topic = "t".repeat(255);
    let mut out: Vec<(&str, Frame)> = vec![
        (
            "hello.peer_all_bits",
            Frame::Hello(Hello {
                min_version: 0,
                max_version: 255,
                features: u64::MAX,
                client_name: "ünïcödé client".into(),
                auth_token: Some(Bytes::new()),
            }),
        ),
        (
            "hello.sdk",
            Frame::Hello(Hello {
                min_version: 2,
                max_version: 2,
                features: features::BASE | features::CLUSTER | features::AUTH_TOKEN,
                client_name: "starling-go".into(),
                auth_token: Some(b(b"0123456789abcdef")),
            }),
        ),
        (
            "hello_ok.max",
            Frame::HelloOk(HelloOk {
                version: 2,
                // Every bit as released in the frozen v2 vectors (before `WILDCARDS`), so the
                // released case stays listed; `hello_ok.all_features` has today's set.
                features: 0x3f,
                server_id: String::new(),
                max_frame_bytes: u32::MAX,
                epoch: u64::MAX,
            }),
        ),
        (
            "hello_ok.all_features",
            Frame::HelloOk(HelloOk {
                version: 2,
                features: features::ALL,
                server_id: String::new(),
                max_frame_bytes: u32::MAX,
                epoch: u64::MAX,
            }),
        ),
        (
            "publish.empty_payload",
            Frame::Publish(Publish {
                request_id: u64::MAX,
                ack: AckMode::None,
                topic: max_topic.clone(),
                payload: Bytes::new(),
                headers: Vec::new(),
            }),
        ),
        (
            "publish.unicode_topic",
            Frame::Publish(Publish {
                request_id: 0,
                ack: AckMode::Ack,
                topic: "zürich/wetter.ü".into(),
                payload: Bytes::from((0u8..=255).collect::<Vec<u8>>()),
                headers: Vec::new(),
            }),
        ),
        (
            "publish_batch.empty",
            Frame::PublishBatch(PublishBatch {
                request_id: 1,
                ack: AckMode::Ack,
                topic: "a".into(),
                payloads: vec![],
                headers: Vec::new(),
            }),
        ),
        (
            "publish.headers_unicode",
            Frame::Publish(Publish {
                request_id: 3,
                ack: AckMode::None,
                topic: "a".into(),
                payload: Bytes::new(),
                headers: vec![
                    Header::new("ü".repeat(127), "\"quoted\"\n"),
                    Header::new("x", String::new()),
                ],
            }),
        ),
        (
            "publish_batch.headers_every_item",
            Frame::PublishBatch(PublishBatch {
                request_id: 4,
                ack: AckMode::Ack,
                topic: "a".into(),
                payloads: vec![Bytes::new(), b(b"x")],
                headers: vec![
                    IndexedHeaders {
                        index: 0,
                        headers: vec![Header::new("n", "0")],
                    },
                    IndexedHeaders {
                        index: 1,
                        headers: vec![Header::new("n", "1")],
                    },
                ],
            }),
        ),
        (
            "event_headers.max_index",
            Frame::EventHeaders(EventHeaders {
                entries: vec![IndexedHeaders {
                    index: u32::MAX,
                    headers: vec![Header::new("k".repeat(255), "v")],
                }],
            }),
        ),
        (
            "event_headers.none",
            Frame::EventHeaders(EventHeaders { entries: vec![] }),
        ),
        (
            "publish_ack.max",
            Frame::PublishAck(PublishAck {
                request_id: u64::MAX,
                count: u32::MAX,
            }),
        ),
        (
            "subscribe.time_zero",
            Frame::Subscribe(Subscribe {
                group: None,
                request_id: 1,
                topic: "t".into(),
                start: StartAt::TimeMs(0),
            }),
        ),
        (
            "subscribe.resume_max",
            Frame::Subscribe(Subscribe {
                group: None,
                request_id: 2,
                topic: max_topic.clone(),
                start: StartAt::Position(Position {
                    stream: u64::MAX,
                    seq: u64::MAX,
                }),
            }),
        ),
        (
            "subscribe.group_max",
            Frame::Subscribe(Subscribe {
                group: Some("Az09-_.".repeat(9) + "z"),
                request_id: 7,
                topic: "orders.*".into(),
                start: StartAt::Live,
            }),
        ),
        (
            "subscribe.group_with_time",
            Frame::Subscribe(Subscribe {
                group: Some("g".into()),
                request_id: 8,
                topic: "t".into(),
                start: StartAt::TimeMs(5),
            }),
        ),
        (
            "subscribe.resume_seq_zero",
            Frame::Subscribe(Subscribe {
                group: None,
                request_id: 3,
                topic: "t".into(),
                start: StartAt::Position(Position { stream: 1, seq: 0 }),
            }),
        ),
        (
            "event_batch.empty",
            Frame::EventBatch(EventBatch {
                stream: 1,
                first_seq: 0,
                events: vec![],
            }),
        ),
        (
            "event_batch.empty_events",
            Frame::EventBatch(EventBatch {
                stream: u64::MAX,
                first_seq: u64::MAX,
                events: vec![Bytes::new(), Bytes::new(), b(b"\x00")],
            }),
        ),
        (
            "batch_topic.max_topic",
            Frame::BatchTopic(BatchTopic {
                topic: max_topic.clone(),
            }),
        ),
        (
            "cache_put.max_key",
            Frame::CachePut(CachePut {
                request_id: 1,
                key: Bytes::from(vec![0xffu8; 1024]),
                value: Bytes::new(),
                ttl_ms: u64::MAX,
            }),
        ),
        (
            "cache_get.binary_key",
            Frame::CacheGet(CacheGet {
                request_id: 2,
                key: b(b"\x00\n \xff"),
            }),
        ),
        (
            "cache_delete.one_byte",
            Frame::CacheDelete(CacheDelete {
                request_id: 3,
                key: b(b"k"),
            }),
        ),
        (
            "cache_value.empty",
            Frame::CacheValue(CacheValue {
                request_id: 4,
                value: Some(Bytes::new()),
            }),
        ),
        (
            "cache_ok.existed",
            Frame::CacheOk(CacheOk {
                request_id: 5,
                existed: true,
            }),
        ),
        (
            "error.forbidden",
            Frame::Error(ErrorFrame {
                request_id: 6,
                code: ErrorCode::Forbidden,
                message: "user \"app\" may not publish topic \"orders.us\"".into(),
            }),
        ),
        (
            "error.no_responders",
            Frame::Error(ErrorFrame {
                request_id: 9,
                code: ErrorCode::NoResponders,
                message: "no subscriber on topic \"svc.echo\"".into(),
            }),
        ),
        (
            "error.zero_code",
            Frame::Error(ErrorFrame {
                request_id: 0,
                code: ErrorCode::Other(0),
                message: "line\nbreak\ttab".into(),
            }),
        ),
        (
            "moved.ipv6",
            Frame::Moved(Moved {
                request_id: 7,
                epoch: u64::MAX,
                owner: "[::1]:7400".into(),
            }),
        ),
        (
            "cluster_info.empty",
            Frame::ClusterInfo(ClusterInfo {
                request_id: 8,
                epoch: 0,
                members: vec![],
            }),
        ),
        (
            "cluster_info.empty_strings",
            Frame::ClusterInfo(ClusterInfo {
                request_id: 8,
                epoch: 1,
                members: vec![Member {
                    id: String::new(),
                    addr: String::new(),
                }],
            }),
        ),
        (
            "log_chunk.none",
            Frame::LogChunk(LogChunk {
                request_id: 9,
                next: None,
                more: false,
                owner: true,
                records: Bytes::new(),
            }),
        ),
        (
            "consumer_open.max",
            Frame::ConsumerOpen(ConsumerOpen {
                request_id: u64::MAX,
                topic: "t".repeat(255),
                consumer: "c".repeat(64),
                ack_wait_ms: u64::MAX,
                max_deliver: u32::MAX,
                max_ack_pending: u32::MAX,
                start: ConsumerStart::TimeMs(u64::MAX),
                dead_letter: Some("d".repeat(255)),
                backoff_ms: vec![u64::MAX; 16],
            }),
        ),
        (
            "consumer_open.last",
            Frame::ConsumerOpen(ConsumerOpen {
                request_id: 0,
                topic: "t".into(),
                consumer: "c".into(),
                ack_wait_ms: 1,
                max_deliver: 0,
                max_ack_pending: 1,
                start: ConsumerStart::Last,
                dead_letter: None,
                backoff_ms: vec![],
            }),
        ),
        (
            "consumer_ack.nak_backoff",
            Frame::ConsumerAck(ConsumerAck {
                position: Position {
                    stream: u64::MAX,
                    seq: u64::MAX,
                },
                op: ConsumerAckOp::Nak { delay_ms: None },
            }),
        ),
        (
            "consumer_ack.term",
            Frame::ConsumerAck(ConsumerAck {
                position: Position { stream: 1, seq: 0 },
                op: ConsumerAckOp::Term,
            }),
        ),
        (
            "consumer_message.empty",
            Frame::ConsumerMessage(ConsumerMessage {
                position: Position { stream: 1, seq: 0 },
                delivery: u32::MAX,
                timestamp_ms: 0,
                payload: Bytes::new(),
                headers: Vec::new(),
            }),
        ),
        (
            "consumer_message.headers",
            Frame::ConsumerMessage(ConsumerMessage {
                position: Position { stream: 2, seq: 7 },
                delivery: 1,
                timestamp_ms: 1_700_000_000_000,
                payload: Bytes::from_static(b"job"),
                headers: vec![
                    Header::new(
                        "traceparent",
                        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    ),
                    Header::new("Starling-Msg-Id", "job-7"),
                ],
            }),
        ),
        ("ping.zero", Frame::Ping(Ping { nonce: 0 })),
        ("pong.max", Frame::Pong(Ping { nonce: u64::MAX })),
        (
            "unsubscribe.max",
            Frame::Unsubscribe(Unsubscribe {
                request_id: u64::MAX,
                subscription_id: u64::MAX,
            }),
        ),
        (
            "subscribe_ok.zero",
            Frame::SubscribeOk(SubscribeOk {
                request_id: 0,
                subscription_id: 0,
            }),
        ),
        (
            "cluster_info_request.max",
            Frame::ClusterInfoRequest(ClusterInfoRequest {
                request_id: u64::MAX,
            }),
        ),
        (
            "log_read.max",
            Frame::LogRead(LogRead {
                request_id: 1,
                topic: max_topic,
                from: Some(Position {
                    stream: u64::MAX,
                    seq: 0,
                }),
                max_bytes: u32::MAX,
            }),
        ),
        (
            "log_claim.empty_strings",
            Frame::LogClaim(LogClaim {
                request_id: 1,
                topic: "t".into(),
                from_id: String::new(),
                from_addr: String::new(),
            }),
        ),
        (
            "log_claimed.zero",
            Frame::LogClaimed(LogClaimed {
                request_id: 0,
                records: 0,
            }),
        ),
        (
            "replica_rpc.empty",
            Frame::ReplicaRpc(ReplicaRpc {
                request_id: u64::MAX,
                topic: "t".into(),
                rpc: Bytes::new(),
            }),
        ),
    ];
    out.sort_by(|a, b| a.0.cmp(b.0));
    out.into_iter().map(|(n, f)| (n.to_string(), f)).collect()
}

fn frame_with_payload(kind: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![1, kind, 0, 0];
    out.extend_from_slice(&u32::try_from(payload.len()).unwrap().to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// A `Subscribe` of topic `t` from `(stream, 1)` (live when `stream` is 0, a position
/// otherwise) with `start_time_ms` 7 when `stream` is nonzero (else `NO_START_TIME`), ending
/// with `tail` as is: the group field's bytes, length prefix included (see [`named`]).
fn subscribe_group(stream: u64, tail: &[u8]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 0, 0, 0, 9, 0, 1, b't'];
    p.extend_from_slice(&stream.to_be_bytes());
    let (seq, time) = if stream == 0 { (0, u64::MAX) } else { (1, 7) };
    p.extend_from_slice(&u64::to_be_bytes(seq));
    p.extend_from_slice(&u64::to_be_bytes(time));
    p.extend_from_slice(tail);
    frame_with_payload(0x20, &p)
}

/// A string field: `name` behind its u16 length.
fn named(name: &[u8]) -> Vec<u8> {
    let mut out = u16::try_from(name.len()).unwrap().to_be_bytes().to_vec();
    out.extend_from_slice(name);
    out
}

/// Malformed frames beyond the hand-written files: header errors, topic rules, counts.
fn generated_invalid() -> Vec<(String, Vec<u8>, u32)> {
    let publish = |topic: &[u8]| {
        let mut p = vec![0, 0, 0, 0, 0, 0, 0, 1, 0];
        p.extend_from_slice(&u16::try_from(topic.len()).unwrap().to_be_bytes());
        p.extend_from_slice(topic);
        p.extend_from_slice(&[0, 0, 0, 0]);
        frame_with_payload(0x10, &p)
    };
    let mut out: Vec<(&str, Vec<u8>, u32)> = vec![
        (
            "header.version_zero",
            vec![0, 0x60, 0, 0, 0, 0, 0, 8],
            LIMIT,
        ),
        (
            "header.version_ff",
            vec![0xff, 0x60, 0, 0, 0, 0, 0, 8],
            LIMIT,
        ),
        ("header.type_zero", vec![1, 0, 0, 0, 0, 0, 0, 0], LIMIT),
        ("header.type_0x03", vec![1, 3, 0, 0, 0, 0, 0, 0], LIMIT),
        ("header.type_0x57", vec![1, 0x57, 0, 0, 0, 0, 0, 0], LIMIT),
        ("header.type_0xff", vec![1, 0xff, 0, 0, 0, 0, 0, 0], LIMIT),
        // Checked from the header alone: no payload follows.
        (
            "header.too_large_max_u32",
            vec![1, 0x10, 0, 0, 0xff, 0xff, 0xff, 0xff],
            LIMIT,
        ),
        (
            "header.too_large_for_small_limit",
            frame_with_payload(0x60, &[0; 8]),
            7,
        ),
        ("publish.topic_empty", publish(b""), LIMIT),
        ("publish.topic_256_bytes", publish(&[b'x'; 256]), LIMIT),
        ("publish.topic_nul", publish(b"a\x00b"), LIMIT),
        ("publish.topic_del", publish(b"a\x7fb"), LIMIT),
        (
            "publish.topic_c1_control",
            publish("a\u{85}b".as_bytes()),
            LIMIT,
        ),
        (
            "publish.topic_c1_csi",
            publish("a\u{9b}b".as_bytes()),
            LIMIT,
        ),
        ("publish.topic_nbsp", publish("a\u{a0}b".as_bytes()), LIMIT),
        (
            "publish.topic_ideographic_space",
            publish("a\u{3000}b".as_bytes()),
            LIMIT,
        ),
        (
            "publish.topic_line_separator",
            publish("a\u{2028}b".as_bytes()),
            LIMIT,
        ),
        ("publish.topic_tab", publish(b"a\tb"), LIMIT),
        ("publish.topic_bad_utf8", publish(b"a\xffb"), LIMIT),
        (
            "publish.topic_surrogate_utf8",
            publish(b"\xed\xa0\x80"),
            LIMIT,
        ),
        (
            "publish_batch.count_u32_max",
            frame_with_payload(
                0x11,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0xff, 0xff, 0xff, 0xff,
                ],
            ),
            LIMIT,
        ),
        (
            "subscribe.group_65_bytes",
            subscribe_group(0, &named(&[b'g'; 65])),
            LIMIT,
        ),
        (
            "subscribe.group_space",
            subscribe_group(0, &named(b"a b")),
            LIMIT,
        ),
        (
            "subscribe.group_slash",
            subscribe_group(0, &named(b"a/b")),
            LIMIT,
        ),
        (
            "subscribe.group_non_ascii",
            subscribe_group(0, &named("\u{e9}".as_bytes())),
            LIMIT,
        ),
        (
            "subscribe.group_bad_utf8",
            subscribe_group(0, &named(b"\xff")),
            LIMIT,
        ),
        (
            "subscribe.group_empty",
            subscribe_group(0, &[0, 0, b'x']),
            LIMIT,
        ),
        (
            "subscribe.group_overrun",
            subscribe_group(0, &[0, 9, b'a', b'b']),
            LIMIT,
        ),
        (
            "subscribe.group_two_bytes",
            subscribe_group(0, &[0, 1]),
            LIMIT,
        ),
        (
            "subscribe.group_after_resume_and_time",
            subscribe_group(1, &named(b"g")),
            LIMIT,
        ),
        (
            "subscribe.group_then_trailing",
            subscribe_group(0, &[0, 1, b'g', 0]),
            LIMIT,
        ),
        (
            "publish.header_list_empty",
            frame_with_payload(
                0x10,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 0,
                ],
            ),
            LIMIT,
        ),
        (
            "publish.header_name_empty",
            frame_with_payload(
                0x10,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
                ],
            ),
            LIMIT,
        ),
        (
            "publish.header_value_bad_utf8",
            frame_with_payload(
                0x10,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b'k', 0,
                    1, 0xff,
                ],
            ),
            LIMIT,
        ),
        (
            "publish_batch.header_index_past_count",
            frame_with_payload(
                0x11,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0,
                    0, 0, 1, 0, 0, 0, 1, 0, 1, b'k', 0, 0,
                ],
            ),
            LIMIT,
        ),
        (
            "event_headers.count_past_remaining",
            frame_with_payload(0x25, &[0, 0, 0, 2, 0, 0, 0, 0]),
            LIMIT,
        ),
        (
            "cluster_info.count_past_remaining",
            frame_with_payload(
                0x52,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 0,
                ],
            ),
            LIMIT,
        ),
        (
            "cache_put.key_1025_bytes",
            {
                let mut p = vec![0, 0, 0, 0, 0, 0, 0, 1, 0x04, 0x01];
                p.extend_from_slice(&[7; 1025]);
                p.extend_from_slice(&[0; 12]);
                frame_with_payload(0x30, &p)
            },
            LIMIT,
        ),
        (
            "cache_value.bad_option_tag",
            frame_with_payload(0x33, &[0, 0, 0, 0, 0, 0, 0, 1, 2]),
            LIMIT,
        ),
        (
            "hello.bad_option_tag",
            frame_with_payload(0x01, &[2, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]),
            LIMIT,
        ),
        (
            "log_read.seq_without_stream",
            frame_with_payload(
                0x53,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 1, b't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                    0, 5, 0, 0, 0, 1,
                ],
            ),
            LIMIT,
        ),
        (
            "log_chunk.bad_bool",
            frame_with_payload(
                0x54,
                &[
                    0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0,
                    0, 0, 0, 0,
                ],
            ),
            LIMIT,
        ),
        (
            "error.message_bad_utf8",
            frame_with_payload(0x40, &[0, 0, 0, 0, 0, 0, 0, 1, 0, 1, 0, 2, 0xc3, 0x28]),
            LIMIT,
        ),
    ];
    out.sort_by(|a, b| a.0.cmp(b.0));
    out.into_iter()
        .map(|(n, w, l)| (n.to_string(), w, l))
        .collect()
}

fn hex_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    files.sort();
    files
}

fn stem(path: &Path) -> String {
    path.file_stem().unwrap().to_str().unwrap().to_string()
}

fn decode(wire: &[u8], limit: u32) -> Result<Option<Frame>, DecodeError> {
    FrameDecoder::new(limit).decode(&mut BytesMut::from(wire))
}

/// Every valid case: the hand-written files first (decoded by this crate), then the
/// generated ones. Each is checked both ways here.
fn valid_cases() -> Vec<(String, Vec<u8>, Frame)> {
    let mut out = Vec::new();
    for path in hex_files(&proto_dir().join("tests/vectors")) {
        let name = stem(&path);
        let wire = common::parse_hex(&fs::read_to_string(&path).unwrap());
        let frame = decode(&wire, LIMIT).unwrap().unwrap();
        out.push((name, wire, frame));
    }
    for (name, frame) in generated_valid() {
        let wire = frame.to_bytes().to_vec();
        out.push((name, wire, frame));
    }
    for (name, wire, frame) in &out {
        assert_eq!(&frame.to_bytes()[..], &wire[..], "{name}: encoding");
        let back = decode(wire, LIMIT).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(back.as_ref(), Some(frame), "{name}: decoding");
    }
    out
}

/// Every invalid case with the decoder limit it is decoded with.
fn invalid_cases(valid: &[(String, Vec<u8>, Frame)]) -> Vec<(String, Vec<u8>, u32)> {
    let mut out = Vec::new();
    for path in hex_files(&proto_dir().join("tests/vectors/invalid")) {
        let wire = common::parse_hex(&fs::read_to_string(&path).unwrap());
        out.push((format!("invalid/{}", stem(&path)), wire, LIMIT));
    }
    out.extend(generated_invalid());
    // Every proper truncation of each valid payload, the header saying so (a decoder must not
    // read past payload_len), except the cut right before an optional trailing field
    // (Subscribe's start time and group, the header list of Publish and PublishBatch), which
    // is the same request without it, a valid frame.
    for (name, wire, frame) in valid {
        let payload = &wire[8..];
        // Short payloads are cut everywhere; long ones (255-byte topics, 1 KiB keys) at their
        // first and last 32 bytes, which holds every field boundary a long field does not.
        let len = payload.len();
        let cuts = (0..len).filter(|c| len <= 96 || *c < 32 || *c + 32 >= len);
        for cut in cuts {
            let short = frame_with_payload(wire[1], &payload[..cut]);
            if decode(&short, LIMIT).is_ok() {
                assert!(
                    matches!(frame, Frame::Subscribe(s)
                        if matches!(s.start, StartAt::TimeMs(_)) || s.group.is_some())
                        || matches!(frame, Frame::Publish(p) if !p.headers.is_empty())
                        || matches!(frame, Frame::PublishBatch(p) if !p.headers.is_empty()),
                    "{name} cut at {cut} decodes"
                );
                continue;
            }
            out.push((format!("truncated/{name}/{cut}"), short, LIMIT));
        }
        let mut long = payload.to_vec();
        long.push(0);
        let trailing = frame_with_payload(wire[1], &long);
        if decode(&trailing, LIMIT).is_err() {
            out.push((format!("trailing/{name}"), trailing, LIMIT));
        } else {
            // A trailing zero byte after a live Subscribe's resume position starts a
            // (truncated) start time: still an error; anything else must be refused too.
            panic!("{name} with a trailing byte decodes");
        }
    }
    out
}

fn render() -> String {
    let valid = valid_cases();
    let invalid = invalid_cases(&valid);
    let mut s = String::new();
    s.push_str("{\n");
    s.push_str(
        "  \"comment\": \"Generated by proto/tests/vectors_json.rs (UPDATE_VECTORS=1 cargo test -p starling-proto --test vectors_json); do not edit. Integers are unsigned (up to 64 bits), byte fields are hex, an absent optional field is null. Decode each valid case with max_frame_bytes, compare its fields, and encode the fields back to hex; decode each invalid case with its max_frame_bytes and expect the error.\",\n",
    );
    let _ = writeln!(
        s,
        "  \"protocol_version\": {},",
        starling_proto::PROTOCOL_VERSION
    );
    let _ = writeln!(s, "  \"max_frame_bytes\": {LIMIT},");
    s.push_str("  \"valid\": [\n");
    let rows: Vec<String> = valid
        .iter()
        .map(|(name, wire, frame)| {
            format!(
                "    {{\"name\": {}, \"type\": {}, \"hex\": {}, \"fields\": {}}}",
                js(name),
                js(frame.name()),
                jhex(wire),
                fields(frame)
            )
        })
        .collect();
    s.push_str(&rows.join(",\n"));
    s.push_str("\n  ],\n  \"invalid\": [\n");
    let rows: Vec<String> = invalid
        .iter()
        .map(|(name, wire, limit)| {
            let err = decode(wire, *limit)
                .err()
                .unwrap_or_else(|| panic!("{name} decodes"));
            format!(
                "    {{\"name\": {}, \"hex\": {}, \"max_frame_bytes\": {limit}, \"error\": {}}}",
                js(name),
                jhex(wire),
                error_json(&err)
            )
        })
        .collect();
    s.push_str(&rows.join(",\n"));
    s.push_str("\n  ]\n}\n");
    s
}

#[test]
fn vectors_file_is_up_to_date() {
    let fresh = render();
    let path = json_path();
    if std::env::var_os("UPDATE_VECTORS").is_some_and(|v| v == "1") {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, &fresh).unwrap();
        return;
    }
    let committed = fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == fresh,
        "{} is out of date with the proto crate: regenerate it with \
         `UPDATE_VECTORS=1 cargo test -p starling-proto --test vectors_json` and commit it",
        path.display()
    );
}
