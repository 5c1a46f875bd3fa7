//! Durable consumers through the real broker and SDK (QUIC on loopback): a member that stops
//! without acking has its message redelivered to another member after `ack_wait`; a poison
//! message lands in the dead-letter topic after `max_deliver`; a consumer resumes at its ack
//! floor after a broker restart on the same data directory; two members share the messages
//! and none is acked twice.

use std::collections::HashSet;
use std::time::Duration;

use starling_client::{ConsumerConfig, Delivery};
use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};

use crate::common::{payload, start};

fn durable(dir: &std::path::Path) -> ConfigOverrides {
    ConfigOverrides {
        durable_topics: Some(vec!["jobs.*".into()]),
        storage_dir: Some(Some(dir.to_path_buf())),
        storage_fsync: Some(StorageFsync::Always),
        ack_level: Some(AckLevel::Persisted),
        ..ConfigOverrides::default()
    }
}

fn config(ack_wait_ms: u64) -> ConsumerConfig {
    ConsumerConfig {
        ack_wait: Duration::from_millis(ack_wait_ms),
        ..ConsumerConfig::new("workers")
    }
}

async fn next(c: &mut starling_client::Consumer, within: Duration) -> Option<Delivery> {
    match tokio::time::timeout(within, c.next()).await {
        Ok(Some(Ok(d))) => Some(d),
        Ok(Some(Err(e))) => panic!("consumer ended: {e}"),
        Ok(None) | Err(_) => None,
    }
}

#[tokio::test]
async fn an_unacked_message_is_redelivered_to_another_member_after_ack_wait() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    c.publish_acked("jobs.a", payload(0)).await.expect("ack");
    let mut first = c.consume("jobs.a", config(300)).await.expect("consume");
    let got = next(&mut first, Duration::from_secs(5))
        .await
        .expect("delivered");
    assert_eq!(got.delivery, 1);
    let mut second = c.consume("jobs.a", config(300)).await.expect("consume");
    // The first member takes the job and stops answering (it is still connected).
    let again = next(&mut second, Duration::from_secs(5))
        .await
        .expect("redelivered to the other member");
    assert_eq!(again.position, got.position);
    assert_eq!(again.delivery, 2);
    again.ack().expect("ack");
    // Acked: never delivered again.
    assert!(
        next(&mut second, Duration::from_millis(800))
            .await
            .is_none()
    );
    let m = b.metrics().await;
    assert!(m.sum("starling_consumer_redeliveries_total") >= 1.0);
    drop(first);
}

#[tokio::test]
async fn a_member_that_goes_away_has_its_messages_redelivered_at_once() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    c.publish_acked("jobs.b", payload(0)).await.expect("ack");
    let mut first = c.consume("jobs.b", config(60_000)).await.expect("consume");
    let got = next(&mut first, Duration::from_secs(5))
        .await
        .expect("delivered");
    drop(got);
    drop(first);
    let mut second = c.consume("jobs.b", config(60_000)).await.expect("consume");
    let again = next(&mut second, Duration::from_secs(5))
        .await
        .expect("redelivered long before ack_wait (60 s)");
    assert_eq!(again.delivery, 2);
}

#[tokio::test]
async fn a_poison_message_lands_in_the_dead_letter_topic_after_max_deliver() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    let mut dead = c
        .consume("jobs.dead", ConsumerConfig::new("inspect"))
        .await
        .expect("dead-letter consumer");
    c.publish_acked("jobs.c", payload(7)).await.expect("ack");
    let cfg = ConsumerConfig {
        max_deliver: 3,
        dead_letter: Some("jobs.dead".into()),
        ..config(30_000)
    };
    let mut w = c.consume("jobs.c", cfg).await.expect("consume");
    for n in 1..=3 {
        let d = next(&mut w, Duration::from_secs(5))
            .await
            .expect("delivered");
        assert_eq!(d.delivery, n);
        d.nak(None).expect("nak");
    }
    assert!(
        next(&mut w, Duration::from_millis(500)).await.is_none(),
        "not past max_deliver"
    );
    let d = next(&mut dead, Duration::from_secs(5))
        .await
        .expect("dead-lettered");
    assert_eq!(d.payload, payload(7));
    d.ack().expect("ack");
    let m = b.metrics().await;
    assert_eq!(m.sum("starling_consumer_dead_lettered_total"), 1.0);
}

#[tokio::test]
async fn two_members_share_the_messages_and_a_restart_resumes_at_the_ack_floor() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    // Both members join first: a member that joins alone gets the whole window.
    let mut one = c.consume("jobs.d", config(30_000)).await.expect("consume");
    let mut two = c.consume("jobs.d", config(30_000)).await.expect("consume");
    for i in 0..40 {
        c.publish_acked("jobs.d", payload(i)).await.expect("ack");
    }
    let mut acked = HashSet::new();
    let (mut by_one, mut by_two) = (0, 0);
    // Ack 20 of them, from both members.
    while acked.len() < 20 {
        tokio::select! {
            Some(Ok(d)) = one.next() => {
                assert!(acked.insert(d.payload.clone()), "delivered twice");
                d.ack().expect("ack");
                by_one += 1;
            }
            Some(Ok(d)) = two.next() => {
                assert!(acked.insert(d.payload.clone()), "delivered twice");
                d.ack().expect("ack");
                by_two += 1;
            }
        }
    }
    assert!(
        by_one > 0 && by_two > 0,
        "both members got messages ({by_one}, {by_two})"
    );
    // Give the acks time to reach the broker's state file.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop((one, two));
    drop(c);
    b.running.shutdown().await;

    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    let mut w = c.consume("jobs.d", config(30_000)).await.expect("consume");
    let mut rest = HashSet::new();
    while let Some(d) = next(&mut w, Duration::from_secs(2)).await {
        assert!(
            !acked.contains(&d.payload),
            "an acked message came back after the restart"
        );
        rest.insert(d.payload.clone());
        d.ack().expect("ack");
    }
    let all: HashSet<_> = (0..40).map(payload).collect();
    let seen: HashSet<_> = acked.union(&rest).cloned().collect();
    assert_eq!(seen, all, "every message, none acked twice");
}

/// A `Ping` on a member's stream is answered with a `Pong` (docs/protocol.md section 1: on
/// any stream once it is open), and the member goes on receiving.
#[tokio::test]
async fn a_ping_on_a_member_stream_is_answered_and_the_member_goes_on() {
    use starling_proto::{ConsumerOpen, ConsumerStart, Frame, Ping, features, write_frame};

    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path())).await;
    let c = b.client().await;
    c.publish_acked("jobs.ping", payload(0)).await.expect("ack");
    let conn = b.ready_with(features::CONSUMERS).await;
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let open = Frame::ConsumerOpen(ConsumerOpen {
        request_id: 7,
        topic: "jobs.ping".into(),
        consumer: "pinger".into(),
        ack_wait_ms: 30_000,
        max_deliver: 0,
        max_ack_pending: 10,
        start: ConsumerStart::First,
        dead_letter: None,
        backoff_ms: Vec::new(),
    });
    write_frame(&mut send, &open).await.expect("open");
    let mut seen_ok = false;
    let mut seen_msg = false;
    let mut seen_pong = false;
    write_frame(&mut send, &Frame::Ping(Ping { nonce: 42 }))
        .await
        .expect("ping");
    let mut buf = bytes::BytesMut::new();
    while !(seen_ok && seen_msg && seen_pong) {
        match crate::common::read_next(&mut recv, &mut buf).await {
            Some(Frame::ConsumerOk(ok)) => {
                assert_eq!(ok.request_id, 7);
                seen_ok = true;
            }
            Some(Frame::ConsumerMessage(m)) => {
                assert_eq!(m.payload, payload(0));
                seen_msg = true;
            }
            Some(Frame::Pong(p)) => {
                assert_eq!(p.nonce, 42);
                seen_pong = true;
            }
            other => panic!("expected ConsumerOk, ConsumerMessage and Pong, got {other:?}"),
        }
    }
}
