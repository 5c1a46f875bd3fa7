//! A plain subscriber resuming from an old position at a broker that relays the topic (it
//! does not own it): the relay's retained tail holds only the owner's newest stream, and the
//! older streams are only in the owner's log. The subscriber must get every event from its
//! position on, in the owner's order, once: the relay's tail must not be sent before the
//! owner's older streams (seen in the e2e durable scale test: the newest event first, then
//! 0, 1, 2, ...), whether the relay holds an upstream subscription at the time or not.

use std::time::{Duration, Instant};

use starling_client::{Client, Position, Subscription};
use starling_placement::Kind;

use crate::harness::{SOON, TestCluster, index, payload};

/// A resume position older than any stream: everything the owner's log holds.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
/// Events published in each of the owner's two streams.
const PER_STREAM: u64 = 20;
/// Events published while a live subscriber at the relay fills its retained tail.
const IN_THE_TAIL: u64 = 10;

/// A durable topic owned by b among a, b and among a, b, c: adding c leaves it with b, which
/// numbers its next batch in a new stream.
fn owned_by_b(prefix: &str) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|t| {
            starling_placement::owner(["a", "b"], Kind::Topic, t.as_bytes()) == Some("b")
                && starling_placement::owner(["a", "b", "c"], Kind::Topic, t.as_bytes())
                    == Some("b")
        })
        .unwrap_or_else(|| panic!("no {prefix}-N placed on b"))
}

/// Publishes `range` to `topic` at its owner b, each acked `persisted`.
async fn publish(publisher: &Client, topic: &str, range: std::ops::Range<u64>) {
    for i in range {
        publisher
            .publish_acked(topic, payload(i))
            .await
            .unwrap_or_else(|e| panic!("publish {i}: {e}"));
    }
}

/// The indices `sub` delivers until `want` events arrived and nothing more comes for a moment
/// (or [`SOON`] passed), with the first positions seen (for the failure message).
async fn receive(sub: &mut Subscription, want: usize) -> (Vec<u64>, Vec<Position>) {
    let (mut got, mut positions) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + SOON;
    while Instant::now() < deadline {
        let wait = if got.len() >= want {
            Duration::from_millis(700)
        } else {
            Duration::from_millis(500)
        };
        match tokio::time::timeout(wait, sub.next_event()).await {
            Ok(Some(Ok(e))) => {
                got.push(index(&e.payload));
                positions.push(e.position);
            }
            Ok(other) => panic!("subscription ended: {other:?}"),
            Err(_) if got.len() >= want => break,
            Err(_) => {}
        }
    }
    (got, positions)
}

/// Two streams of `topic` at its owner b (the second after c joined), the first only in b's
/// log by now; a at the end holds a retained tail of the second stream only, relayed to a
/// live subscriber there, which is returned (still subscribed) with the position of the
/// tail's first event.
async fn two_streams_and_a_relay_tail(
    c: &mut TestCluster,
    topic: &str,
) -> (Client, Subscription, Position) {
    let publisher = c.plain_client("b").await;
    publish(&publisher, topic, 0..PER_STREAM).await;
    c.start_broker("c").await;
    c.write_members(&["a", "b", "c"]);
    c.converge(&["a", "b", "c"]).await;
    publish(&publisher, topic, PER_STREAM..2 * PER_STREAM).await;
    let live_client = c.plain_client("a").await;
    let mut live = live_client
        .subscribe(topic)
        .await
        .expect("live subscribe at a");
    let deadline = Instant::now() + SOON;
    while c.metric("b", "starling_subscriptions", "").await < 1.0 {
        assert!(Instant::now() < deadline, "a's upstream reaches b");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let tail = 2 * PER_STREAM..2 * PER_STREAM + IN_THE_TAIL;
    publish(&publisher, topic, tail.clone()).await;
    let (got, positions) = receive(&mut live, IN_THE_TAIL as usize).await;
    assert_eq!(got, tail.collect::<Vec<_>>(), "the live subscriber at a");
    publisher.close().await;
    (live_client, live, positions[0])
}

/// Resumes `topic` at a from the start and checks it gets `0..total`, in order, once.
async fn resume_at_a_from_the_start(c: &TestCluster, topic: &str, total: u64, case: &str) {
    let client = c.plain_client("a").await;
    let mut sub = client
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("resume at a");
    let (got, positions) = receive(&mut sub, total as usize).await;
    let want: Vec<u64> = (0..total).collect();
    assert_eq!(
        got,
        want,
        "{case}: every event from the start, in order, once (first positions: {:?})",
        &positions[..positions.len().min(3)]
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_at_a_relay_without_an_upstream_gets_the_older_streams_first() {
    let mut c = TestCluster::start_durable("relay-resume-idle", &["a", "b"], &["ledger.>"]).await;
    let topic = owned_by_b("ledger.idle");
    let (live_client, live, _) = two_streams_and_a_relay_tail(&mut c, &topic).await;
    // The live subscriber leaves: a keeps the topic's tail (its task lives on for a while) but
    // drops its upstream.
    live.unsubscribe().await;
    live_client.close().await;
    let deadline = Instant::now() + SOON;
    while c.metric("b", "starling_subscriptions", "").await > 0.0 {
        assert!(Instant::now() < deadline, "a's upstream at b ends");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let total = 2 * PER_STREAM + IN_THE_TAIL;
    resume_at_a_from_the_start(&c, &topic, total, "no upstream at a").await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_at_a_relay_with_an_upstream_gets_the_older_streams_first() {
    let mut c = TestCluster::start_durable("relay-resume-busy", &["a", "b"], &["ledger.>"]).await;
    let topic = owned_by_b("ledger.busy");
    // The live subscriber stays: a's upstream at b is past the start.
    let (live_client, mut live, tail_start) = two_streams_and_a_relay_tail(&mut c, &topic).await;
    let total = 2 * PER_STREAM + IN_THE_TAIL;
    // A position a's tail reaches back to is served from the tail alone: no subscription of
    // its own at the owner.
    let forwarded = || c.metric("a", "starling_cluster_forwarded_total", "subscribe");
    let before = forwarded().await;
    let client = c.plain_client("a").await;
    let mut sub = client
        .subscribe_from(&topic, Some(tail_start))
        .await
        .expect("resume at a inside its tail");
    let (got, _) = receive(&mut sub, IN_THE_TAIL as usize).await;
    assert_eq!(
        got,
        (2 * PER_STREAM..total).collect::<Vec<_>>(),
        "from a's tail"
    );
    assert_eq!(
        forwarded().await,
        before,
        "served from a's tail, not from the owner"
    );
    client.close().await;
    resume_at_a_from_the_start(&c, &topic, total, "with an upstream at a").await;
    // And live events after the catch-up reach both, once.
    let publisher = c.plain_client("b").await;
    let resumed_client = c.plain_client("a").await;
    let mut resumed = resumed_client
        .subscribe_from(&topic, Some(FROM_THE_START))
        .await
        .expect("resume at a again");
    let (got, _) = receive(&mut resumed, total as usize).await;
    assert_eq!(got, (0..total).collect::<Vec<_>>(), "resumed again");
    publish(&publisher, &topic, total..total + 5).await;
    let (got, _) = receive(&mut resumed, 5).await;
    assert_eq!(
        got,
        (total..total + 5).collect::<Vec<_>>(),
        "live after resuming"
    );
    let (got, _) = receive(&mut live, 5).await;
    assert_eq!(
        got,
        (total..total + 5).collect::<Vec<_>>(),
        "the live subscriber"
    );
    publisher.close().await;
    resumed_client.close().await;
    live_client.close().await;
    c.shutdown().await;
}
