//! The retained tail for resuming subscribers: bounded by `replay_window_ms` even when the
//! topic goes quiet with its subscribers still attached.

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
