//! Hostile input: arbitrary bytes, truncations and bogus lengths must give
//! `Ok(None)` or an error, never a panic, and never an oversized reservation.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod common;

use bytes::{BufMut, BytesMut};
use proptest::collection::vec;
use proptest::prelude::*;
use starling_proto::{
    AckMode, ConsumerMessage, DecodeError, Frame, FrameDecoder, FrameKind, HEADER_LEN, Publish,
    PublishBatch, StartAt, Subscribe, headers_len, indexed_headers_len,
};

const LIMIT: u32 = 64 * 1024;

/// Decodes frames from `bytes` until it needs more input or fails.
fn drain(dec: &FrameDecoder, bytes: &[u8]) {
    let mut buf = BytesMut::from(bytes);
    // Every successful decode consumes at least a header, so this ends.
    for _ in 0..=bytes.len() / HEADER_LEN {
        match dec.decode(&mut buf) {
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return,
        }
    }
}

/// A frame with a valid header of `kind` around an arbitrary payload.
fn framed(kind: FrameKind, flags: u16, payload: &[u8]) -> BytesMut {
    let mut buf = BytesMut::new();
    buf.put_u8(1);
    buf.put_u8(kind.as_u8());
    buf.put_u16(flags);
    buf.put_u32(u32::try_from(payload.len()).unwrap());
    buf.put_slice(payload);
    buf
}

fn any_kind() -> impl Strategy<Value = FrameKind> {
    proptest::sample::select(FrameKind::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        drain(&FrameDecoder::new(LIMIT), &bytes);
        drain(&FrameDecoder::new(0), &bytes);
    }

    /// Arbitrary payloads behind a valid header reach every body decoder.
    /// Whatever decodes must re-encode to the same bytes (flags aside):
    /// the encoding is canonical.
    #[test]
    fn arbitrary_payloads_never_panic_and_decode_canonically(
        kind in any_kind(),
        flags in any::<u16>(),
        payload in vec(any::<u8>(), 0..96),
    ) {
        let mut buf = framed(kind, flags, &payload);
        if let Ok(Some(frame)) = FrameDecoder::new(LIMIT).decode(&mut buf) {
            prop_assert!(buf.is_empty());
            prop_assert_eq!(frame.kind(), kind);
            prop_assert_eq!(&frame.to_bytes()[..], &framed(kind, 0, &payload)[..]);
        }
    }

    #[test]
    fn every_prefix_of_a_valid_frame_needs_more(frame in common::arb_frame()) {
        let wire = frame.to_bytes();
        let dec = FrameDecoder::new(u32::MAX);
        for end in 0..wire.len() {
            let mut buf = BytesMut::from(&wire[..end]);
            prop_assert_eq!(dec.decode(&mut buf), Ok(None), "prefix of {} bytes", end);
            prop_assert_eq!(buf.len(), end);
        }
    }

    /// Cutting the payload short while fixing up `payload_len` is always a
    /// malformed frame: every layout is self-delimiting, except that a `Subscribe` cut
    /// exactly before its optional trailing `start_time_ms` is the same subscription
    /// without it (live), a `Publish` or `PublishBatch` cut exactly before its optional trailing
    /// header list is the same request without headers (a `ConsumerMessage` the same delivery),
    /// and nothing else.
    #[test]
    fn every_shortened_payload_is_malformed(frame in common::arb_frame()) {
        let wire = frame.to_bytes();
        let payload = &wire[HEADER_LEN..];
        let dec = FrameDecoder::new(u32::MAX);
        let without_time = match &frame {
            Frame::Subscribe(s) if matches!(s.start, StartAt::TimeMs(_)) => {
                Some((payload.len() - 8, Frame::Subscribe(Subscribe { start: StartAt::Live, ..s.clone() })))
            }
            Frame::Publish(p) if !p.headers.is_empty() => Some((
                payload.len() - headers_len(&p.headers),
                Frame::Publish(Publish { headers: Vec::new(), ..p.clone() }),
            )),
            Frame::PublishBatch(p) if !p.headers.is_empty() => Some((
                payload.len() - indexed_headers_len(&p.headers),
                Frame::PublishBatch(PublishBatch { headers: Vec::new(), ..p.clone() }),
            )),
            Frame::ConsumerMessage(m) if !m.headers.is_empty() => Some((
                payload.len() - headers_len(&m.headers),
                Frame::ConsumerMessage(ConsumerMessage { headers: Vec::new(), ..m.clone() }),
            )),
            _ => None,
        };
        for end in 0..payload.len() {
            let mut buf = framed(frame.kind(), 0, &payload[..end]);
            let result = dec.decode(&mut buf);
            match &without_time {
                Some((at, live)) if *at == end => {
                    prop_assert_eq!(result, Ok(Some(live.clone())), "cut before the optional trailing field");
                }
                _ => prop_assert!(
                    matches!(result, Err(DecodeError::Malformed { .. })),
                    "payload cut at {}: {:?}", end, result
                ),
            }
        }
    }

    /// A `Subscribe` from a time cut anywhere inside its `start_time_ms` is malformed, never
    /// another subscription; one with a resume position and a time is refused.
    #[test]
    fn subscribe_start_time_is_all_or_nothing(
        s in common::arb_subscribe(),
        extra in any::<u64>(),
    ) {
        let frame = Frame::Subscribe(s.clone());
        let wire = frame.to_bytes();
        let payload = &wire[HEADER_LEN..];
        let dec = FrameDecoder::new(u32::MAX);
        match s.start {
            StartAt::TimeMs(_) => {
                for cut in 1..8 {
                    let mut buf = framed(frame.kind(), 0, &payload[..payload.len() - cut]);
                    let result = dec.decode(&mut buf);
                    prop_assert!(
                        matches!(result, Err(DecodeError::Malformed { .. })),
                        "cut {} bytes into start_time_ms: {:?}", cut, result
                    );
                }
            }
            StartAt::Position(_) => {
                let mut with_time = payload.to_vec();
                with_time.extend_from_slice(&extra.to_be_bytes());
                let mut buf = framed(frame.kind(), 0, &with_time);
                prop_assert_eq!(
                    dec.decode(&mut buf),
                    Err(DecodeError::Malformed {
                        frame: "subscribe",
                        reason: "start_time_ms set together with a resume position",
                    })
                );
            }
            StartAt::Live => {
                let mut with_time = payload.to_vec();
                with_time.extend_from_slice(&extra.to_be_bytes());
                let mut buf = framed(frame.kind(), 0, &with_time);
                let expected = Frame::Subscribe(Subscribe { start: StartAt::TimeMs(extra), ..s.clone() });
                prop_assert_eq!(dec.decode(&mut buf), Ok(Some(expected)));
            }
        }
    }

    #[test]
    fn appended_bytes_are_trailing_garbage(frame in common::arb_frame(), extra in vec(any::<u8>(), 1..8)) {
        let wire = frame.to_bytes();
        let mut payload = wire[HEADER_LEN..].to_vec();
        payload.extend_from_slice(&extra);
        let mut buf = framed(frame.kind(), 0, &payload);
        prop_assert!(FrameDecoder::new(u32::MAX).decode(&mut buf).is_err());
    }

    #[test]
    fn over_limit_is_rejected_before_reserving(
        kind in any_kind(),
        limit in 0u32..1_000_000,
        excess in 1u32..,
    ) {
        let claimed = limit.saturating_add(excess);
        prop_assume!(claimed > limit);
        let mut buf = BytesMut::with_capacity(HEADER_LEN);
        buf.put_u8(1);
        buf.put_u8(kind.as_u8());
        buf.put_u16(0);
        buf.put_u32(claimed);
        let before = buf.capacity();
        let result = FrameDecoder::new(limit).decode(&mut buf);
        prop_assert_eq!(result, Err(DecodeError::FrameTooLarge { len: claimed, max: limit }));
        prop_assert_eq!(buf.capacity(), before);
        prop_assert_eq!(buf.len(), HEADER_LEN);
    }

    /// A batch decodes exactly when its item count is within the decoder's cap, and one over
    /// it is refused as too many items, however its payloads are sized.
    #[test]
    fn batches_decode_exactly_within_the_item_cap(
        sizes in vec(0usize..8, 0..64),
        cap in 0u32..80,
    ) {
        let frame = Frame::PublishBatch(PublishBatch {
            request_id: 7,
            ack: AckMode::None,
            topic: "t".into(),
            payloads: sizes.iter().map(|&n| bytes::Bytes::from(vec![1u8; n])).collect(),
            headers: Vec::new(),
        });
        let mut buf = BytesMut::from(&frame.to_bytes()[..]);
        let result = FrameDecoder::new(LIMIT).with_max_batch_items(cap).decode(&mut buf);
        let count = u32::try_from(sizes.len()).unwrap();
        if count <= cap {
            prop_assert_eq!(result, Ok(Some(frame)));
        } else {
            prop_assert_eq!(
                result,
                Err(DecodeError::TooManyItems { frame: "publish_batch", count, max: cap })
            );
        }
    }

    /// Whatever count a batch announces and whatever follows it, a capped decoder either
    /// refuses it or returns at most `cap` payloads: never more items than the cap.
    #[test]
    fn a_capped_decoder_never_returns_more_items_than_the_cap(
        count in any::<u32>(),
        rest in vec(any::<u8>(), 0..256),
        cap in 0u32..64,
    ) {
        let mut payload = vec![0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1, b't'];
        payload.extend_from_slice(&count.to_be_bytes());
        payload.extend_from_slice(&rest);
        let mut buf = framed(FrameKind::PublishBatch, 0, &payload);
        match FrameDecoder::new(LIMIT).with_max_batch_items(cap).decode(&mut buf) {
            Ok(Some(Frame::PublishBatch(b))) => prop_assert!(b.payloads.len() <= cap as usize),
            Ok(other) => prop_assert!(false, "unexpected {:?}", other),
            Err(DecodeError::TooManyItems { count: c, max, .. }) => {
                prop_assert_eq!((c, max), (count, cap));
                prop_assert!(count > cap);
            }
            Err(_) => {}
        }
    }

    #[test]
    fn partial_frame_reserves_at_most_its_length(kind in any_kind(), len in 0u32..=LIMIT, have in 0usize..64) {
        let mut buf = framed(kind, 0, &[]);
        buf.truncate(4);
        buf.put_u32(len);
        buf.extend(std::iter::repeat_n(0u8, have.min(len as usize).saturating_sub(1)));
        let mut tight = BytesMut::with_capacity(buf.len());
        tight.extend_from_slice(&buf);
        let result = FrameDecoder::new(LIMIT).decode(&mut tight);
        if result == Ok(None) {
            prop_assert!(tight.capacity() <= (HEADER_LEN + len as usize).max(buf.len()) * 2);
        }
    }
}

proptest! {
    /// A queue-group `Subscribe` survives encode → decode unchanged; cut anywhere it is
    /// malformed, except right before its trailer (the same subscription without a group) and
    /// right before its group (a subscription from `start_time_ms`, `NO_START_TIME` for a
    /// group without a start time); with bytes appended it is trailing garbage.
    #[test]
    fn group_subscribe_round_trips_and_cuts_are_malformed(
        s in common::arb_group_subscribe(),
        extra in vec(any::<u8>(), 1..8),
    ) {
        let frame = Frame::Subscribe(s.clone());
        let wire = frame.to_bytes();
        prop_assert_eq!(wire.len(), frame.encoded_len());
        let dec = FrameDecoder::new(u32::MAX);
        let mut whole = BytesMut::from(&wire[..]);
        prop_assert_eq!(dec.decode(&mut whole), Ok(Some(frame.clone())));
        let payload = &wire[HEADER_LEN..];
        let group_len = 2 + s.group.as_ref().map_or(0, String::len);
        let before_group = payload.len() - group_len;
        let before_time = before_group - 8;
        let ungrouped = Subscribe { group: None, ..s.clone() };
        for end in 0..payload.len() {
            let mut buf = framed(frame.kind(), 0, &payload[..end]);
            let result = dec.decode(&mut buf);
            if end == before_time {
                // No trailer at all: a subscription from a time loses its time too.
                let start = match s.start {
                    StartAt::TimeMs(_) => StartAt::Live,
                    other => other,
                };
                let bare = Subscribe { start, ..ungrouped.clone() };
                prop_assert_eq!(result, Ok(Some(Frame::Subscribe(bare))));
            } else if end == before_group {
                let time = match s.start {
                    StartAt::TimeMs(ms) => ms,
                    _ => starling_proto::NO_START_TIME,
                };
                if matches!(s.start, StartAt::Position(_)) {
                    prop_assert!(matches!(result, Err(DecodeError::Malformed { .. })), "{:?}", result);
                } else {
                    let timed = Subscribe { start: StartAt::TimeMs(time), ..ungrouped.clone() };
                    prop_assert_eq!(result, Ok(Some(Frame::Subscribe(timed))));
                }
            } else {
                prop_assert!(
                    matches!(result, Err(DecodeError::Malformed { .. })),
                    "payload cut at {}: {:?}", end, result
                );
            }
        }
        let mut long = payload.to_vec();
        long.extend_from_slice(&extra);
        let mut buf = framed(frame.kind(), 0, &long);
        let result = dec.decode(&mut buf);
        prop_assert!(matches!(result, Err(DecodeError::Malformed { .. })), "appended bytes: {:?}", result);
    }

    /// Any bytes where a group name goes decode to a valid group or are malformed.
    #[test]
    fn any_group_bytes_are_valid_or_malformed(
        s in common::arb_group_subscribe(),
        name in vec(any::<u8>(), 0..80),
    ) {
        let wire = Frame::Subscribe(s.clone()).to_bytes();
        let payload = &wire[HEADER_LEN..];
        let group_len = 2 + s.group.as_ref().map_or(0, String::len);
        let mut p = payload[..payload.len() - group_len].to_vec();
        p.extend_from_slice(&u16::try_from(name.len()).unwrap().to_be_bytes());
        p.extend_from_slice(&name);
        let mut buf = framed(FrameKind::Subscribe, 0, &p);
        match FrameDecoder::new(u32::MAX).decode(&mut buf) {
            Ok(Some(Frame::Subscribe(got))) => {
                let group = got.group.unwrap_or_default();
                prop_assert!(starling_proto::validate_group(&group).is_ok());
                prop_assert_eq!(group.as_bytes(), &name[..]);
            }
            Err(DecodeError::Malformed { .. }) => {
                let valid = std::str::from_utf8(&name).is_ok_and(|n| starling_proto::validate_group(n).is_ok());
                prop_assert!(!valid, "a valid name was refused");
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}

#[test]
fn header_errors_leave_the_buffer_untouched() {
    for bytes in [
        &[2u8, 0x01, 0, 0, 0, 0, 0, 0][..],
        &[1u8, 0x00, 0, 0, 0, 0, 0, 0][..],
        &[1u8, 0xff, 0, 0, 0, 0, 0, 0][..],
    ] {
        let mut buf = BytesMut::from(bytes);
        assert!(FrameDecoder::new(LIMIT).decode(&mut buf).is_err());
        assert_eq!(&buf[..], bytes);
    }
}

#[test]
fn every_unassigned_type_number_is_rejected() {
    for t in 0..=u8::MAX {
        let mut buf = BytesMut::from(&[1u8, t, 0, 0, 0, 0, 0, 0][..]);
        let result = FrameDecoder::new(LIMIT).decode(&mut buf);
        match FrameKind::from_u8(t) {
            None => assert_eq!(result, Err(DecodeError::UnknownFrameType(t))),
            Some(_) => assert!(!matches!(result, Err(DecodeError::UnknownFrameType(_)))),
        }
    }
}

#[test]
fn every_other_version_is_rejected() {
    for v in (0..=u8::MAX).filter(|v| *v != 1) {
        let mut buf = BytesMut::from(&[v, 0x60, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0][..]);
        assert_eq!(
            FrameDecoder::new(LIMIT).decode(&mut buf),
            Err(DecodeError::UnsupportedVersion(v))
        );
    }
}

#[test]
fn unknown_flag_bits_are_ignored() {
    let mut buf = BytesMut::from(&[1u8, 0x60, 0xa5, 0x5a, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 9][..]);
    let frame = FrameDecoder::new(LIMIT).decode(&mut buf).unwrap().unwrap();
    assert_eq!(
        frame,
        starling_proto::Frame::Ping(starling_proto::Ping { nonce: 9 })
    );
}
