//! Broker-wide budgets over real QUIC: `max_topics` and `max_subscriptions`, where a request
//! past the budget is refused with `LimitExceeded` and counted while what exists keeps being
//! served (a flood of new topic names neither grows the broker past its budget nor slows a
//! bystander); and `max_inflight_publish_bytes`, where a publisher past the budget is slowed,
//! not refused, and nothing is lost.

use std::time::{Duration, Instant};

use starling_client::ClientError;
use starling_config::{ConfigOverrides, Profile};
use starling_proto::{ErrorCode, Frame, StartAt, Subscribe, write_frame};
use starling_testkit::payload::padded;

use crate::common::*;

fn limit_exceeded<T>(r: &Result<T, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Server {
            code: ErrorCode::LimitExceeded,
            ..
        })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_topic_past_max_topics_is_refused_and_existing_ones_are_served() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_topics: Some(4),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut sub = c.subscribe("t0").await.expect("subscribe t0");
    for t in ["t1", "t2", "t3"] {
        c.publish_acked(t, payload(0))
            .await
            .expect("publish within the budget");
    }
    let publish = c.publish_acked("t4", payload(0)).await;
    assert!(
        limit_exceeded(&publish),
        "fifth topic by publish: {publish:?}"
    );
    let subscribe = c.subscribe("t5").await;
    assert!(limit_exceeded(&subscribe), "by subscribe");
    // The topics that exist are untouched.
    c.publish_acked("t0", payload(7))
        .await
        .expect("publish to t0");
    assert_eq!(index(&recv_n(&mut sub, 1).await[0].1), 7);
    let mut again = c
        .subscribe("t3")
        .await
        .expect("subscribe to an existing topic");
    c.publish_acked("t3", payload(8))
        .await
        .expect("publish to t3");
    assert_eq!(index(&recv_n(&mut again, 1).await[0].1), 8);
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_topics}"),
        2.0
    );
    assert_eq!(m.get("starling_topics"), 4.0);
    assert_eq!(
        m.get("starling_protocol_errors_total{code=limit_exceeded}"),
        2.0
    );
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_past_max_subscriptions_is_refused_until_one_ends() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_subscriptions: Some(3),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut subs = Vec::new();
    for i in 0..3 {
        subs.push(
            c.subscribe(&format!("s{i}"))
                .await
                .expect("within the budget"),
        );
    }
    let fourth = c.subscribe("s3").await;
    assert!(limit_exceeded(&fourth), "fourth subscription");
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_subscriptions}"),
        1.0
    );
    assert_eq!(m.get("starling_subscriptions"), 3.0);
    // Ending one frees its place once the broker has let it go.
    drop(subs.pop());
    let deadline = Instant::now() + SOON;
    let mut s = loop {
        match c.subscribe("s3").await {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                assert!(limit_exceeded(&Err::<(), _>(e)));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("no place freed after an unsubscribe: {e}"),
        }
    };
    c.publish_acked("s3", payload(3)).await.expect("publish");
    assert_eq!(index(&recv_n(&mut s, 1).await[0].1), 3);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_past_max_subscriptions_per_connection_is_refused_on_that_connection_only() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_subscriptions_per_connection: Some(2),
            ..ConfigOverrides::default()
        },
    )
    .await;
    // One stream per subscription on one connection; the answer to each Subscribe.
    async fn subscribe(
        conn: &quinn::Connection,
        topic: &str,
    ) -> (Option<Frame>, quinn::SendStream, quinn::RecvStream) {
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        let req = Frame::Subscribe(Subscribe {
            group: None,
            request_id: 1,
            topic: topic.into(),
            start: StartAt::Live,
        });
        write_frame(&mut send, &req).await.expect("subscribe");
        (read_one(&mut recv).await, send, recv)
    }
    let ok = |f: &Option<Frame>| matches!(f, Some(Frame::SubscribeOk(_)));
    let greedy = b.raw_ready(None).await;
    let mut held = Vec::new();
    for i in 0..2 {
        let (answer, send, recv) = subscribe(&greedy, &format!("p{i}")).await;
        assert!(ok(&answer), "within the budget: {answer:?}");
        held.push((send, recv));
    }
    let (third, _, _) = subscribe(&greedy, "p2").await;
    assert!(
        matches!(&third, Some(Frame::Error(e)) if e.code == ErrorCode::LimitExceeded),
        "third subscription on one connection: {third:?}"
    );
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_subscriptions_per_connection}"),
        1.0
    );
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_subscriptions}"),
        0.0
    );
    assert_eq!(m.get("starling_subscriptions"), 2.0);

    // Another connection has its own budget.
    let other = b.raw_ready(None).await;
    let (answer, _s, _r) = subscribe(&other, "p2").await;
    assert!(ok(&answer), "another connection: {answer:?}");

    // Ending one frees its place on that connection once the broker has let it go.
    let (mut send, _recv) = held.pop().expect("two held");
    send.finish().expect("finish");
    let deadline = Instant::now() + SOON;
    loop {
        let (answer, send, recv) = subscribe(&greedy, "p3").await;
        if ok(&answer) {
            held.push((send, recv));
            break;
        }
        assert!(Instant::now() < deadline, "no place freed: {answer:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_flood_stops_at_max_topics_while_a_bystander_keeps_its_latency() {
    const NAMES: u32 = 20_000;
    const CAP: u32 = 2_000;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_topics: Some(CAP),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let mut bystander = Bystander::start(&b).await;
    let rss_before = rss_bytes();

    // A hostile client invents a new topic name for every publish, without acks, as fast as it
    // can.
    let flooder = b.client().await;
    let flood = tokio::spawn(async move {
        for i in 0..NAMES {
            flooder
                .publish(&format!("flood.{i}"), payload(i))
                .await
                .expect("a fire-and-forget publish is sent");
        }
        flooder
    });
    let i = bystander.until_finished(&flood).await;
    let worst = bystander.worst;
    let _flooder = flood.await.expect("flood task");
    // Every publish past the budget is counted once it has been read.
    let refused = f64::from(NAMES - (CAP - 1));
    let m = wait_metrics(&b, "every flood publish handled", |m| {
        m.get("starling_limit_refusals_total{limit=max_topics}") >= refused
    })
    .await;
    let rss_growth = rss_bytes().saturating_sub(rss_before);
    assert_eq!(m.get("starling_topics"), f64::from(CAP));
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_topics}"),
        refused
    );
    assert!(
        worst < Duration::from_secs(1),
        "bystander round trip reached {worst:?} during the flood"
    );
    assert!(
        rss_growth < 128 << 20,
        "RSS grew by {} MiB for {CAP} topics",
        rss_growth >> 20
    );
    eprintln!(
        "topic flood: {NAMES} new names, {CAP} topics admitted, {refused} refused, bystander \
         worst round trip {worst:?} over {i} publishes, RSS growth {} MiB ({} KiB per topic)",
        rss_growth >> 20,
        (rss_growth >> 10) / u64::from(CAP)
    );
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publish_bytes_in_flight_stay_under_the_budget_and_nothing_is_lost() {
    const BUDGET: u64 = 64 * 1024;
    const MESSAGES: u32 = 120;
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_inflight_publish_bytes: Some(BUDGET),
            pub_queue_depth: Some(64),
            subscriber_queue_capacity: Some(4),
            event_batch_max_events: Some(1),
            slow_subscriber_policy: Some(starling_config::SlowSubscriberPolicy::Block),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let mut healthy = c.subscribe("held").await.expect("subscribe");
    // A subscriber that never reads: under `block` the topic waits for it, so publishes back up.
    let stalled = b.raw_ready(Some(16 * 1024)).await;
    let (mut send, mut recv) = stalled.open_bi().await.expect("stream");
    let sub = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: "held".into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &sub).await.expect("subscribe");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));

    let publisher = b.client().await;
    let flood = tokio::spawn(async move {
        for i in 0..MESSAGES {
            publisher
                .publish("held", padded(i, 16 * 1024))
                .await
                .expect("publish");
        }
        publisher
    });
    // While the topic is held, the bytes in flight never pass the budget, and the publisher
    // is made to wait.
    let mut highest = 0.0f64;
    let deadline = Instant::now() + SOON;
    let m = loop {
        assert!(
            Instant::now() < deadline,
            "the publisher never had to wait for the budget"
        );
        let m = b.metrics().await;
        highest = highest.max(m.get("starling_publish_inflight_bytes"));
        if m.get("starling_publish_budget_waits_total") > 0.0
            && m.get("starling_publish_inflight_bytes") > 0.0
        {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    assert!(
        m.get("starling_publish_inflight_bytes") <= BUDGET as f64 && highest <= BUDGET as f64,
        "in flight {} (highest seen {highest}) past the budget {BUDGET}",
        m.get("starling_publish_inflight_bytes")
    );
    // The stuck subscriber goes; everything flows to the healthy one, in order, none lost.
    drop((send, recv));
    stalled.close(0u32.into(), b"gone");
    let got = recv_n(&mut healthy, MESSAGES as usize).await;
    let order: Vec<u32> = got.iter().map(|(_, p)| index(p)).collect();
    assert_eq!(order, (0..MESSAGES).collect::<Vec<_>>());
    let _publisher = flood.await.expect("publisher");
    wait_metrics(&b, "the budget is all released", |m| {
        m.get("starling_publish_inflight_bytes") == 0.0
    })
    .await;
    b.running.shutdown().await;
}
