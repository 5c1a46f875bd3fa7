//! Slow subscribers under each policy: the right drops and counters, nobody else affected, and
//! (under `block`) a fire-and-forget publisher held to its publish window.

use std::time::Duration;

use bytes::Bytes;
use starling_config::{ConfigOverrides, Profile, SlowSubscriberPolicy};
use starling_proto::{Frame, StartAt, Subscribe, write_frame};

use crate::common::*;

fn slow_config(policy: SlowSubscriberPolicy) -> ConfigOverrides {
    ConfigOverrides {
        slow_subscriber_policy: Some(policy),
        subscriber_queue_capacity: Some(4),
        event_batch_max_events: Some(1),
        ..ConfigOverrides::default()
    }
}

/// A subscriber that subscribes over raw QUIC with a 16 KiB stream window and then never reads.
struct Stalled {
    _conn: quinn::Connection,
    _streams: (quinn::SendStream, quinn::RecvStream),
}

async fn stalled_subscriber(b: &TestBroker, topic: &str) -> Stalled {
    let conn = b.raw_ready(Some(16 * 1024)).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let sub = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: topic.into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &sub).await.expect("subscribe");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));
    Stalled {
        _conn: conn,
        _streams: (send, recv),
    }
}

fn big(i: u32) -> Bytes {
    starling_testkit::payload::padded(i, 2048)
}

async fn drop_policy_case(policy: SlowSubscriberPolicy, reason: &str) {
    let b = start(Profile::Balanced, slow_config(policy)).await;
    let c = b.client().await;
    let mut fast = c.subscribe("t").await.expect("subscribe");
    let _slow = stalled_subscriber(&b, "t").await;
    let publisher = b.client().await;
    // Lockstep with the healthy subscriber, so only the stuck one can fall behind.
    let mut got = Vec::new();
    for i in 0..200u32 {
        publisher.publish("t", big(i)).await.expect("publish");
        got.extend(recv_n(&mut fast, 1).await.iter().map(|(_, p)| index(p)));
    }
    assert_eq!(
        got,
        (0..200).collect::<Vec<_>>(),
        "the healthy subscriber got everything, in order"
    );
    let key = format!("starling_dropped_events_total{{reason={reason}}}");
    let m = wait_metrics(&b, &key, |m| m.get(&key) > 0.0).await;
    // Everything the slow subscriber did not drop is queued, in flight or delivered to it.
    assert!(m.get(&key) < 200.0);
    assert!(
        m.get("starling_subscriber_queued_batches") <= 4.0,
        "queue bound holds"
    );
    assert!(m.get("starling_lane_stalls_total") >= 1.0);
    for other in ["queue_full_drop_new", "queue_full_drop_old"]
        .iter()
        .filter(|r| **r != reason)
    {
        assert_eq!(
            m.get(&format!("starling_dropped_events_total{{reason={other}}}")),
            0.0
        );
    }
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_new_drops_for_the_slow_subscriber_only() {
    drop_policy_case(SlowSubscriberPolicy::DropNew, "queue_full_drop_new").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_old_drops_for_the_slow_subscriber_only() {
    drop_policy_case(SlowSubscriberPolicy::DropOld, "queue_full_drop_old").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn block_pushes_back_on_the_publisher_and_loses_nothing() {
    // More than the SDK's own per-stream queue (1024 frames) plus every broker-side buffer.
    const FLOOD: u32 = 3000;
    let mut o = slow_config(SlowSubscriberPolicy::Block);
    o.pub_queue_depth = Some(8);
    o.event_stream_recv_window = Some(16 * 1024);
    o.event_conn_recv_window = Some(64 * 1024);
    let b = start(Profile::Balanced, o).await;
    let c = b.client().await;
    let mut fast = c.subscribe("t").await.expect("subscribe");
    let mut unrelated = c.subscribe("other").await.expect("subscribe");
    let slow = stalled_subscriber(&b, "t").await;

    let publisher = b.client().await;
    let p = publisher.clone();
    let flood = tokio::spawn(async move {
        for i in 0..FLOOD {
            p.publish("t", big(i)).await.expect("publish");
        }
    });
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !flood.is_finished(),
        "the publisher must be held back while the subscriber is stuck"
    );
    let m = b.metrics().await;
    assert!(
        m.get("starling_subscriber_queued_batches") <= 8.0,
        "memory stays bounded"
    );

    // Other topics keep flowing.
    let other = b.client().await;
    for i in 0..50u32 {
        other.publish("other", payload(i)).await.expect("publish");
    }
    assert_eq!(recv_n(&mut unrelated, 50).await.len(), 50);

    // The stuck subscriber leaves: the topic resumes and nothing was lost for the others.
    drop(slow);
    tokio::time::timeout(SOON * 3, flood)
        .await
        .expect("publisher resumes")
        .expect("no panic");
    let idx: Vec<u32> = recv_n(&mut fast, FLOOD as usize)
        .await
        .iter()
        .map(|(_, p)| index(p))
        .collect();
    assert_eq!(idx, (0..FLOOD).collect::<Vec<_>>());
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_dropped_events_total{reason=queue_full_drop_new}"),
        0.0
    );
    assert_eq!(
        m.get("starling_dropped_events_total{reason=queue_full_drop_old}"),
        0.0
    );
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_budget_bounds_queued_bytes_across_subscribers() {
    // Room for 1024 batches per queue, but only 64 KiB of queued batches broker-wide: the
    // stalled subscriber hits the budget long before its queue.
    let budget = 64 * 1024;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            subscriber_queue_capacity: Some(1024),
            subscriber_queue_budget_bytes: Some(budget),
            max_frame_bytes: Some(64 * 1024),
            event_batch_max_bytes: Some(16 * 1024),
            ..slow_config(SlowSubscriberPolicy::DropNew)
        },
    )
    .await;
    let c = b.client().await;
    let mut fast = c.subscribe("t").await.expect("subscribe");
    let _slow = stalled_subscriber(&b, "t").await;
    let publisher = b.client().await;
    let mut got = Vec::new();
    for i in 0..200u32 {
        publisher.publish("t", big(i)).await.expect("publish");
        got.extend(recv_n(&mut fast, 1).await.iter().map(|(_, p)| index(p)));
    }
    assert_eq!(
        got,
        (0..200).collect::<Vec<_>>(),
        "the healthy subscriber got all"
    );
    let key = "starling_dropped_events_total{reason=queue_budget}";
    let m = wait_metrics(&b, key, |m| m.get(key) > 0.0).await;
    assert!(m.get(key) < 200.0);
    assert!(
        m.get("starling_subscriber_queued_bytes") <= budget as f64,
        "queued bytes {} within the budget",
        m.get("starling_subscriber_queued_bytes")
    );
    assert!(m.get("starling_subscriber_queued_batches") < 64.0);
    assert_eq!(
        m.get("starling_dropped_events_total{reason=queue_full_drop_new}"),
        0.0,
        "the queue itself never filled"
    );
    b.running.shutdown().await;
}

/// Publishes 1 KiB messages fire-and-forget to `topic` until one times out (or `cap` bytes are
/// accepted); returns the bytes accepted.
async fn accepted_until_stuck(client: &starling_client::Client, topic: &str, cap: usize) -> usize {
    let payload = Bytes::from(vec![7u8; 1024]);
    let mut accepted = 0;
    while accepted < cap {
        match client.publish(topic, payload.clone()).await {
            Ok(()) => accepted += payload.len(),
            Err(starling_client::ClientError::Timeout) => return accepted,
            Err(e) => panic!("publish failed with {e} after {accepted} bytes"),
        }
    }
    accepted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publish_window_bounds_what_a_stuck_topic_holds() {
    const MIB: u64 = 1024 * 1024;
    const WINDOW: u64 = 64 * 1024;
    // Under `block`, a subscriber that never reads stops its topic; then the publish worker's
    // queue (16 requests) fills and the broker stops reading the publish stream, whose receive
    // window (4 MiB here) is all QUIC flow control holds back.
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            pub_queue_depth: Some(16),
            event_stream_recv_window: Some(4 * MIB),
            event_conn_recv_window: Some(8 * MIB),
            ..slow_config(SlowSubscriberPolicy::Block)
        },
    )
    .await;
    let connect = |window: Option<u64>| {
        let mut cfg = b.client_config().with_publish_window(window);
        cfg.request_timeout = Duration::from_millis(500);
        // One stream, so the window and the stream window are the only bounds.
        cfg.tuning.pub_conn_pool = 1;
        cfg.tuning.pub_streams_per_conn = 1;
        starling_client::Client::connect(cfg)
    };
    let cap = 32 * MIB as usize;

    let stuck = stalled_subscriber(&b, "windowed").await;
    let windowed = connect(Some(WINDOW)).await.expect("client");
    let held = accepted_until_stuck(&windowed, "windowed", cap).await;

    let _stuck_too = stalled_subscriber(&b, "open").await;
    let open = connect(None).await.expect("client");
    let unbounded = accepted_until_stuck(&open, "open", cap).await;

    assert!(
        unbounded as u64 >= 4 * MIB,
        "without a window the broker's stream window fills: {unbounded} bytes accepted"
    );
    // The window, plus what the stuck path holds past the broker's receipt (16 queued
    // requests, the topic's and the subscriber's queues, its 16 KiB stream window).
    assert!(
        (held as u64) < WINDOW + 512 * 1024 && held < unbounded / 4,
        "the window held the publisher to {held} bytes (unbounded: {unbounded})"
    );

    // The messages move again once the stuck subscriber goes: the marks are acked and the
    // windowed publisher goes on.
    drop(stuck);
    tokio::time::timeout(SOON, async {
        while windowed
            .publish("windowed", Bytes::from_static(b"again"))
            .await
            .is_err()
        {}
    })
    .await
    .expect("the window reopened");
    let more = accepted_until_stuck(&windowed, "windowed", 2 * MIB as usize).await;
    assert_eq!(
        more as u64,
        2 * MIB,
        "no subscriber holds the topic back now"
    );
    b.running.shutdown().await;
}
