//! Subscribing from a time over real QUIC: on a durable topic the time is found in the log's
//! time index and served like the resume position of that record (from disk or from the
//! retained tail), then live with no gap and no duplicate, before and after a restart on the
//! same storage directory; on a topic that is not durable the retained tail's times decide (a
//! time older than the tail starts at its oldest event, a future one is live only); and a
//! connection that was not granted `SUBSCRIBE_FROM_TIME` is refused a start time.

use std::time::{Duration, SystemTime};

use starling_client::Client;
use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};
use starling_proto::{
    ErrorCode, Frame, PROTOCOL_VERSION, StartAt, Subscribe, read_frame, write_frame,
};

use crate::common::{SOON, TestBroker, payload, read_one, start, wait_metrics};
use crate::{assert_ordered_and_complete, drain, drain_some};

/// Quiet period that ends a drain: nothing more is coming.
const QUIET: Duration = Duration::from_millis(700);
/// Pause around each recorded time, so no batch shares its millisecond.
const PAUSE: Duration = Duration::from_millis(60);

fn durable(dir: &std::path::Path, replay_window_ms: u64) -> ConfigOverrides {
    ConfigOverrides {
        durable_topics: Some(vec!["orders.*".into()]),
        storage_dir: Some(Some(dir.to_path_buf())),
        storage_fsync: Some(StorageFsync::Always),
        ack_level: Some(AckLevel::Persisted),
        replay_window_ms: Some(replay_window_ms),
        ..ConfigOverrides::default()
    }
}

async fn publish(c: &Client, topic: &str, range: std::ops::Range<u32>) {
    for i in range {
        c.publish_acked(topic, payload(i)).await.expect("ack");
    }
}

/// Publishes three batches with a recorded time between each two (all acked, so on disk
/// before the time is taken); returns the times `[after batch 1, after batch 2]`.
async fn three_batches(c: &Client, topic: &str) -> [SystemTime; 2] {
    publish(c, topic, 0..10).await;
    tokio::time::sleep(PAUSE).await;
    let t1 = SystemTime::now();
    tokio::time::sleep(PAUSE).await;
    publish(c, topic, 10..20).await;
    tokio::time::sleep(PAUSE).await;
    let t2 = SystemTime::now();
    tokio::time::sleep(PAUSE).await;
    publish(c, topic, 20..30).await;
    [t1, t2]
}

fn indices(got: &[(u32, starling_proto::Position)]) -> Vec<u32> {
    got.iter().map(|(i, _)| *i).collect()
}

/// From `t1` (between the first and second batch): exactly batches 2 and 3, then live.
async fn from_the_middle(b: &TestBroker, topic: &str, t1: SystemTime, live: u32) {
    let c = b.client().await;
    let mut sub = c.subscribe_from_time(topic, t1).await.expect("subscribe");
    let got = drain_some(&mut sub, QUIET).await;
    assert_eq!(indices(&got), (10..live).collect::<Vec<_>>());
    assert_ordered_and_complete(&got, &[]);
    c.publish_acked(topic, payload(live)).await.expect("ack");
    c.publish_acked(topic, payload(live + 1))
        .await
        .expect("ack");
    let after = drain_some(&mut sub, QUIET).await;
    assert_eq!(indices(&after), vec![live, live + 1], "live, once each");
    let all: Vec<_> = got.iter().chain(&after).copied().collect();
    assert_ordered_and_complete(&all, &[]);
    sub.unsubscribe().await;
    c.close().await;
}

async fn a_time_between_batches(replay_window_ms: u64) {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "orders.time";
    let b = start(Profile::Balanced, durable(dir.path(), replay_window_ms)).await;
    let c = b.client().await;
    let [t1, t2] = three_batches(&c, topic).await;
    // From the middle: batch 2 on, then live (30, 31).
    from_the_middle(&b, topic, t1, 30).await;
    // From the second time: batch 3 on and what was published since.
    let mut sub = c.subscribe_from_time(topic, t2).await.expect("subscribe");
    let got = drain_some(&mut sub, QUIET).await;
    assert_eq!(indices(&got), (20..32).collect::<Vec<_>>());
    drop(sub);
    // Before the first record: everything; after the last: live only.
    let mut all = c
        .subscribe_from_time(topic, SystemTime::UNIX_EPOCH)
        .await
        .expect("subscribe");
    assert_eq!(
        indices(&drain_some(&mut all, QUIET).await),
        (0..32).collect::<Vec<_>>()
    );
    tokio::time::sleep(PAUSE).await;
    let mut none = c
        .subscribe_from_time(topic, SystemTime::now())
        .await
        .expect("subscribe");
    assert!(
        drain(&mut none, Duration::from_millis(300))
            .await
            .is_empty()
    );
    c.publish_acked(topic, payload(32)).await.expect("ack");
    assert_eq!(indices(&drain_some(&mut none, QUIET).await), vec![32]);
    assert_eq!(indices(&drain_some(&mut all, QUIET).await), vec![32]);
    if replay_window_ms == 0 {
        wait_metrics(&b, "replayed from disk", |m| {
            m.sum("starling_storage_replayed_records_total") >= 1.0
        })
        .await;
    }
    drop((all, none));
    c.close().await;
    b.running.shutdown().await;

    // After a restart on the same storage: the times still find the same records.
    let b = start(Profile::Balanced, durable(dir.path(), replay_window_ms)).await;
    from_the_middle(&b, topic, t1, 33).await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_between_batches_replays_from_disk_then_live() {
    // Nothing retained in memory: the replay comes from the log.
    a_time_between_batches(0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_time_between_batches_replays_from_the_retained_tail_then_live() {
    // The log finds the position, the retained tail (which reaches back) serves it.
    a_time_between_batches(60_000).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_that_is_not_durable_starts_within_its_retained_tail() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path(), 60_000)).await;
    let c = b.client().await;
    let topic = "plain.time";
    let [t1, _] = three_batches(&c, topic).await;
    // The retained batches carry their times: from the middle, batch 2 on, then live.
    from_the_middle(&b, topic, t1, 30).await;
    assert_eq!(
        std::fs::read_dir(dir.path()).expect("dir").count(),
        0,
        "not logged"
    );
    b.running.shutdown().await;

    // A tail of 600 ms: a time older than what is retained starts at its oldest event.
    let b = start(Profile::Balanced, durable(dir.path(), 600)).await;
    let c = b.client().await;
    let before = SystemTime::now();
    publish(&c, topic, 0..5).await;
    tokio::time::sleep(Duration::from_millis(900)).await;
    publish(&c, topic, 5..10).await;
    let mut sub = c
        .subscribe_from_time(topic, before)
        .await
        .expect("subscribe");
    assert_eq!(
        indices(&drain_some(&mut sub, QUIET).await),
        (5..10).collect::<Vec<_>>()
    );
    // A time in the future: live events only, published before that time included.
    let future = SystemTime::now() + Duration::from_secs(3600);
    let mut live = c
        .subscribe_from_time(topic, future)
        .await
        .expect("subscribe");
    assert!(
        drain(&mut live, Duration::from_millis(300))
            .await
            .is_empty()
    );
    c.publish_acked(topic, payload(10)).await.expect("ack");
    assert_eq!(indices(&drain_some(&mut live, QUIET).await), vec![10]);
    assert_eq!(indices(&drain_some(&mut sub, QUIET).await), vec![10]);
    drop((sub, live));
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_start_time_needs_the_feature_bit() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path(), 60_000)).await;
    let c = b.client().await;
    assert!(
        c.server_info()
            .has_feature(starling_proto::features::SUBSCRIBE_FROM_TIME)
    );
    // A client that did not ask for SUBSCRIBE_FROM_TIME (an older one): a start time is an
    // invalid request, and the connection goes on.
    let conn = b.raw_ready(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let from_time = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 7,
        topic: "orders.raw".into(),
        start: StartAt::TimeMs(0),
    });
    write_frame(&mut send, &from_time).await.expect("write");
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => {
            assert_eq!((e.request_id, e.code), (7, ErrorCode::InvalidRequest));
            assert!(e.message.contains("SUBSCRIBE_FROM_TIME"), "{}", e.message);
        }
        other => panic!("expected an error, got {other:?}"),
    }
    // Its live subscriptions work as before.
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let live = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 8,
        topic: "orders.raw".into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &live).await.expect("write");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));
    // One that asked for it is served.
    let conn = b.raw(None).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let hello = Frame::Hello(starling_proto::Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: starling_proto::features::SUBSCRIBE_FROM_TIME,
        client_name: "from time".into(),
        auth_token: None,
    });
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(ok)) => {
            assert_eq!(ok.features, starling_proto::features::SUBSCRIBE_FROM_TIME);
        }
        other => panic!("expected HelloOk, got {other:?}"),
    }
    c.publish_acked("orders.raw", payload(1))
        .await
        .expect("ack");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    write_frame(&mut send, &from_time).await.expect("write");
    // One buffer for both frames: they may arrive in one read.
    let mut buf = bytes::BytesMut::new();
    let dec = starling_proto::FrameDecoder::new(1 << 20);
    let mut next = async || {
        tokio::time::timeout(SOON, read_frame(&mut recv, &mut buf, &dec, 4096))
            .await
            .expect("in time")
            .expect("a frame")
    };
    assert!(matches!(next().await, Some(Frame::SubscribeOk(_))));
    match next().await {
        Some(Frame::EventBatch(batch)) => assert_eq!(batch.events, vec![payload(1)]),
        other => panic!("expected the logged event, got {other:?}"),
    }
    c.close().await;
    b.running.shutdown().await;
}
