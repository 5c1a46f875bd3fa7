//! Fanout, ordering, batching triggers, lane shard policies and acks.

use std::time::{Duration, Instant};

use bytes::Bytes;
use starling_config::{ConfigOverrides, LaneShard, Profile};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fanout_reaches_every_subscriber_in_order() {
    let b = start_default().await;
    let client = b.client().await;
    let mut subs = Vec::new();
    for _ in 0..5 {
        subs.push(client.subscribe("orders").await.expect("subscribe"));
    }
    let other = b.client().await;
    for i in 0..300u32 {
        other.publish("orders", payload(i)).await.expect("publish");
    }
    for sub in &mut subs {
        let got = recv_n(sub, 300).await;
        let idx: Vec<u32> = got.iter().map(|(_, p)| index(p)).collect();
        assert_eq!(idx, (0..300).collect::<Vec<_>>());
        let seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
        assert_eq!(
            seqs,
            (0..300).collect::<Vec<u64>>(),
            "topic sequence numbers are consecutive"
        );
    }
    // The delivered counter moves just after each write, so it may trail the last receive.
    let m = wait_metrics(&b, "1500 deliveries counted", |m| {
        m.get("starling_delivered_events_total") >= 1500.0
    })
    .await;
    assert_eq!(m.get("starling_published_messages_total"), 300.0);
    assert_eq!(m.get("starling_delivered_events_total"), 1500.0);
    assert_eq!(m.get("starling_subscriptions"), 5.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_lane_shard_policy_preserves_per_subscriber_order() {
    for shard in [
        LaneShard::Auto,
        LaneShard::SubscriberIdHash,
        LaneShard::ConnectionIdHash,
        LaneShard::RoundRobinPin,
    ] {
        let b = start(
            Profile::Balanced,
            ConfigOverrides {
                subscriber_writer_lanes: Some(4),
                subscriber_lane_shard: Some(shard),
                event_batch_max_events: Some(3),
                fanout_batch_size: Some(2),
                slow_subscriber_policy: Some(starling_config::SlowSubscriberPolicy::Block),
                ..ConfigOverrides::default()
            },
        )
        .await;
        let clients = [b.client().await, b.client().await];
        let mut subs = Vec::new();
        for i in 0..8 {
            subs.push(clients[i % 2].subscribe("lanes").await.expect("subscribe"));
        }
        let publisher = b.client().await;
        for chunk in 0..50u32 {
            let batch: Vec<Bytes> = (chunk * 10..chunk * 10 + 10).map(payload).collect();
            publisher
                .publish_batch("lanes", batch, false)
                .await
                .expect("publish");
        }
        for sub in &mut subs {
            let idx: Vec<u32> = recv_n(sub, 500)
                .await
                .iter()
                .map(|(_, p)| index(p))
                .collect();
            assert_eq!(
                idx,
                (0..500).collect::<Vec<_>>(),
                "order broken under {shard:?}"
            );
        }
        let m = b.metrics().await;
        let used_lanes = (0..4)
            .filter(|l| m.get(&format!("starling_lane_enqueued_total{{lane={l}}}")) > 0.0)
            .count();
        assert!(used_lanes >= 2, "{shard:?} used only {used_lanes} lane(s)");
        b.running.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_trigger_flushes_full_batches() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            event_batch_max_events: Some(4),
            event_batch_max_delay_us: Some(1_000_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("count").await.expect("subscribe");
    c.publish_batch("count", (0..8).map(payload).collect(), true)
        .await
        .expect("publish");
    recv_n(&mut sub, 8).await;
    // Both batches left on the count trigger; none waited for the 1 s delay. (The flush
    // counters say so whatever the machine's load, where a wall-clock bound would not.)
    let m = b.metrics().await;
    assert_eq!(m.get("starling_batch_flushes_total{trigger=events}"), 2.0);
    assert_eq!(m.get("starling_batch_flushes_total{trigger=delay}"), 0.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_trigger_flushes_before_the_limit_is_crossed() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            event_batch_max_events: Some(1000),
            event_batch_max_bytes: Some(1000),
            event_batch_max_delay_us: Some(1_000_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("bytes").await.expect("subscribe");
    let big: Vec<Bytes> = (0..4).map(|_| Bytes::from(vec![1u8; 600])).collect();
    c.publish_batch("bytes", big, true).await.expect("publish");
    // 600 + 600 > 1000: each event goes in its own batch; the last waits for the delay.
    recv_n(&mut sub, 3).await;
    let m = b.metrics().await;
    assert_eq!(m.get("starling_batch_flushes_total{trigger=bytes}"), 3.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_trigger_flushes_a_partial_batch_after_max_delay() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            event_batch_max_events: Some(1000),
            event_batch_max_delay_us: Some(150_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("delay").await.expect("subscribe");
    let t0 = Instant::now();
    c.publish("delay", payload(1)).await.expect("publish");
    recv_n(&mut sub, 1).await;
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(150),
        "flushed after {waited:?}, before max delay"
    );
    let m = b.metrics().await;
    assert_eq!(m.get("starling_batch_flushes_total{trigger=delay}"), 1.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ack_level_committed_acks_only_after_the_batch_is_enqueued() {
    let slow_batch = ConfigOverrides {
        event_batch_max_events: Some(1000),
        event_batch_max_delay_us: Some(1_000_000),
        ..ConfigOverrides::default()
    };
    // ack_level received: the ack means "accepted" and does not wait for the batch, which
    // here waits 1 s (the largest delay allowed): when the ack arrives, no batch has been
    // flushed yet.
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            ack_level: Some(starling_config::AckLevel::Received),
            ..slow_batch.clone()
        },
    )
    .await;
    let c = b.client().await;
    let _sub = c.subscribe("acks").await.expect("subscribe");
    let t0 = Instant::now();
    c.publish_acked("acks", payload(1)).await.expect("ack");
    let waited = t0.elapsed();
    let flushed = b.metrics().await.sum("starling_batch_flushes_total");
    assert!(
        flushed == 0.0,
        "receipt ack took {waited:?}; batches flushed before it: {flushed}"
    );
    b.running.shutdown().await;

    // ack_level committed: the ack waits for the 1 s batch delay, i.e. for the enqueue.
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            ack_level: Some(starling_config::AckLevel::Committed),
            ..slow_batch
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("acks").await.expect("subscribe");
    let t0 = Instant::now();
    c.publish_acked("acks", payload(2)).await.expect("ack");
    assert!(
        t0.elapsed() >= Duration::from_millis(1000),
        "commit ack came after {:?}",
        t0.elapsed()
    );
    let got = recv_n(&mut sub, 1).await;
    assert_eq!(index(&got[0].1), 2);
    let m = b.metrics().await;
    assert_eq!(m.get("starling_publish_acks_total"), 1.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_values_and_overrides_reach_the_running_broker() {
    let b = start(
        Profile::Latency,
        ConfigOverrides {
            fanout_batch_size: Some(3),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let (status, yaml) = b.http_get("/config").await;
    assert_eq!(status, 200);
    let file = starling_config::ConfigFile::from_yaml(&yaml, "/config").expect("parses");
    let cfg = starling_config::Sources {
        file: file.into(),
        ..Default::default()
    }
    .resolve()
    .expect("valid");
    assert_eq!(cfg.profile, Profile::Latency);
    assert_eq!(cfg.event_batch_max_delay_us, 100, "profile value");
    assert_eq!(cfg.fanout_batch_size, 3, "override beats profile");
    assert_eq!(cfg.ack_level, starling_config::AckLevel::Committed);
    b.running.shutdown().await;
}
