//! Scaling 3 → 4 → 2 while publishing: subscriptions follow their topics, every cache key
//! written before is readable after, and every acked publish is delivered exactly once and in
//! order, during the membership transitions too (subscriptions resume at the new owner, which
//! replays what it accepted before they arrived).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use starling_client::{Client, ClientError, Subscription};
use starling_proto::ErrorCode;

use crate::harness::{SOON, TestCluster, index, payload};

const TOPICS: usize = 6;
const KEYS: u64 = 300;
/// After convergence, how long subscriptions may take to settle at their new owner.
const SETTLE: Duration = Duration::from_millis(1000);

struct Acked {
    seq: u64,
    at: Instant,
}

/// Publishes acked messages round-robin over the topics until `stop`.
async fn publish_until(
    client: Client,
    topics: Vec<String>,
    stop: Arc<AtomicBool>,
) -> (BTreeMap<String, Vec<Acked>>, BTreeMap<String, usize>) {
    let mut acked: BTreeMap<String, Vec<Acked>> = BTreeMap::new();
    let mut errors: BTreeMap<String, usize> = BTreeMap::new();
    let mut seq = 0u64;
    while !stop.load(Ordering::Acquire) {
        for t in &topics {
            seq += 1;
            match client.publish_acked(t, payload(seq)).await {
                Ok(()) => acked.entry(t.clone()).or_default().push(Acked {
                    seq,
                    at: Instant::now(),
                }),
                Err(ClientError::Server { code, .. })
                    if code == ErrorCode::Unavailable || code == ErrorCode::Moved =>
                {
                    *errors.entry(code.name().to_string()).or_default() += 1;
                }
                Err(e) => panic!("publish failed with an untyped error: {e}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (acked, errors)
}

/// Receives until `marker` arrives; returns every index seen before it.
async fn until_marker(mut sub: Subscription, marker: u64) -> Vec<u64> {
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(e))) => {
                let i = index(&e.payload);
                if i == marker {
                    return got;
                }
                got.push(i);
            }
            other => panic!("subscription of {} ended: {other:?}", sub.topic()),
        }
    }
}

async fn wait_empty(c: &TestCluster, id: &str) {
    let deadline = Instant::now() + SOON;
    while c.metric(id, "starling_cache_entries", "").await > 0.0 {
        assert!(Instant::now() < deadline, "{id} did not hand off its cache");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scale_3_4_2_keeps_subscriptions_cache_and_acked_messages() {
    let mut c = TestCluster::start("scale", &["b0", "b1", "b2"]).await;
    let client = c.routing_client("b0").await;
    for i in 0..KEYS {
        client
            .cache_put(format!("key-{i}"), payload(i), None)
            .await
            .expect("put");
    }
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("topic-{i}")).collect();
    // Subscribers read all along (a subscriber that stops reading also delays its move).
    const MARKER: u64 = u64::MAX - 1;
    let mut receivers = Vec::new();
    for t in &topics {
        let sub = client.subscribe(t).await.expect("subscribe");
        receivers.push(tokio::spawn(until_marker(sub, MARKER)));
    }
    let stop = Arc::new(AtomicBool::new(false));
    let publisher = tokio::spawn(publish_until(
        c.routing_client("b0").await,
        topics.clone(),
        Arc::clone(&stop),
    ));
    tokio::time::sleep(Duration::from_millis(500)).await;

    // 3 → 4.
    let mut windows = Vec::new();
    let t0 = Instant::now();
    c.start_broker("b3").await;
    c.write_members(&["b0", "b1", "b2", "b3"]);
    c.converge(&["b0", "b1", "b2", "b3"]).await;
    windows.push((t0, Instant::now() + SETTLE));
    tokio::time::sleep(SETTLE + Duration::from_millis(500)).await;
    assert!(
        c.metric("b3", "starling_cache_entries", "").await > 0.0,
        "b3 got its keys"
    );

    // 4 → 2: the leaving members hand off, then get SIGTERM.
    let t1 = Instant::now();
    c.write_members(&["b0", "b1"]);
    c.converge(&["b0", "b1"]).await;
    wait_empty(&c, "b2").await;
    wait_empty(&c, "b3").await;
    c.stop("b2").await;
    c.stop("b3").await;
    windows.push((t1, Instant::now() + SETTLE));
    tokio::time::sleep(SETTLE + Duration::from_millis(500)).await;

    stop.store(true, Ordering::Release);
    let (acked, errors) = publisher.await.expect("publisher");

    // Subscriptions survive: a marker published now reaches every one of them.
    for t in &topics {
        client
            .publish_acked(t, payload(MARKER))
            .await
            .expect("marker");
    }
    let mut lost = Vec::new();
    let mut total = 0usize;
    for (t, r) in topics.iter().zip(receivers) {
        let got = r.await.expect("receiver");
        assert!(
            got.windows(2).all(|w| w[0] < w[1]),
            "{t}: out of order or duplicated"
        );
        let got: std::collections::BTreeSet<u64> = got.into_iter().collect();
        for a in acked.get(t).into_iter().flatten() {
            total += 1;
            if !got.contains(&a.seq) {
                let in_window = windows
                    .iter()
                    .any(|(from, to)| a.at >= *from && a.at <= *to);
                lost.push((t.clone(), a.seq, in_window));
            }
        }
    }
    println!(
        "scale 3→4→2: {total} acked messages, {} not delivered (topic, seq, inside a transition): {lost:?}; publish errors {errors:?}",
        lost.len()
    );
    assert!(lost.is_empty(), "acked messages lost: {lost:?}");
    assert!(total > 100, "the publisher made progress ({total})");

    // Every key written before is readable after, from a fresh client anywhere.
    for reader in [c.routing_client("b1").await, c.plain_client("b0").await] {
        for i in 0..KEYS {
            let v = reader.cache_get(format!("key-{i}")).await.expect("get");
            assert_eq!(v.as_deref().map(index), Some(i), "key-{i}");
        }
        reader.close().await;
    }
    client.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolling_restart_keeps_every_cache_key() {
    let ids = ["r0", "r1", "r2"];
    let mut c = TestCluster::start("roll", &ids).await;
    let client = c.routing_client("r0").await;
    for i in 0..KEYS {
        client
            .cache_put(
                format!("key-{i}"),
                payload(i),
                Some(Duration::from_secs(600)),
            )
            .await
            .expect("put");
    }
    // Restart every member in turn, as a rollout does: SIGTERM drain, then a new process with
    // the same id and address and an empty cache.
    for id in ids {
        c.stop(id).await;
        c.start_broker(id).await;
        c.converge(&ids).await;
        let reader = c.plain_client(id).await;
        for i in 0..KEYS {
            let v = reader.cache_get(format!("key-{i}")).await.expect("get");
            assert_eq!(
                v.as_deref().map(index),
                Some(i),
                "key-{i} after restarting {id}"
            );
        }
        reader.close().await;
    }
    // The entries end at their owners again (pushed back), not only readable through a pull.
    let deadline = Instant::now() + SOON;
    loop {
        let mut total = 0.0;
        for id in ids {
            total += c.metric(id, "starling_cache_entries", "").await;
        }
        if total == KEYS as f64 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{total} entries across the members"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.close().await;
    c.shutdown().await;
}

/// The rolling restart's race, without waiting for it: a member drains right after its
/// neighbour restarted, while its last dial to that neighbour (refused by the draining old
/// process) still marks the link down. Its drain must still hand every key to its successor,
/// so the restarted member reads all of them. (Read at the member restarted first, a key it
/// forwards to its owner can still miss while the owner's entries are being pushed back: the
/// owner pulls on a miss only for its own clients, not for a forwarded get. Not covered here.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_drain_right_after_a_restart_hands_off_every_key() {
    let ids = ["q0", "q1", "q2"];
    let mut c = TestCluster::start("quick-roll", &ids).await;
    let client = c.routing_client("q0").await;
    for i in 0..KEYS {
        client
            .cache_put(format!("key-{i}"), payload(i), None)
            .await
            .expect("put");
    }
    client.close().await;
    c.stop("q0").await;
    c.start_broker("q0").await;
    c.stop("q1").await;
    c.start_broker("q1").await;
    c.converge(&ids).await;
    let reader = c.plain_client("q1").await;
    for i in 0..KEYS {
        let v = reader.cache_get(format!("key-{i}")).await.expect("get");
        assert_eq!(v.as_deref().map(index), Some(i), "key-{i} read at q1");
    }
    reader.close().await;
    c.shutdown().await;
}
