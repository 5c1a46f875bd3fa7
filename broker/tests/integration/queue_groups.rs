//! Queue groups over real QUIC: one publisher, four group members and one plain subscriber:
//! each message reaches exactly one member and every one reaches the plain subscriber; a
//! member that stops reading gets fewer than its share while the others take the rest; a
//! member leaving mid-stream leaves the rest to the others, with no message to two members;
//! `max_group_members` and `max_groups_per_subject` refuse with `LimitExceeded` and count;
//! a group is live only, needs `QUEUE_GROUPS`, and a clustered broker refuses it.

use std::collections::HashSet;
use std::time::Duration;

use starling_client::{ClientError, Subscription};
use starling_config::{ConfigOverrides, Profile};
use starling_placement::Kind;
use starling_proto::{ErrorCode, Frame, PROTOCOL_VERSION, StartAt, Subscribe, write_frame};
use starling_testkit::cluster::{TestCluster, key_owned_by};

use crate::common::*;
use starling_testkit::payload::padded;

/// Takes every event that arrives within `quiet` of the previous one.
async fn drain_ids(sub: &mut Subscription, quiet: Duration) -> Vec<u32> {
    let mut out = Vec::new();
    loop {
        match tokio::time::timeout(quiet, sub.next_event()).await {
            Ok(Some(Ok(ev))) => out.push(index(&ev.payload)),
            Ok(Some(Err(e))) => panic!("subscription error after {} events: {e}", out.len()),
            Ok(None) | Err(_) => return out,
        }
    }
}

/// Reads until the members together have `n` events (failing after [`SOON`] without one).
async fn collect(members: &mut [Subscription], n: usize) -> Vec<Vec<u32>> {
    let mut got: Vec<Vec<u32>> = vec![Vec::new(); members.len()];
    let deadline = tokio::time::Instant::now() + SOON;
    while got.iter().map(Vec::len).sum::<usize>() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out with {:?} of {n}",
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
        for (i, m) in members.iter_mut().enumerate() {
            got[i].extend(drain_ids(m, Duration::from_millis(20)).await);
        }
    }
    got
}

/// Asserts no id is in two lists (nor twice in one) and returns them all.
fn disjoint(lists: &[Vec<u32>]) -> HashSet<u32> {
    let mut seen = HashSet::new();
    for list in lists {
        for &id in list {
            assert!(seen.insert(id), "message {id} delivered twice");
        }
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_members_share_the_messages_and_a_plain_subscriber_gets_them_all() {
    let b = start_default().await;
    let publisher = b.client().await;
    let watcher = b.client().await;
    let mut plain = watcher.subscribe("jobs").await.expect("plain subscribe");
    let mut workers = Vec::new();
    let mut members = Vec::new();
    for _ in 0..4 {
        let c = b.client().await;
        members.push(c.subscribe_group("jobs", "workers").await.expect("join"));
        workers.push(c);
    }
    let m = b.metrics().await;
    assert_eq!(m.get("starling_queue_group_members"), 4.0);
    assert_eq!(m.get("starling_queue_groups"), 1.0);
    const N: u32 = 400;
    for i in 0..N {
        publisher
            .publish_acked("jobs", payload(i))
            .await
            .expect("publish");
    }
    let all: Vec<u32> = recv_n(&mut plain, N as usize)
        .await
        .iter()
        .map(|(_, p)| index(p))
        .collect();
    assert_eq!(
        all,
        (0..N).collect::<Vec<_>>(),
        "the plain subscriber gets everything"
    );
    let got = collect(&mut members, N as usize).await;
    let seen = disjoint(&got);
    assert_eq!(seen.len(), N as usize, "each message to exactly one member");
    for (i, g) in got.iter().enumerate() {
        assert!(g.windows(2).all(|w| w[0] < w[1]), "member {i} in order");
        assert!(
            !g.is_empty(),
            "member {i} got nothing: {:?}",
            got.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
    let m = b.metrics().await;
    assert_eq!(m.get("starling_queue_group_events_total"), f64::from(N));
    for c in workers {
        c.close().await;
    }
    wait_metrics(&b, "members gone", |m| {
        m.get("starling_queue_group_members") == 0.0 && m.get("starling_queue_groups") == 0.0
    })
    .await;
    publisher.close().await;
    watcher.close().await;
    b.running.shutdown().await;
}

/// A raw connection granted `QUEUE_GROUPS`, with a small stream window (a reader that stops
/// reading fills it fast).
async fn group_ready(b: &TestBroker, stream_window: Option<u32>) -> quinn::Connection {
    let conn = b.raw(stream_window).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let mut hello = hello(PROTOCOL_VERSION, PROTOCOL_VERSION);
    if let Frame::Hello(h) = &mut hello {
        h.features = starling_proto::features::QUEUE_GROUPS;
    }
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(ok)) => {
            assert_ne!(ok.features & starling_proto::features::QUEUE_GROUPS, 0);
        }
        other => panic!("expected HelloOk, got {other:?}"),
    }
    conn
}

/// Sends a `Subscribe` on a new stream and returns the first answer with the stream.
async fn raw_subscribe(
    conn: &quinn::Connection,
    topic: &str,
    group: Option<&str>,
    start: StartAt,
) -> (Option<Frame>, quinn::SendStream, quinn::RecvStream) {
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let req = Frame::Subscribe(Subscribe {
        request_id: 1,
        topic: topic.into(),
        start,
        group: group.map(str::to_string),
    });
    write_frame(&mut send, &req).await.expect("subscribe");
    (read_one(&mut recv).await, send, recv)
}

fn code(f: &Option<Frame>) -> Option<ErrorCode> {
    match f {
        Some(Frame::Error(e)) => Some(e.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_stops_reading_gets_fewer_and_a_leaving_member_hands_over() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            subscriber_queue_capacity: Some(8),
            // One message per batch: the slow member's hold is counted in batches (its queue
            // and its writer's turn), so this makes it a count of messages the test can bound.
            event_batch_max_events: Some(1),
            fanout_batch_size: Some(8),
            ..base_overrides()
        },
    )
    .await;
    let publisher = b.client().await;
    // The slow member: a raw connection that never reads past its `SubscribeOk`.
    let slow_conn = group_ready(&b, Some(4096)).await;
    let (ok, _slow_send, _slow_recv) =
        raw_subscribe(&slow_conn, "jobs", Some("workers"), StartAt::Live).await;
    assert!(matches!(ok, Some(Frame::SubscribeOk(_))), "{ok:?}");
    let c = b.client().await;
    let mut members = Vec::new();
    for _ in 0..3 {
        members.push(c.subscribe_group("jobs", "workers").await.expect("join"));
    }
    const N: u32 = 400;
    let body = |i: u32| padded(i, 1024);
    for i in 0..N {
        publisher
            .publish_acked("jobs", body(i))
            .await
            .expect("publish");
    }
    // The readers get all but what the slow member holds: its stream window (4 KiB, a few
    // messages), its queue (8 batches) and the batches its writer took (at most 8), each
    // batch one message.
    let got = collect(&mut members, N as usize - 30).await;
    let mut rest: Vec<Vec<u32>> = got;
    for (i, m) in members.iter_mut().enumerate() {
        rest[i].extend(drain_ids(m, Duration::from_millis(200)).await);
    }
    let seen = disjoint(&rest);
    let slow_share = N as usize - seen.len();
    assert!(
        slow_share <= 30,
        "the slow member held {slow_share} of {N}; a fair share is {}",
        N / 4
    );
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_queue_group_dropped_events_total"),
        0.0,
        "nothing dropped"
    );

    // One reader leaves mid-stream: what follows goes to the other two, once each.
    let leaver = members.pop().expect("a member");
    leaver.unsubscribe().await;
    wait_metrics(&b, "the leaver is gone", |m| {
        m.get("starling_queue_group_members") == 3.0
    })
    .await;
    for i in N..N + 200 {
        publisher
            .publish_acked("jobs", body(i))
            .await
            .expect("publish");
    }
    let after = collect(&mut members, 200 - 20).await;
    let mut after = after;
    for (i, m) in members.iter_mut().enumerate() {
        after[i].extend(drain_ids(m, Duration::from_millis(200)).await);
    }
    let later = disjoint(&after);
    assert!(
        later.iter().all(|&id| id >= N),
        "nothing from before the leave again"
    );
    assert!(
        later.len() >= 200 - 20,
        "the two readers took {} of 200 while the slow member holds its share",
        later.len()
    );
    c.close().await;
    publisher.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_budgets_features_and_starts_are_enforced() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_group_members: Some(2),
            max_groups_per_subject: Some(1),
            ..base_overrides()
        },
    )
    .await;
    let conn = group_ready(&b, None).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let (ok, s, r) = raw_subscribe(&conn, "jobs", Some("a"), StartAt::Live).await;
        assert!(matches!(ok, Some(Frame::SubscribeOk(_))), "{ok:?}");
        held.push((s, r));
    }
    let (third, _, _) = raw_subscribe(&conn, "jobs", Some("a"), StartAt::Live).await;
    assert_eq!(code(&third), Some(ErrorCode::LimitExceeded), "{third:?}");
    let (other_group, _, _) = raw_subscribe(&conn, "jobs", Some("b"), StartAt::Live).await;
    assert_eq!(
        code(&other_group),
        Some(ErrorCode::LimitExceeded),
        "{other_group:?}"
    );
    // Another subject has budgets of its own; a plain subscription is not a member.
    let (other_subject, _s1, _r1) = raw_subscribe(&conn, "mail", Some("b"), StartAt::Live).await;
    assert!(
        matches!(other_subject, Some(Frame::SubscribeOk(_))),
        "{other_subject:?}"
    );
    let (plain, _s2, _r2) = raw_subscribe(&conn, "jobs", None, StartAt::Live).await;
    assert!(matches!(plain, Some(Frame::SubscribeOk(_))), "{plain:?}");
    // Live only.
    let resume = StartAt::Position(starling_proto::Position { stream: 1, seq: 0 });
    let (resumed, _, _) = raw_subscribe(&conn, "mail", Some("b"), resume).await;
    assert_eq!(
        code(&resumed),
        Some(ErrorCode::InvalidRequest),
        "{resumed:?}"
    );
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_group_members}"),
        1.0
    );
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_groups_per_subject}"),
        1.0
    );
    assert_eq!(m.get("starling_queue_group_members"), 3.0);
    // A connection not granted `QUEUE_GROUPS` cannot send a group.
    let old = b.raw_ready(None).await;
    let (refused, _, _) = raw_subscribe(&old, "mail", Some("b"), StartAt::Live).await;
    assert_eq!(
        code(&refused),
        Some(ErrorCode::InvalidRequest),
        "{refused:?}"
    );
    // A member leaving makes room again.
    drop(held);
    wait_metrics(&b, "two members left", |m| {
        m.get("starling_queue_group_members") == 1.0
    })
    .await;
    let (again, _s3, _r3) = raw_subscribe(&conn, "jobs", Some("b"), StartAt::Live).await;
    assert!(matches!(again, Some(Frame::SubscribeOk(_))), "{again:?}");
    // The SDK checks a name before sending it.
    let c = b.client().await;
    assert!(matches!(
        c.subscribe_group("jobs", "no spaces").await,
        Err(ClientError::InvalidGroup(_))
    ));
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_group_gets_each_message_of_every_matching_topic_once() {
    let b = start_default().await;
    let publisher = b.client().await;
    let c = b.client().await;
    let mut members = vec![
        c.subscribe_group("orders.>", "billing")
            .await
            .expect("join"),
        c.subscribe_group("orders.>", "billing")
            .await
            .expect("join"),
    ];
    for i in 0..100u32 {
        let topic = if i % 2 == 0 {
            "orders.eu"
        } else {
            "orders.us.west"
        };
        publisher
            .publish_acked(topic, payload(i))
            .await
            .expect("publish");
    }
    publisher
        .publish_acked("billing", payload(1000))
        .await
        .expect("publish");
    let got = collect(&mut members, 100).await;
    let seen = disjoint(&got);
    assert_eq!(seen, (0..100).collect::<HashSet<_>>());
    c.close().await;
    publisher.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clustered_broker_serves_the_groups_of_its_own_topics_and_feeds_the_others() {
    let cluster = TestCluster::start("groups", &["b0", "b1"]).await;
    let members = ["b0", "b1"];
    let mine = key_owned_by("jobs", Kind::Topic, &members, "b0");
    let theirs = key_owned_by("jobs", Kind::Topic, &members, "b1");
    let c = cluster.plain_client("b0").await;
    // Another member's topic: joined at its owner through b0's feed, and served from there.
    let mut fed = c.subscribe_group(&theirs, "workers").await.expect("join");
    assert_eq!(
        cluster
            .metric("b1", "starling_queue_group_members", "")
            .await,
        1.0
    );
    c.publish_acked(&theirs, payload(3)).await.expect("publish");
    let event = tokio::time::timeout(Duration::from_secs(10), fed.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(index(&event.payload), 3);
    // A second member at b0, on its own connection, and a plain subscriber there, which makes
    // b0 relay the topic: the relay must not serve b0's members a second copy (only the owner
    // serves a group), so each event reaches one of them, once.
    let c2 = cluster.plain_client("b0").await;
    let mut fed_members = vec![
        fed,
        c2.subscribe_group(&theirs, "workers").await.expect("join"),
    ];
    let mut plain = c2.subscribe(&theirs).await.expect("subscribe");
    for i in 100..140 {
        c.publish_acked(&theirs, payload(i)).await.expect("publish");
    }
    let got = collect(&mut fed_members, 40).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    for m in &mut fed_members {
        if let Ok(Some(Ok(e))) =
            tokio::time::timeout(Duration::from_millis(50), m.next_event()).await
        {
            panic!("an extra event {} after {got:?}", index(&e.payload));
        }
    }
    assert_eq!(disjoint(&got), (100..140).collect::<HashSet<_>>());
    for i in 100..140 {
        let e = tokio::time::timeout(Duration::from_secs(10), plain.next_event())
            .await
            .expect("in time")
            .expect("an event")
            .expect("no error");
        assert_eq!(
            index(&e.payload),
            i,
            "the plain subscriber gets every event"
        );
    }
    c2.close().await;
    let mut member = c.subscribe_group(&mine, "workers").await.expect("join");
    c.publish_acked(&mine, payload(7)).await.expect("publish");
    let event = tokio::time::timeout(Duration::from_secs(10), member.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(index(&event.payload), 7);
    c.close().await;
    cluster.shutdown().await;
}
