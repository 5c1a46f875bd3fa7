//! Message headers over real QUIC (the `HEADERS` feature): an SDK publish with headers reaches
//! SDK subscribers with its headers (a plain and a wildcard subscription), while a client that
//! did not ask for `HEADERS` receives the same EventBatch alone; a `PublishBatch`'s indexed
//! headers reach each payload they name; the per-message bounds refuse
//! with `LimitExceeded` and count; durable topics and cluster members refuse headers with
//! `InvalidRequest` for now.

use bytes::BytesMut;
use starling_client::{ClientError, Event, Header, Message, Subscription};
use starling_config::{ConfigOverrides, Profile};
use starling_proto::{ErrorCode, Frame, FrameDecoder, StartAt, Subscribe, read_frame, write_frame};
use starling_testkit::cluster::TestCluster;

use crate::common::*;

async fn next(sub: &mut Subscription) -> Event {
    match tokio::time::timeout(SOON, sub.next_event()).await {
        Ok(Some(Ok(ev))) => ev,
        other => panic!("expected an event, got {other:?}"),
    }
}

fn server_code(r: Result<(), ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_reach_subscribers_that_asked_and_old_clients_get_the_payloads() {
    let b = start_default().await;
    let c = b.client().await;
    let mut plain = c.subscribe("h.t").await.expect("subscribe");
    let mut wild = c.subscribe("h.*").await.expect("subscribe pattern");
    // A client that did not ask for HEADERS (as every client before it).
    let old = b.raw_ready(None).await;
    let (mut send, mut recv) = old.open_bi().await.expect("stream");
    let req = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: "h.t".into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &req).await.expect("subscribe");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));

    let message = Message::new("with")
        .header("traceparent", "00-abc-01")
        .header("traceparent", "repeat = kept")
        .header("empty", "");
    let sent = message.headers.clone();
    c.publish_message("h.t", message, true)
        .await
        .expect("publish with headers");
    c.publish_acked("h.t", "without").await.expect("publish");

    for sub in [&mut plain, &mut wild] {
        let first = next(sub).await;
        assert_eq!((&first.payload[..], &first.headers), (&b"with"[..], &sent));
        let second = next(sub).await;
        assert_eq!(&second.payload[..], b"without");
        assert!(second.headers.is_empty());
    }
    // The old client: EventBatches only, never an EventHeaders frame (one buffer across
    // reads: both batches may arrive in one).
    let (mut buf, dec) = (BytesMut::new(), FrameDecoder::new(1 << 20));
    let mut payloads = Vec::new();
    while payloads.len() < 2 {
        let frame = tokio::time::timeout(SOON, read_frame(&mut recv, &mut buf, &dec, 4096)).await;
        match frame {
            Ok(Ok(Some(Frame::EventBatch(batch)))) => payloads.extend(batch.events),
            other => panic!("expected an EventBatch, got {other:?}"),
        }
    }
    assert_eq!(payloads, ["with", "without"]);
    let m = b.metrics().await;
    assert_eq!(m.get("starling_header_messages_total"), 1.0);
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_past_the_per_message_bounds_are_refused_and_counted() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_headers_per_message: Some(2),
            max_header_bytes_per_message: Some(64),
            ..base_overrides()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("h.limits").await.expect("subscribe");
    let three = Message::new("3")
        .header("a", "1")
        .header("b", "2")
        .header("c", "3");
    let (code, why) = server_code(c.publish_message("h.limits", three, true).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("max_headers_per_message"), "{why}");
    let big = Message::new("big").header("k", "v".repeat(64));
    let (code, why) = server_code(c.publish_message("h.limits", big, true).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("max_header_bytes_per_message"), "{why}");
    // At the bounds exactly: two headers of 64 encoded bytes in all (4 + 2 × (2 + 1 + 2 + 23)).
    let fits = Message::new("fits")
        .header("a", "x".repeat(23))
        .header("b", "y".repeat(23));
    c.publish_message("h.limits", fits, true)
        .await
        .expect("within the bounds");
    // Names are checked before sending.
    let bad = Message::new("bad").header("a:b", "v");
    assert!(matches!(
        c.publish_message("h.limits", bad, true).await,
        Err(ClientError::InvalidHeader(_))
    ));
    // Only the message within the bounds was delivered.
    let ev = next(&mut sub).await;
    assert_eq!(&ev.payload[..], b"fits");
    assert_eq!(ev.headers.len(), 2);
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_headers_per_message}"),
        1.0
    );
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_header_bytes_per_message}"),
        1.0
    );
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn durable_topics_refuse_headers_with_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            durable_topics: Some(vec!["d.*".into()]),
            storage_dir: Some(Some(dir.path().to_path_buf())),
            ..base_overrides()
        },
    )
    .await;
    let c = b.client().await;
    let headed = Message::new("x").header("k", "v");
    let (code, why) = server_code(c.publish_message("d.orders", headed.clone(), true).await);
    assert_eq!(code, ErrorCode::InvalidRequest, "{why}");
    assert!(why.contains("durable"), "{why}");
    // Without headers the durable topic takes it; a topic that is not durable takes headers.
    c.publish_acked("d.orders", "plain").await.expect("publish");
    c.publish_message("other", headed, true)
        .await
        .expect("headers on a live topic");
    let m = b.metrics().await;
    assert_eq!(m.get("starling_headers_refused_total{reason=durable}"), 1.0);
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clustered_broker_refuses_headers_with_a_clear_error() {
    let cluster = TestCluster::start("headers", &["b0", "b1"]).await;
    let c = cluster.plain_client("b0").await;
    let headed = Message {
        payload: "x".into(),
        headers: vec![Header::new("k", "v")],
    };
    let (code, why) = server_code(c.publish_message("orders.eu", headed, true).await);
    assert_eq!(code, ErrorCode::InvalidRequest, "{why}");
    assert!(why.contains("cluster"), "{why}");
    c.publish_acked("orders.eu", "plain")
        .await
        .expect("publish without headers");
    c.close().await;
    cluster.shutdown().await;
}

/// A `PublishBatch` whose headers index some of its payloads (written by hand: the SDK's batch
/// publish carries none) delivers each message with its own headers, in order, and counts
/// the messages with headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publish_batch_delivers_each_payload_with_its_own_headers() {
    use starling_proto::{AckMode, IndexedHeaders, PublishBatch, features};
    let b = start_default().await;
    let c = b.client().await;
    let mut sub = c.subscribe("h.batch").await.expect("subscribe");
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let mut hello = hello(
        starling_proto::PROTOCOL_VERSION,
        starling_proto::PROTOCOL_VERSION,
    );
    if let Frame::Hello(h) = &mut hello {
        h.features = features::BATCH_PUBLISH | features::HEADERS;
    }
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(ok)) => assert_ne!(ok.features & features::HEADERS, 0),
        other => panic!("expected HelloOk, got {other:?}"),
    }
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let batch = Frame::PublishBatch(PublishBatch {
        request_id: 4,
        ack: AckMode::Ack,
        topic: "h.batch".into(),
        payloads: ["a", "b", "c", "d"].map(bytes::Bytes::from).to_vec(),
        headers: vec![
            IndexedHeaders {
                index: 0,
                headers: vec![Header::new("n", "0")],
            },
            IndexedHeaders {
                index: 2,
                headers: vec![Header::new("n", "2"), Header::new("m", "")],
            },
        ],
    });
    write_frame(&mut send, &batch).await.expect("publish");
    match read_one(&mut recv).await {
        Some(Frame::PublishAck(ack)) => assert_eq!((ack.request_id, ack.count), (4, 4)),
        other => panic!("expected PublishAck, got {other:?}"),
    }
    let mut got = Vec::new();
    for _ in 0..4 {
        let ev = next(&mut sub).await;
        got.push((
            String::from_utf8_lossy(&ev.payload).into_owned(),
            ev.headers,
        ));
    }
    assert_eq!(
        got,
        [
            ("a".to_string(), vec![Header::new("n", "0")]),
            ("b".to_string(), vec![]),
            (
                "c".to_string(),
                vec![Header::new("n", "2"), Header::new("m", "")]
            ),
            ("d".to_string(), vec![]),
        ]
    );
    assert_eq!(b.metrics().await.get("starling_header_messages_total"), 2.0);
    c.close().await;
    b.running.shutdown().await;
}
