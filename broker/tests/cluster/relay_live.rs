//! A live subscription at a broker that relays its topic (another member owns it): every event
//! the owner accepts after the subscriber saw `SubscribeOk` must reach it. Before the fix, the
//! relay answered `SubscribeOk` and only then started its upstream subscription at the owner,
//! which starts at the owner's live events of the moment it is made: a publish straight to the
//! owner right after `SubscribeOk` raced it, and under load the subscriber never got the event
//! (seen as a flaky `wildcards::a_clustered_broker_refuses_wildcards_with_a_clear_error`).

use std::time::Duration;

use starling_placement::Kind;

use crate::harness::{SOON, TestCluster, key_owned_by};

/// Topics tried, each a fresh relay with no upstream yet.
const TOPICS: usize = 12;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_subscriber_at_a_relay_gets_every_publish_made_after_its_subscribe_ok() {
    let cluster = TestCluster::start("relay-live", &["a", "b"]).await;
    // The subscriber is at a; every topic is owned by b, and the publisher goes straight to b,
    // so nothing it does waits for a's upstream.
    let subscriber = cluster.plain_client("a").await;
    let publisher = cluster.plain_client("b").await;
    for n in 0..TOPICS {
        let topic = key_owned_by(&format!("relay-live-{n}"), Kind::Topic, &["a", "b"], "b");
        let mut sub = subscriber
            .subscribe(&topic)
            .await
            .expect("subscribe at the relay");
        publisher
            .publish_acked(&topic, format!("first-{n}"))
            .await
            .expect("publish at the owner");
        let event = tokio::time::timeout(SOON, sub.next_event())
            .await
            .unwrap_or_else(|_| {
                panic!("`{topic}`: the event published after SubscribeOk never arrived")
            })
            .expect("an event")
            .expect("no error");
        assert_eq!(
            &event.payload[..],
            format!("first-{n}").as_bytes(),
            "`{topic}`"
        );
        // Nothing else: a second publish is the next event.
        publisher
            .publish_acked(&topic, format!("second-{n}"))
            .await
            .expect("publish at the owner");
        let event = tokio::time::timeout(Duration::from_secs(5), sub.next_event())
            .await
            .expect("the second event in time")
            .expect("an event")
            .expect("no error");
        assert_eq!(
            &event.payload[..],
            format!("second-{n}").as_bytes(),
            "`{topic}`"
        );
    }
    subscriber.close().await;
    publisher.close().await;
    cluster.shutdown().await;
}
