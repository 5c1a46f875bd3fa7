//! Message headers over real QUIC (the `HEADERS` feature): an SDK publish with headers reaches
//! SDK subscribers with its headers (a plain and a wildcard subscription), while a client that
//! did not ask for `HEADERS` receives the same EventBatch alone; a `PublishBatch`'s indexed
//! headers reach each payload they name; the per-message bounds refuse
//! with `LimitExceeded` and count; in a cluster headers are forwarded to a topic's owner and
//! relayed back (durable topics keep them: `tests/durable/headers.rs`).

use std::time::Duration;

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

/// In a cluster, headers cross the peer links both ways: a publish at a broker that does not
/// own the topic is forwarded to the owner with its headers, and the owner's batches are
/// relayed to a subscriber at the first broker with theirs. A message id is de-duplicated at
/// the owner whichever broker the publish came through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_forwarded_to_the_owner_and_relayed_back() {
    use starling_placement::Kind;
    use starling_testkit::cluster::key_owned_by;

    let cluster = TestCluster::start("headers", &["b0", "b1"]).await;
    let topic = key_owned_by("h.cluster", Kind::Topic, &["b0", "b1"], "b1");
    let at_b0 = cluster.plain_client("b0").await;
    let at_b1 = cluster.plain_client("b1").await;
    let mut relayed = at_b0.subscribe(&topic).await.expect("subscribe at b0");
    let mut owned = at_b1.subscribe(&topic).await.expect("subscribe at b1");
    // The relay from the owner starts shortly after the subscription: publish until the
    // subscriber at b0 sees a message, each with its own id.
    let mut first = None;
    for i in 0..50 {
        let msg = Message::new(format!("m{i}"))
            .header("traceparent", format!("00-{i:032x}-{i:016x}-01"))
            .with_msg_id(format!("id-{i}"));
        at_b0
            .publish_message(&topic, msg, true)
            .await
            .expect("forwarded to the owner with its headers");
        if let Ok(Some(Ok(e))) =
            tokio::time::timeout(Duration::from_millis(200), relayed.next_event()).await
        {
            first = Some(e);
            break;
        }
    }
    let first = first.expect("the relay delivers at b0");
    let id = first
        .headers
        .iter()
        .find(|h| h.name == "Starling-Msg-Id")
        .map(|h| h.value.clone())
        .expect("the relayed event keeps its message id");
    assert!(first.headers.iter().any(|h| h.name == "traceparent"));
    assert_eq!(
        id,
        format!("id-{}", String::from_utf8_lossy(&first.payload[1..]))
    );
    // The owner's own subscriber got the forwarded messages with their headers too.
    let e = tokio::time::timeout(Duration::from_secs(5), owned.next_event())
        .await
        .expect("in time")
        .expect("open")
        .expect("an event");
    assert_eq!(e.payload, "m0".as_bytes());
    assert!(
        e.headers
            .iter()
            .any(|h| h.name == "Starling-Msg-Id" && h.value == "id-0")
    );
    // A retry of id-0 at the owner itself is a repeat of the forwarded original.
    let retry = Message::new("m0").with_msg_id("id-0");
    at_b1
        .publish_message(&topic, retry, true)
        .await
        .expect("the repeat is acked");
    assert_eq!(
        cluster
            .metric("b1", "starling_publish_duplicates_total", "")
            .await,
        1.0
    );
    // A request (a message with reply-to) is forwarded too: the owner, where the topic has a
    // subscriber, decides it has responders and takes it (b0 counts no request: the owner
    // decides), and its subscriber gets the reply-to header.
    let inbox = "_INBOX.abcdefghijklmnop.1";
    let request = Message::new("q").header(starling_proto::REPLY_TO, inbox);
    at_b0
        .publish_message(&topic, request, true)
        .await
        .expect("the owner takes the request");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let e = tokio::time::timeout_at(deadline.into(), owned.next_event())
            .await
            .expect("the request arrives in time")
            .expect("open")
            .expect("an event");
        if e.payload == "q".as_bytes() {
            assert_eq!(starling_proto::request::reply_to(&e.headers), Some(inbox));
            break;
        }
    }
    assert_eq!(
        cluster.metric("b1", "starling_requests_total", "").await,
        1.0
    );
    assert_eq!(
        cluster.metric("b0", "starling_requests_total", "").await,
        0.0
    );
    at_b0.close().await;
    at_b1.close().await;
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
