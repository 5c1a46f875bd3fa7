//! A durable topic whose owner changes while another broker's topic task is already running
//! for it (a relay for a local subscriber): once that broker owns the topic, its batches go
//! to its own log before anyone sees them, and `persisted` acks wait for it, so what it acked
//! is there after it restarts.

use std::time::Duration;

use starling_client::Position;
use starling_placement::Kind;

use crate::harness::{TestCluster, index, key_owned_by, payload};

/// A resume position older than any stream: everything the log holds.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
const MESSAGES: u64 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_that_becomes_the_owner_logs_what_it_acks_persisted() {
    let mut c = TestCluster::start_durable("durable-owner", &["a", "b"], &["ledger.>"]).await;
    let topic = key_owned_by("ledger.t", Kind::Topic, &["a", "b"], "a");

    // b's task for the topic starts as a relay: a subscriber there, the topic owned by a.
    let at_b = c.plain_client("b").await;
    let mut live = at_b.subscribe(&topic).await.expect("subscribe at b");

    // a leaves: b owns every topic now, with its relay task still running. a stays up while
    // b takes the topic over, as the operator keeps a leaving broker up for the hand-off
    // grace (a new owner does not number on past a former owner it cannot read, for up to
    // the hand-off window: `topic::hand_off`).
    c.write_members(&["b"]);
    c.converge(&["b"]).await;

    for i in 0..MESSAGES {
        at_b.publish_acked(&topic, payload(i))
            .await
            .unwrap_or_else(|e| panic!("persisted publish {i} at the new owner: {e}"));
    }
    // The live subscriber sees them too (the relay task now delivers its own batches).
    let mut seen = Vec::new();
    while seen.len() < MESSAGES as usize {
        match tokio::time::timeout(Duration::from_secs(5), live.next_event()).await {
            Ok(Some(Ok(ev))) => seen.push(index(&ev.payload)),
            other => panic!("live delivery at b stopped after {seen:?}: {other:?}"),
        }
    }
    assert_eq!(seen, (0..MESSAGES).collect::<Vec<_>>());
    drop(live);
    at_b.close().await;
    c.stop("a").await;

    // b restarts on the same storage: everything it acked persisted is in its log.
    c.stop("b").await;
    c.start_broker("b").await;
    let reader = c.plain_client("b").await;
    let mut sub = reader
        .subscribe_from(&topic, Some(FROM_THE_START))
        .await
        .expect("resume from the start at b");
    let mut got = Vec::new();
    while let Ok(Some(Ok(ev))) =
        tokio::time::timeout(Duration::from_millis(1_500), sub.next_event()).await
    {
        got.push(index(&ev.payload));
    }
    assert_eq!(
        got,
        (0..MESSAGES).collect::<Vec<_>>(),
        "every persisted ack at the new owner survives its restart, in order"
    );
    reader.close().await;
    c.shutdown().await;
}
