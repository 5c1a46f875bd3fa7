//! A former owner that learns of a membership change after the brokers relaying its topics:
//! until it learns, it still accepts (and acks) publishes as the owner, and what it accepted
//! must still reach the subscribers, whether it learns seconds later (within the retire limit)
//! or a moment later.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use starling_client::{Client, Subscription};
use starling_placement::Kind;

use crate::harness::{SOON, TestCluster, index, payload};

/// How long the former owner stays unaware of the change: longer than any fixed overlap would be.
const LATE: Duration = Duration::from_secs(5);

/// A topic owned by c among a, b, c, and by a once c has left.
fn moving_from_c_to_a(prefix: &str) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|t| {
            starling_placement::owner(["a", "b", "c"], Kind::Topic, t.as_bytes()) == Some("c")
                && starling_placement::owner(["a", "b"], Kind::Topic, t.as_bytes()) == Some("a")
        })
        .unwrap_or_else(|| panic!("no {prefix}-N placed on c, then on a"))
}

/// A plain subscriber of `topic` on b, once b's upstream subscription has reached c: b relays
/// the topic from its owner.
async fn subscribed_on_b(c: &TestCluster, topic: &str) -> (Client, Subscription) {
    let subscriber = c.plain_client("b").await;
    let sub = subscriber.subscribe(topic).await.expect("subscribe");
    let deadline = Instant::now() + SOON;
    while c.metric("c", "starling_subscriptions", "").await < 1.0 {
        assert!(Instant::now() < deadline, "b's upstream reaches c");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    (subscriber, sub)
}

/// The message indices `sub` receives until all of `want` arrived or [`SOON`] passed.
async fn receive_until(sub: &mut Subscription, want: &BTreeSet<u64>) -> BTreeSet<u64> {
    let mut received = BTreeSet::new();
    let deadline = Instant::now() + SOON;
    while !want.is_subset(&received) && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_millis(500), sub.next_event()).await {
            Ok(Some(Ok(e))) => {
                received.insert(index(&e.payload));
            }
            Ok(other) => panic!("subscription ended: {other:?}"),
            Err(_) => {}
        }
    }
    received
}

/// Waits until broker `id` reports the epoch of `members`.
async fn learned(c: &TestCluster, id: &str, members: &[&str]) {
    let want = c.epoch_of(members);
    let probe = c.plain_client(id).await;
    let deadline = Instant::now() + SOON;
    while probe.cluster_info().await.map(|i| i.epoch).unwrap_or(0) != want {
        assert!(Instant::now() < deadline, "{id} learns the new list");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    probe.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_publish_the_former_owner_accepts_just_before_it_learns_is_delivered() {
    let ids = ["a", "b", "c"];
    let mut c = TestCluster::start("late-moment", &ids).await;
    let topic = moving_from_c_to_a("moment");
    let (subscriber, mut sub) = subscribed_on_b(&c, &topic).await;
    let publisher = c.plain_client("c").await;
    publisher
        .publish_acked(&topic, payload(0))
        .await
        .expect("c accepts as the owner");

    // b (relaying the topic from c) and a learn that c left; c still owns the topic, accepts
    // and acks one more message, and learns a moment later, before b's link to it would have
    // been re-established.
    c.write_members_seen_by(&["a", "b"], &["a", "b"]);
    learned(&c, "b", &["a", "b"]).await;
    publisher
        .publish_acked(&topic, payload(1))
        .await
        .expect("c, not knowing yet, accepts as the owner");
    c.write_members_seen_by(&["c"], &["a", "b"]);
    learned(&c, "c", &["a", "b"]).await;

    let received = receive_until(&mut sub, &BTreeSet::from([0, 1])).await;
    assert_eq!(
        received,
        BTreeSet::from([0, 1]),
        "both acked messages reach the subscriber on b"
    );
    publisher.close().await;
    subscriber.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_former_owner_that_learns_late_still_delivers_what_it_acked() {
    let ids = ["a", "b", "c"];
    let mut c = TestCluster::start("late", &ids).await;
    let topic = moving_from_c_to_a("late");

    let (subscriber, mut sub) = subscribed_on_b(&c, &topic).await;

    // A plain publisher on c, acked, every 10 ms until stopped.
    let publisher = c.plain_client("c").await;
    let stop = Arc::new(AtomicBool::new(false));
    let publishing = {
        let topic = topic.clone();
        let stop = Arc::clone(&stop);
        tokio::spawn(async move {
            let mut acked = BTreeSet::new();
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                if publisher.publish_acked(&topic, payload(i)).await.is_ok() {
                    acked.insert(i);
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            publisher.close().await;
            acked
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // a and b learn that c left; c keeps the old list, so it still owns the topic and accepts.
    c.write_members_seen_by(&["a", "b"], &["a", "b"]);
    c.converge(&["a", "b"]).await;
    let accepted_before = c.metric("c", "starling_published_messages_total", "").await;
    tokio::time::sleep(LATE).await;
    let accepted_late =
        c.metric("c", "starling_published_messages_total", "").await - accepted_before;

    // c learns at last; its publisher's messages now go to a.
    c.write_members_seen_by(&["c"], &["a", "b"]);
    learned(&c, "c", &["a", "b"]).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::SeqCst);
    let acked = publishing.await.expect("publisher");

    let received = receive_until(&mut sub, &acked).await;
    let lost: Vec<u64> = acked.difference(&received).copied().collect();
    assert!(
        accepted_late > 100.0,
        "c accepted as the owner while it was late ({accepted_late} messages)"
    );
    assert!(
        lost.is_empty(),
        "{} of {} acked messages lost ({accepted_late} accepted by c while late): {lost:?}",
        lost.len(),
        acked.len()
    );
    subscriber.close().await;
    c.shutdown().await;
}
