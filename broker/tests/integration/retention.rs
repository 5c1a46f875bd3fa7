//! The retained tail for resuming subscribers: bounded by `replay_window_ms` even when the
//! topic goes quiet with its subscribers still attached, and by `replay_max_total_bytes` over
//! all topics.

use starling_config::{ConfigOverrides, Profile};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_topic_lets_its_retained_tail_expire() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            replay_window_ms: Some(3_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("quiet").await.expect("subscribe");
    for i in 0..5 {
        c.publish_acked("quiet", payload(i)).await.expect("publish");
    }
    recv_n(&mut sub, 5).await;
    // Retained once delivered ...
    let held = b.metrics().await.get("starling_retained_bytes");
    assert!(held > 0.0, "nothing retained after delivery");
    // ... and gone once the window has passed, with no publish to evict it and the
    // subscription still open (the topic task stays).
    wait_metrics(&b, "the retained tail expired", |m| {
        m.get("starling_retained_bytes") == 0.0
    })
    .await;
    assert_eq!(b.metrics().await.get("starling_subscriptions"), 1.0);
    // The topic still works and retains again.
    c.publish_acked("quiet", payload(5)).await.expect("publish");
    recv_n(&mut sub, 1).await;
    wait_metrics(&b, "retained again", |m| {
        m.get("starling_retained_bytes") > 0.0
    })
    .await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_topics_together_stay_under_the_broker_wide_cap() {
    const CAP: f64 = 8192.0;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            replay_max_total_bytes: Some(8192),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let topics = ["t0", "t1", "t2", "t3"];
    let mut subs = Vec::new();
    for t in topics {
        subs.push(c.subscribe(t).await.expect("subscribe"));
    }
    // 4 topics × 10 messages of 1 KiB: about 40 KiB fanned out, five times the cap.
    for i in 0..10u32 {
        for t in topics {
            let mut body = vec![0u8; 1024];
            body[..4].copy_from_slice(&i.to_be_bytes());
            c.publish_acked(t, bytes::Bytes::from(body))
                .await
                .expect("publish");
        }
    }
    for sub in &mut subs {
        recv_n(sub, 10).await;
    }
    // Every message was delivered whatever was evicted from the tails (the counter moves just
    // after the write, so wait for it), and the newest batches are retained.
    let m = wait_metrics(&b, "all delivered, the last batches retained", |m| {
        m.get("starling_delivered_events_total") == 40.0 && m.get("starling_retained_bytes") > 0.0
    })
    .await;
    let held = m.get("starling_retained_bytes");
    assert!(held <= CAP, "retained {held} bytes, cap {CAP}");
    b.running.shutdown().await;
}
