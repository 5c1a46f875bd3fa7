//! Wildcard subscriptions over real QUIC: a pattern subscription receives every matching
//! topic's messages (topics that existed before it and topics created after), each with its
//! topic, and nothing else; `max_wildcard_subscriptions_per_connection`; live only; a client
//! that was not granted `WILDCARDS` keeps the old meaning (the pattern is a topic name).
//! Permissions: `auth.rs`; across a cluster: `tests/cluster/patterns.rs`.

use std::collections::BTreeMap;

use starling_client::Subscription;
use starling_config::{ConfigOverrides, Profile};
use starling_proto::{ErrorCode, Frame, StartAt, Subscribe, write_frame};

use crate::common::*;

/// Receives `n` events, as (topic, payload text), failing the test on error or timeout.
async fn recv_topics(sub: &mut Subscription, n: usize) -> Vec<(String, String)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(ev))) => out.push((
                ev.topic.to_string(),
                String::from_utf8_lossy(&ev.payload).into_owned(),
            )),
            Ok(Some(Err(e))) => panic!("subscription error after {} events: {e}", out.len()),
            Ok(None) => panic!("subscription ended after {} of {n} events", out.len()),
            Err(_) => panic!("timed out after {} of {n} events: {out:?}", out.len()),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_receives_every_matching_topic_old_and_new_and_nothing_else() {
    let b = start_default().await;
    let c = b.client().await;
    // `orders.eu` exists before the wildcard subscription (it has a subscriber).
    let mut plain = c.subscribe("orders.eu").await.expect("plain subscribe");
    let mut one = c.subscribe("orders.*").await.expect("subscribe orders.*");
    let mut tail = c.subscribe("orders.>").await.expect("subscribe orders.>");
    for (topic, msg) in [
        ("orders.eu", "eu-1"),
        ("orders.us", "us-1"), // created after the wildcard subscriptions
        ("orders.eu.west", "west-1"),
        ("billing.eu", "not-matched"),
        ("orders", "not-matched-either"),
        ("orders.eu", "eu-2"),
    ] {
        c.publish_acked(topic, msg).await.expect("publish");
    }
    // Per topic in publish order. Different topics interleave in no promised order
    // (docs/subjects.md): each topic is its own task, and an ack at the default `received`
    // level does not wait for the fan-out, so `us-1` may overtake `eu-1` (seen under load).
    let got = recv_topics(&mut one, 3).await;
    let mut by_topic: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (t, m) in got {
        by_topic.entry(t).or_default().push(m);
    }
    assert_eq!(by_topic["orders.eu"], ["eu-1", "eu-2"]);
    assert_eq!(by_topic["orders.us"], ["us-1"]);
    assert_eq!(by_topic.len(), 2);
    let got = recv_topics(&mut tail, 4).await;
    let mut by_topic: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (t, m) in got {
        by_topic.entry(t).or_default().push(m);
    }
    assert_eq!(by_topic["orders.eu"], ["eu-1", "eu-2"]);
    assert_eq!(by_topic["orders.us"], ["us-1"]);
    assert_eq!(by_topic["orders.eu.west"], ["west-1"]);
    assert_eq!(by_topic.len(), 3);
    // The plain subscription is unchanged and its events name its topic.
    let ev = tokio::time::timeout(SOON, plain.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(&*ev.topic, "orders.eu");
    assert_eq!(&ev.payload[..], b"eu-1");
    assert_eq!(
        one.resume_point(),
        None,
        "a wildcard subscription is live only"
    );

    // Nothing else arrived: a marker published last is the next event.
    c.publish_acked("orders.zz", "marker")
        .await
        .expect("marker");
    assert_eq!(
        recv_topics(&mut one, 1).await,
        [("orders.zz".to_string(), "marker".to_string())]
    );
    let m = b.metrics().await;
    assert_eq!(m.get("starling_wildcard_subscriptions"), 2.0);
    assert_eq!(m.get("starling_subscriptions"), 3.0);

    // After the unsubscribe, new matching topics no longer hold it.
    one.unsubscribe().await;
    tail.unsubscribe().await;
    wait_metrics(&b, "wildcards gone", |m| {
        m.get("starling_wildcard_subscriptions") == 0.0
    })
    .await;
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcards_past_the_per_connection_budget_are_refused_and_counted() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_wildcard_subscriptions_per_connection: Some(2),
            ..base_overrides()
        },
    )
    .await;
    let conn = b.wildcard_ready().await;
    async fn subscribe(
        conn: &quinn::Connection,
        topic: &str,
        start: StartAt,
    ) -> (Option<Frame>, quinn::SendStream, quinn::RecvStream) {
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        let req = Frame::Subscribe(Subscribe {
            group: None,
            request_id: 1,
            topic: topic.into(),
            start,
        });
        write_frame(&mut send, &req).await.expect("subscribe");
        (read_one(&mut recv).await, send, recv)
    }
    let code = |f: &Option<Frame>| match f {
        Some(Frame::Error(e)) => Some(e.code),
        _ => None,
    };
    let mut held = Vec::new();
    for p in ["a.*", "b.>"] {
        let (answer, send, recv) = subscribe(&conn, p, StartAt::Live).await;
        assert!(
            matches!(answer, Some(Frame::SubscribeOk(_))),
            "{p}: {answer:?}"
        );
        held.push((send, recv));
    }
    let (third, _, _) = subscribe(&conn, "c.*", StartAt::Live).await;
    assert_eq!(code(&third), Some(ErrorCode::LimitExceeded), "{third:?}");
    // Subscriptions to one topic are not wildcards: still admitted.
    let (plain, _s, _r) = subscribe(&conn, "c.one", StartAt::Live).await;
    assert!(matches!(plain, Some(Frame::SubscribeOk(_))), "{plain:?}");
    // Live only, and a pattern must parse.
    let resume = StartAt::Position(starling_proto::Position { stream: 1, seq: 0 });
    let (resumed, _, _) = subscribe(&conn, "d.*", resume).await;
    assert_eq!(
        code(&resumed),
        Some(ErrorCode::InvalidRequest),
        "{resumed:?}"
    );
    let (bad, _, _) = subscribe(&conn, "d..*", StartAt::Live).await;
    assert_eq!(code(&bad), Some(ErrorCode::InvalidRequest), "{bad:?}");
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_wildcard_subscriptions_per_connection}"),
        1.0
    );
    assert_eq!(m.get("starling_wildcard_subscriptions"), 2.0);
    // Another connection has its own budget.
    let other = b.wildcard_ready().await;
    let (answer, _s2, _r2) = subscribe(&other, "c.*", StartAt::Live).await;
    assert!(matches!(answer, Some(Frame::SubscribeOk(_))), "{answer:?}");
    drop(held);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_feature_a_pattern_is_a_topic_name_as_before() {
    let b = start_default().await;
    // `raw_ready` asks for no features: an old client.
    let old = b.raw_ready(None).await;
    let (mut send, mut recv) = old.open_bi().await.expect("stream");
    let req = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: "orders.*".into(),
        start: StartAt::Live,
    });
    write_frame(&mut send, &req).await.expect("subscribe");
    assert!(matches!(
        read_one(&mut recv).await,
        Some(Frame::SubscribeOk(_))
    ));
    let c = b.client().await;
    c.publish_acked("orders.eu", "other topic")
        .await
        .expect("publish");
    c.publish_acked("orders.*", "literal")
        .await
        .expect("publish");
    // The old client gets the literal topic's batch only, with no `BatchTopic` before it.
    match read_one(&mut recv).await {
        Some(Frame::EventBatch(batch)) => assert_eq!(batch.events, ["literal"]),
        other => panic!("expected the literal topic's EventBatch, got {other:?}"),
    }
    c.close().await;
    b.running.shutdown().await;
}
