//! Headers on a durable topic: the log keeps them, so after a restart a subscriber resuming
//! from disk gets each message's headers (one granted `HEADERS`) or the payloads alone (one
//! not granted it), a consumer's deliveries carry them, and the de-duplication window is
//! rebuilt from the log: a publisher retrying after the restart is not stored twice.

use std::time::Duration;

use bytes::BytesMut;
use starling_client::{ConsumerConfig, Message};
use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};
use starling_proto::{Frame, FrameDecoder, StartAt, Subscribe, read_frame, write_frame};

use crate::FROM_THE_START;
use crate::common::start;

fn durable(dir: &std::path::Path) -> ConfigOverrides {
    ConfigOverrides {
        durable_topics: Some(vec!["h.*".into()]),
        storage_dir: Some(Some(dir.to_path_buf())),
        storage_fsync: Some(StorageFsync::Always),
        ack_level: Some(AckLevel::Persisted),
        // Nothing retained in memory: the resumes below read the log.
        replay_window_ms: Some(0),
        ..ConfigOverrides::default()
    }
}

fn message(i: u32) -> Message {
    Message::new(format!("m{i}"))
        .header("traceparent", format!("00-{i:032x}-{i:016x}-01"))
        .with_msg_id(format!("id-{i}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_keeps_headers_and_message_ids_across_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "h.jobs";
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    for i in 0..3 {
        c.publish_message(topic, message(i), true)
            .await
            .expect("persisted");
    }
    // A message without headers between them keeps its record as it always was.
    c.publish_acked(topic, "plain").await.expect("persisted");
    c.close().await;
    b.running.shutdown().await;

    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    // A retry of id-1 after the restart is a repeat: acked, not stored again.
    c.publish_message(topic, message(1), true)
        .await
        .expect("the repeat is acked");
    let m = b.metrics().await;
    assert_eq!(m.sum("starling_publish_duplicates_total"), 1.0);

    // Granted HEADERS (the SDK asks): every message with its own headers, from disk.
    let mut sub = c
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("resume");
    let mut got = Vec::new();
    while got.len() < 4 {
        let e = tokio::time::timeout(Duration::from_secs(5), sub.next_event())
            .await
            .expect("three with headers and the plain one, in time")
            .expect("the subscription goes on")
            .expect("an event");
        got.push(e);
    }
    for (i, e) in got.iter().take(3).enumerate() {
        assert_eq!(e.payload, format!("m{i}").as_bytes());
        let names: Vec<(&str, &str)> = e
            .headers
            .iter()
            .map(|h| (h.name.as_str(), h.value.as_str()))
            .collect();
        assert!(
            names.contains(&("Starling-Msg-Id", format!("id-{i}").as_str())),
            "{names:?}"
        );
        assert!(names.iter().any(|(n, _)| *n == "traceparent"), "{names:?}");
    }
    assert_eq!(got[3].payload, "plain".as_bytes());
    assert!(got[3].headers.is_empty());

    // Not granted HEADERS: the same records, the EventBatch frames alone.
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let subscribe = Frame::Subscribe(Subscribe {
        request_id: 1,
        topic: topic.into(),
        start: StartAt::Position(FROM_THE_START),
        group: None,
    });
    write_frame(&mut send, &subscribe).await.expect("subscribe");
    let (mut buf, dec) = (BytesMut::new(), FrameDecoder::new(1 << 20));
    let mut payloads = Vec::new();
    while payloads.len() < 4 {
        let frame = tokio::time::timeout(
            Duration::from_secs(5),
            read_frame(&mut recv, &mut buf, &dec, 4096),
        )
        .await
        .expect("in time")
        .expect("reads");
        match frame {
            Some(Frame::SubscribeOk(_)) => {}
            Some(Frame::EventBatch(b)) => payloads.extend(b.events),
            other => panic!("a subscriber without HEADERS got {other:?}"),
        }
    }
    assert_eq!(payloads[..4], [&b"m0"[..], b"m1", b"m2", b"plain"]);

    // A consumer's deliveries carry the headers too.
    let mut consumer = c
        .consume(topic, ConsumerConfig::new("workers"))
        .await
        .expect("consume");
    let d = tokio::time::timeout(Duration::from_secs(5), consumer.next())
        .await
        .expect("in time")
        .expect("a delivery")
        .expect("not an error");
    assert_eq!(d.payload, "m0".as_bytes());
    assert!(
        d.headers
            .iter()
            .any(|h| h.name == "Starling-Msg-Id" && h.value == "id-0"),
        "{:?}",
        d.headers
    );
    d.ack().expect("ack");
    c.close().await;
    b.running.shutdown().await;
}
