//! The retained tail for resuming subscribers: bounded by `replay_window_ms` even when the
//! topic goes quiet with its subscribers still attached, and by `replay_max_total_bytes` over
//! all topics; and shared, not copied, by however many subscribers resume from it.

use std::time::{Duration, Instant};

use starling_config::{ConfigOverrides, Profile};
use starling_proto::{Frame, Position, StartAt, Subscribe, write_frame};
use starling_testkit::payload::padded;

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
            c.publish_acked(t, padded(i, 1024)).await.expect("publish");
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

/// A raw subscription resuming at the oldest possible position, over a 16 KiB stream window,
/// that never reads: whatever the broker queues for it stays queued.
async fn stalled_resumer(
    b: &TestBroker,
    topic: &str,
) -> (quinn::Connection, quinn::SendStream, quinn::RecvStream) {
    let conn = b.raw_ready(Some(16 * 1024)).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let sub = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: topic.into(),
        start: StartAt::Position(Position { stream: 1, seq: 0 }),
    });
    write_frame(&mut send, &sub).await.expect("subscribe");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));
    (conn, send, recv)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_resuming_subscribers_share_the_retained_tail() {
    const RESUMERS: usize = 60;
    const BATCHES: u32 = 224;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            replay_max_bytes: Some(16 << 20),
            event_batch_max_events: Some(1),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    // About 14 MiB retained: 224 batches of one 64 KiB event.
    for i in 0..BATCHES {
        c.publish_acked("tail", padded(i, 64 * 1024))
            .await
            .expect("publish");
    }
    let retained = wait_metrics(&b, "the tail is retained", |m| {
        m.get("starling_retained_bytes") >= f64::from(BATCHES * 64 * 1024)
    })
    .await
    .get("starling_retained_bytes");
    let mut bystander = c.subscribe("bystander").await.expect("subscribe");
    let rss_before = rss_bytes();

    // Every resumer gets the whole tail queued, and reads none of it.
    let mut held = Vec::new();
    let mut worst = Duration::ZERO;
    for i in 0..RESUMERS {
        held.push(stalled_resumer(&b, "tail").await);
        let t0 = Instant::now();
        c.publish_acked("bystander", payload(i as u32))
            .await
            .expect("bystander publish");
        assert_eq!(index(&recv_n(&mut bystander, 1).await[0].1), i as u32);
        worst = worst.max(t0.elapsed());
    }
    let m = wait_metrics(&b, "every replay queued", |m| {
        m.get("starling_replayed_events_total") >= f64::from(BATCHES) * RESUMERS as f64
    })
    .await;
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    // A copy per replay would be RESUMERS × the tail, over 800 MiB; shared, the growth is the
    // queues' bookkeeping. The bound is a third of the copies because the
    // RSS is the test process's: the binary's other tests run beside this one in it (141 MiB
    // was seen once that way, against a bound of 128 MiB before 2026-11-28).
    let copies = RESUMERS as u64 * retained as u64;
    assert!(
        rss_growth < copies / 3,
        "RSS grew by {} MiB for {RESUMERS} replays of a {} MiB tail",
        rss_growth >> 20,
        (retained as u64) >> 20
    );
    // The tail is held once (the bystander's topic retains its few small batches besides).
    let now_retained = m.get("starling_retained_bytes");
    assert!(
        now_retained >= retained && now_retained < retained + 65536.0,
        "retained {now_retained} bytes, the tail alone is {retained}"
    );
    assert!(
        worst < Duration::from_secs(1),
        "bystander round trip reached {worst:?}"
    );
    eprintln!(
        "replay amplification: {RESUMERS} resumers of a {} MiB tail, RSS growth {} MiB, \
         bystander worst round trip {worst:?}",
        (retained as u64) >> 20,
        rss_growth >> 20
    );
    drop(held);
    b.running.shutdown().await;
}
