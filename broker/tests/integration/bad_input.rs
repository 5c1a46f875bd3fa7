//! Malformed input over real QUIC: each case gets a typed error, and the broker stays healthy
//! for everyone else.

use bytes::{BufMut, BytesMut};
use starling_proto::{ErrorCode, FRAMING_VERSION, Frame, write_frame};

use crate::common::*;

/// Sends raw bytes on a new stream of a handshaken connection and returns the first reply.
async fn send_raw(b: &TestBroker, bytes: &[u8], finish: bool) -> Option<Frame> {
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(bytes).await.expect("write");
    if finish {
        send.finish().expect("finish");
    }
    read_one(&mut recv).await
}

fn header(version: u8, kind: u8, len: u32) -> BytesMut {
    let mut b = BytesMut::new();
    b.put_u8(version);
    b.put_u8(kind);
    b.put_u16(0);
    b.put_u32(len);
    b
}

fn expect_error(reply: Option<Frame>, code: ErrorCode) {
    match reply {
        Some(Frame::Error(e)) => assert_eq!(e.code, code, "message: {}", e.message),
        other => panic!("expected {code:?} error, got {other:?}"),
    }
}

async fn still_healthy(b: &TestBroker) {
    assert_eq!(b.http_get("/healthz").await.0, 200);
    assert_eq!(b.http_get("/readyz").await.0, 200);
    let c = b.client().await;
    let mut sub = c.subscribe("health").await.expect("subscribe");
    c.publish_acked("health", payload(7))
        .await
        .expect("publish");
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_frames_get_typed_errors_and_harm_no_one() {
    let b = start_default().await;
    // A bystander connected before the abuse keeps working through it.
    let bystander = b.client().await;
    let mut watch = bystander.subscribe("bystander").await.expect("subscribe");

    // Truncated: the header promises 100 bytes, the stream ends after 10.
    let mut t = header(FRAMING_VERSION, 0x10, 100);
    t.put_slice(&[0u8; 10]);
    expect_error(send_raw(&b, &t, true).await, ErrorCode::BadFrame);

    // Oversized: beyond max_frame_bytes, refused from the header alone.
    let o = header(FRAMING_VERSION, 0x10, u32::MAX);
    expect_error(send_raw(&b, &o, false).await, ErrorCode::FrameTooLarge);

    // Unknown frame type.
    let mut u = header(FRAMING_VERSION, 0xEE, 4);
    u.put_u32(0);
    expect_error(send_raw(&b, &u, false).await, ErrorCode::UnknownFrameType);

    // Wrong header version on a stream.
    let mut v = header(9, 0x10, 4);
    v.put_u32(0);
    expect_error(send_raw(&b, &v, false).await, ErrorCode::UnsupportedVersion);

    // Garbage bytes.
    let garbage: Vec<u8> = (0..200u32)
        .map(|i| (i.wrapping_mul(131) % 251) as u8)
        .collect();
    let reply = send_raw(&b, &garbage, true).await;
    assert!(
        matches!(reply, Some(Frame::Error(_))),
        "garbage must get an Error frame, got {reply:?}"
    );

    // A well-formed frame that is wrong for a new stream.
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    write_frame(&mut send, &hello(1, 1)).await.expect("write");
    expect_error(read_one(&mut recv).await, ErrorCode::InvalidRequest);

    bystander
        .publish("bystander", payload(1))
        .await
        .expect("publish");
    assert_eq!(index(&recv_n(&mut watch, 1).await[0].1), 1);
    still_healthy(&b).await;
    let m = b.metrics().await;
    assert!(m.sum("starling_protocol_errors_total") >= 6.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_handshakes_are_refused_with_typed_errors() {
    let b = start_default().await;
    // Unsupported version range.
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    write_frame(&mut send, &hello(7, 9)).await.expect("write");
    expect_error(read_one(&mut recv).await, ErrorCode::UnsupportedVersion);
    let closed = tokio::time::timeout(SOON, conn.closed())
        .await
        .expect("connection closed");
    assert!(
        matches!(closed, quinn::ConnectionError::ApplicationClosed(_)),
        "{closed:?}"
    );

    // Garbage instead of Hello.
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let _ = send.finish();
    assert!(matches!(read_one(&mut recv).await, Some(Frame::Error(_))));

    // Something other than Hello first.
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    write_frame(&mut send, &Frame::Ping(starling_proto::Ping { nonce: 1 }))
        .await
        .expect("write");
    expect_error(read_one(&mut recv).await, ErrorCode::InvalidRequest);

    still_healthy(&b).await;
    b.running.shutdown().await;
}

/// A publish carrying headers on a connection not granted `HEADERS` is refused with a typed
/// error and delivers nothing, rather than reaching subscribers without its headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_without_the_feature_are_refused() {
    let b = start_default().await;
    let watcher = b.client().await;
    let mut watch = watcher.subscribe("hdr").await.expect("subscribe");
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let publish = Frame::Publish(starling_proto::Publish {
        request_id: 9,
        ack: starling_proto::AckMode::Ack,
        topic: "hdr".into(),
        payload: payload(1),
        headers: vec![starling_proto::Header::new("trace", "t1")],
    });
    write_frame(&mut send, &publish).await.expect("write");
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => {
            assert_eq!(e.code, ErrorCode::InvalidRequest, "{}", e.message);
            assert_eq!(e.request_id, 9);
            assert!(e.message.contains("HEADERS"), "{}", e.message);
        }
        other => panic!("expected InvalidRequest, got {other:?}"),
    }
    // The same stream still takes a publish without headers; only that one is delivered.
    let plain = Frame::Publish(starling_proto::Publish {
        request_id: 10,
        ack: starling_proto::AckMode::Ack,
        topic: "hdr".into(),
        payload: payload(2),
        headers: Vec::new(),
    });
    write_frame(&mut send, &plain).await.expect("write");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::PublishAck(_))
    ));
    assert_eq!(index(&recv_n(&mut watch, 1).await[0].1), 2);
    b.running.shutdown().await;
}
