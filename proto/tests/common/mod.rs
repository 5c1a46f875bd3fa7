//! Helpers shared by the integration tests: hex vector parsing and
//! proptest strategies producing arbitrary valid frames.
#![allow(dead_code)]

use bytes::Bytes;
use proptest::collection::vec;
use proptest::prelude::*;
use starling_proto::{
    AckMode, BatchTopic, CacheDelete, CacheGet, CacheOk, CachePut, CacheValue, ClusterInfo,
    ClusterInfoRequest, ConsumerAck, ConsumerAckOp, ConsumerMessage, ConsumerOk, ConsumerOpen,
    ConsumerStart, ErrorCode, ErrorFrame, EventBatch, EventHeaders, Frame, Header, Hello, HelloOk,
    IndexedHeaders, LogChunk, LogClaim, LogClaimed, LogRead, Member, Moved, Ping, Position,
    Publish, PublishAck, PublishBatch, ReplicaRpc, StartAt, Subscribe, SubscribeOk, Unsubscribe,
};

/// Parses hex text: whitespace ignored, `#` comments to end of line.
pub fn parse_hex(text: &str) -> Vec<u8> {
    let digits: String = text
        .lines()
        .map(|line| line.split('#').next().unwrap_or(""))
        .flat_map(|line| line.chars().filter(|c| !c.is_whitespace()))
        .collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits");
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn bytes(max: usize) -> impl Strategy<Value = Bytes> {
    vec(any::<u8>(), 0..max).prop_map(Bytes::from)
}

fn key() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        vec(any::<u8>(), 1..32).prop_map(Bytes::from),
        vec(any::<u8>(), 1020..=1024).prop_map(Bytes::from),
    ]
}

fn text() -> impl Strategy<Value = String> {
    ".{0,24}"
}

/// Valid topics: 1..=255 bytes of printable, non-space characters.
fn topic() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z0-9._/:-]{1,40}", "[a-z]{255}", "[à-ÿ]{1,60}",]
}

/// Valid header names (1..=255 bytes, no control, whitespace or `:`) with any UTF-8 value.
fn header() -> impl Strategy<Value = Header> {
    (
        prop_oneof!["[a-zA-Z0-9._/-]{1,24}", "[a-z]{255}", "[à-ÿ]{1,20}"],
        text(),
    )
        .prop_map(|(name, value)| Header { name, value })
}

/// A message's headers: none (the list is then absent) or a few.
pub fn headers() -> impl Strategy<Value = Vec<Header>> {
    prop_oneof![Just(Vec::new()), vec(header(), 1..4)]
}

/// Headers of some of `count` messages, by strictly increasing index below `count`.
pub fn indexed_headers(count: usize) -> impl Strategy<Value = Vec<IndexedHeaders>> {
    vec((any::<bool>(), vec(header(), 1..3)), count).prop_map(|picked| {
        picked
            .into_iter()
            .enumerate()
            .filter(|(_, (keep, _))| *keep)
            .map(|(i, (_, headers))| IndexedHeaders {
                index: u32::try_from(i).unwrap(),
                headers,
            })
            .collect()
    })
}

fn ack() -> impl Strategy<Value = AckMode> {
    prop_oneof![Just(AckMode::None), Just(AckMode::Ack)]
}

fn error_code() -> impl Strategy<Value = ErrorCode> {
    prop_oneof![
        (1u16..=ErrorCode::LAST_ASSIGNED).prop_map(ErrorCode::from_u16),
        (ErrorCode::LAST_ASSIGNED + 1..).prop_map(ErrorCode::Other),
        Just(ErrorCode::Other(0)),
    ]
}

/// Where a subscription starts: live, a resume position (nonzero stream) or a time (the
/// optional trailing `start_time_ms`, any value, 0 included).
pub fn start_at() -> impl Strategy<Value = StartAt> {
    prop_oneof![
        Just(StartAt::Live),
        (1..=u64::MAX, any::<u64>())
            .prop_map(|(stream, seq)| StartAt::Position(Position { stream, seq })),
        any::<u64>().prop_map(StartAt::TimeMs),
        Just(StartAt::TimeMs(0)),
    ]
}

/// A log transfer's start or end: none, or a position with a nonzero stream.
fn from() -> impl Strategy<Value = Option<Position>> {
    prop_oneof![
        Just(None),
        (1..=u64::MAX, any::<u64>()).prop_map(|(stream, seq)| Some(Position { stream, seq })),
    ]
}

/// Any valid `Subscribe`.
pub fn arb_subscribe() -> impl Strategy<Value = Subscribe> {
    (any::<u64>(), topic(), start_at()).prop_map(|(request_id, topic, start)| Subscribe {
        request_id,
        topic,
        start,
        group: None,
    })
}

/// A valid queue-group name: 1..=64 of `A-Z a-z 0-9 - _ .`.
pub fn group() -> impl Strategy<Value = String> {
    "[A-Za-z0-9._-]{1,64}"
}

/// Any valid queue-group `Subscribe` (`QUEUE_GROUPS`). A start time of `u64::MAX` is left
/// out: before a group it is `NO_START_TIME`, which decodes as no start time.
pub fn arb_group_subscribe() -> impl Strategy<Value = Subscribe> {
    (
        any::<u64>(),
        topic(),
        start_at().prop_filter("NO_START_TIME", |s| *s != StartAt::TimeMs(u64::MAX)),
        group(),
    )
        .prop_map(|(request_id, topic, start, group)| Subscribe {
            request_id,
            topic,
            start,
            group: Some(group),
        })
}

/// Any valid frame (one that must survive encode → decode unchanged).
pub fn arb_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![3 => arb_base_frame(), 1 => arb_consumer_frame()]
}

fn consumer_start() -> impl Strategy<Value = ConsumerStart> {
    prop_oneof![
        Just(ConsumerStart::First),
        Just(ConsumerStart::Last),
        (1u64.., any::<u64>())
            .prop_map(|(stream, seq)| ConsumerStart::Position(Position { stream, seq })),
        any::<u64>().prop_map(ConsumerStart::TimeMs),
    ]
}

fn consumer_ack_op() -> impl Strategy<Value = ConsumerAckOp> {
    prop_oneof![
        Just(ConsumerAckOp::Ack),
        Just(ConsumerAckOp::Nak { delay_ms: None }),
        (0..u64::MAX).prop_map(|d| ConsumerAckOp::Nak { delay_ms: Some(d) }),
        Just(ConsumerAckOp::InProgress),
        Just(ConsumerAckOp::Term),
    ]
}

/// Any valid durable consumer frame (`CONSUMERS`).
pub fn arb_consumer_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (
            any::<u64>(),
            topic(),
            group(),
            1u64..,
            any::<u32>(),
            1u32..,
            consumer_start(),
            proptest::option::of(topic()),
            vec(any::<u64>(), 0..=16),
        )
            .prop_map(
                |(
                    request_id,
                    topic,
                    consumer,
                    ack_wait_ms,
                    max_deliver,
                    max_ack_pending,
                    start,
                    dead_letter,
                    backoff_ms,
                )| {
                    Frame::ConsumerOpen(ConsumerOpen {
                        request_id,
                        topic,
                        consumer,
                        ack_wait_ms,
                        max_deliver,
                        max_ack_pending,
                        start,
                        dead_letter,
                        backoff_ms,
                    })
                }
            ),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, member_id)| Frame::ConsumerOk(
            ConsumerOk {
                request_id,
                member_id
            }
        )),
        (
            any::<u64>(),
            any::<u64>(),
            1u32..,
            any::<u64>(),
            bytes(64),
            headers()
        )
            .prop_map(|(stream, seq, delivery, timestamp_ms, payload, headers)| {
                Frame::ConsumerMessage(ConsumerMessage {
                    position: Position { stream, seq },
                    delivery,
                    timestamp_ms,
                    payload,
                    headers,
                })
            }),
        (any::<u64>(), any::<u64>(), consumer_ack_op()).prop_map(|(stream, seq, op)| {
            Frame::ConsumerAck(ConsumerAck {
                position: Position { stream, seq },
                op,
            })
        }),
    ]
}

/// Any valid frame of the kinds before durable consumers.
fn arb_base_frame() -> impl Strategy<Value = Frame> {
    prop_oneof![
        (
            any::<u8>(),
            any::<u8>(),
            any::<u64>(),
            text(),
            proptest::option::of(bytes(64))
        )
            .prop_map(
                |(min_version, max_version, features, client_name, auth_token)| Frame::Hello(
                    Hello {
                        min_version,
                        max_version,
                        features,
                        client_name,
                        auth_token,
                    }
                )
            ),
        (
            any::<u8>(),
            any::<u64>(),
            text(),
            any::<u32>(),
            any::<u64>()
        )
            .prop_map(|(version, features, server_id, max_frame_bytes, epoch)| {
                Frame::HelloOk(HelloOk {
                    version,
                    features,
                    server_id,
                    max_frame_bytes,
                    epoch,
                })
            }),
        (any::<u64>(), ack(), topic(), bytes(256), headers()).prop_map(
            |(request_id, ack, topic, payload, headers)| Frame::Publish(Publish {
                request_id,
                ack,
                topic,
                payload,
                headers,
            })
        ),
        (any::<u64>(), ack(), topic(), vec(bytes(64), 0..8))
            .prop_flat_map(|(request_id, ack, topic, payloads)| {
                let count = payloads.len();
                (
                    Just((request_id, ack, topic, payloads)),
                    indexed_headers(count),
                )
            })
            .prop_map(|((request_id, ack, topic, payloads), headers)| {
                Frame::PublishBatch(PublishBatch {
                    request_id,
                    ack,
                    topic,
                    payloads,
                    headers,
                })
            }),
        (any::<u64>(), any::<u32>())
            .prop_map(|(request_id, count)| Frame::PublishAck(PublishAck { request_id, count })),
        arb_subscribe().prop_map(Frame::Subscribe),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, subscription_id)| {
            Frame::SubscribeOk(SubscribeOk {
                request_id,
                subscription_id,
            })
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, subscription_id)| {
            Frame::Unsubscribe(Unsubscribe {
                request_id,
                subscription_id,
            })
        }),
        (any::<u64>(), any::<u64>(), vec(bytes(64), 0..8)).prop_map(
            |(stream, first_seq, events)| Frame::EventBatch(EventBatch {
                stream,
                first_seq,
                events
            })
        ),
        topic().prop_map(|topic| Frame::BatchTopic(BatchTopic { topic })),
        (0usize..6)
            .prop_flat_map(indexed_headers)
            .prop_map(|entries| { Frame::EventHeaders(EventHeaders { entries }) }),
        (any::<u64>(), key(), bytes(128), any::<u64>()).prop_map(
            |(request_id, key, value, ttl_ms)| Frame::CachePut(CachePut {
                request_id,
                key,
                value,
                ttl_ms,
            })
        ),
        (any::<u64>(), key())
            .prop_map(|(request_id, key)| Frame::CacheGet(CacheGet { request_id, key })),
        (any::<u64>(), key())
            .prop_map(|(request_id, key)| Frame::CacheDelete(CacheDelete { request_id, key })),
        (any::<u64>(), proptest::option::of(bytes(128)))
            .prop_map(|(request_id, value)| Frame::CacheValue(CacheValue { request_id, value })),
        (any::<u64>(), any::<bool>()).prop_map(|(request_id, existed)| Frame::CacheOk(CacheOk {
            request_id,
            existed
        })),
        (any::<u64>(), error_code(), text()).prop_map(|(request_id, code, message)| {
            Frame::Error(ErrorFrame {
                request_id,
                code,
                message,
            })
        }),
        (any::<u64>(), any::<u64>(), text()).prop_map(|(request_id, epoch, owner)| Frame::Moved(
            Moved {
                request_id,
                epoch,
                owner
            }
        )),
        any::<u64>()
            .prop_map(|request_id| Frame::ClusterInfoRequest(ClusterInfoRequest { request_id })),
        (any::<u64>(), any::<u64>(), vec((text(), text()), 0..5)).prop_map(
            |(request_id, epoch, members)| Frame::ClusterInfo(ClusterInfo {
                request_id,
                epoch,
                members: members
                    .into_iter()
                    .map(|(id, addr)| Member { id, addr })
                    .collect(),
            })
        ),
        (any::<u64>(), topic(), from(), any::<u32>()).prop_map(
            |(request_id, topic, from, max_bytes)| Frame::LogRead(LogRead {
                request_id,
                topic,
                from,
                max_bytes,
            })
        ),
        (
            any::<u64>(),
            from(),
            any::<bool>(),
            any::<bool>(),
            bytes(64)
        )
            .prop_map(|(request_id, next, more, owner, records)| Frame::LogChunk(
                LogChunk {
                    request_id,
                    next,
                    more,
                    owner,
                    records,
                }
            )),
        (any::<u64>(), topic(), text(), text()).prop_map(
            |(request_id, topic, from_id, from_addr)| Frame::LogClaim(LogClaim {
                request_id,
                topic,
                from_id,
                from_addr,
            })
        ),
        (any::<u64>(), any::<u64>()).prop_map(|(request_id, records)| Frame::LogClaimed(
            LogClaimed {
                request_id,
                records
            }
        )),
        (any::<u64>(), topic(), bytes(128)).prop_map(|(request_id, topic, rpc)| {
            Frame::ReplicaRpc(ReplicaRpc {
                request_id,
                topic,
                rpc,
            })
        }),
        any::<u64>().prop_map(|nonce| Frame::Ping(Ping { nonce })),
        any::<u64>().prop_map(|nonce| Frame::Pong(Ping { nonce })),
    ]
}
