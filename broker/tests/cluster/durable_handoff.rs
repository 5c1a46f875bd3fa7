//! Durable topics across owner changes (issue 15, part 4): a cluster scaled 3 → 1 → 3 while
//! publishing with `persisted` acks loses no acknowledged message. The brokers keep their data
//! directories across the scale (a StatefulSet's retained volumes), members change before the
//! leaving brokers drain (the operator's order), and every topic's owner after each change
//! must serve, from its own log, everything acked on the topic from the start.

use std::time::Duration;

use starling_client::{Client, Position};
use starling_placement::Kind;

use crate::harness::{TestCluster, index, key_owned_by, payload};

/// A resume position older than any stream: everything the log holds.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
/// The first index the publisher at b uses.
const AT_B: u64 = 1_000_000;
/// Messages published per topic in each phase.
const PER_PHASE: u64 = 25;

/// Publishes messages `from..from + PER_PHASE` to each topic, each acked `persisted`.
async fn publish_phase(client: &Client, topics: &[String], from: u64) {
    for topic in topics {
        for i in from..from + PER_PHASE {
            client
                .publish_acked(topic, payload(i))
                .await
                .unwrap_or_else(|e| panic!("persisted publish {i} to {topic}: {e}"));
        }
    }
}

/// Everything `client` (at the topic's owner) replays of `topic` from the start.
async fn replay_all(client: &Client, topic: &str, want: u64) -> Vec<u64> {
    let mut sub = client
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .unwrap_or_else(|e| panic!("resume {topic} from the start: {e}"));
    let mut got = Vec::new();
    let first_within = Duration::from_secs(10);
    loop {
        let wait = if got.is_empty() {
            first_within
        } else if got.len() as u64 >= want {
            Duration::from_millis(700)
        } else {
            Duration::from_secs(5)
        };
        match tokio::time::timeout(wait, sub.next_event()).await {
            Ok(Some(Ok(ev))) => got.push(index(&ev.payload)),
            Ok(Some(Err(e))) => panic!("replay of {topic}: {e}"),
            Ok(None) | Err(_) => return got,
        }
    }
}

/// Checks that each topic's owner replays every message of phases `0..phases`, in order.
async fn check_owners(c: &TestCluster, members: &[&str], topics: &[String], phases: u64) {
    let want: Vec<u64> = (0..phases * PER_PHASE).collect();
    for topic in topics {
        let owner =
            starling_placement::owner(members.iter().copied(), Kind::Topic, topic.as_bytes())
                .expect("an owner");
        let client = c.plain_client(owner).await;
        let got = replay_all(&client, topic, want.len() as u64).await;
        assert_eq!(
            got, want,
            "{topic} at its owner {owner} after {phases} phases: every acked message, in order, once"
        );
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_three_to_one_to_three_loses_no_persisted_message() {
    let all = ["a", "b", "c"];
    let mut c = TestCluster::start_durable("durable-handoff", &all, &["ledger.>"]).await;
    // One topic owned by each broker of the three.
    let topics: Vec<String> = all
        .iter()
        .map(|owner| key_owned_by(&format!("ledger.{owner}"), Kind::Topic, &all, owner))
        .collect();

    // Phase 0 on three brokers, published through a (which forwards to the owners).
    let at_a = c.plain_client("a").await;
    publish_phase(&at_a, &topics, 0).await;
    at_a.close().await;
    check_owners(&c, &all, &topics, 1).await;

    // Scale down to a: members first, then b and c drain and stop (their volumes stay).
    c.write_members(&["a"]);
    c.converge(&["a"]).await;
    c.stop("b").await;
    c.stop("c").await;
    assert!(
        c.metric("a", "starling_storage_handoff_copied_records_total", "")
            .await
            > 0.0,
        "a copied the logs of b's and c's topics"
    );

    // Phase 1 on one broker: a owns every topic and has every earlier message.
    let at_a = c.plain_client("a").await;
    publish_phase(&at_a, &topics, PER_PHASE).await;
    at_a.close().await;
    check_owners(&c, &["a"], &topics, 2).await;

    // Scale back up: b and c start on their old data (not members yet), then members follow.
    c.start_broker("b").await;
    c.start_broker("c").await;
    c.write_members(&all);
    c.converge(&all).await;

    // Phase 2 on three brokers again: b and c own their topics, and copied what a appended
    // while they were away before numbering anything.
    let at_a = c.plain_client("a").await;
    publish_phase(&at_a, &topics, 2 * PER_PHASE).await;
    at_a.close().await;
    check_owners(&c, &all, &topics, 3).await;

    c.shutdown().await;
}

/// Publishes `persisted` to `topics` in turn until `stop`, recording each acked index; a
/// refused or failed publish (a topic moving) is not recorded and the next index follows.
async fn publish_through(
    client: Client,
    topics: Vec<String>,
    first: u64,
    acked: std::sync::Arc<std::sync::Mutex<Vec<u64>>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut i = first;
    while !*stop.borrow() {
        let topic = &topics[(i % topics.len() as u64) as usize];
        if client.publish_acked(topic, payload(i)).await.is_ok() {
            acked.lock().unwrap().push(i);
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        i += 1;
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn publishing_through_the_changes_loses_no_persisted_message() {
    let all = ["a", "b", "c"];
    let mut c = TestCluster::start_durable("durable-through", &all, &["ledger.>"]).await;
    let topics: Vec<String> = all
        .iter()
        .map(|owner| key_owned_by(&format!("ledger.{owner}"), Kind::Topic, &all, owner))
        .collect();
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    // One publisher at a (every topic), one at b (b's topic: b takes it itself while it
    // believes it owns it, the race the hand-off must not lose).
    let at_a = tokio::spawn(publish_through(
        c.plain_client("a").await,
        topics.clone(),
        0,
        std::sync::Arc::clone(&acked),
        stop_rx.clone(),
    ));
    let at_b = tokio::spawn(publish_through(
        c.plain_client("b").await,
        vec![topics[1].clone(); 3],
        AT_B,
        std::sync::Arc::clone(&acked),
        stop_rx,
    ));
    let pause = || tokio::time::sleep(Duration::from_millis(600));
    pause().await;

    // a learns first that it is alone: b and c still own their topics in their own views
    // for a moment, and b keeps taking its publisher's; a must not number their topics before
    // they have seen the change.
    c.write_members_seen_by(&["a"], &["a"]);
    pause().await;
    c.write_members(&["a"]);
    c.converge(&["a"]).await;
    pause().await;
    c.stop("b").await;
    c.stop("c").await;
    pause().await;

    // Back to three: b and c first learn of it themselves, a a moment later.
    c.start_broker("b").await;
    c.start_broker("c").await;
    c.write_members_seen_by(&["b", "c"], &all);
    pause().await;
    c.write_members(&all);
    c.converge(&all).await;
    pause().await;
    let _ = stop_tx.send(true);
    at_a.await.unwrap();
    at_b.await.unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 30,
        "publishing went on through the changes: {}",
        acked.len()
    );

    for (t, topic) in topics.iter().enumerate() {
        let owner = starling_placement::owner(all.iter().copied(), Kind::Topic, topic.as_bytes())
            .expect("an owner");
        let topic_of = |i: u64| {
            if i >= AT_B {
                1
            } else {
                (i % topics.len() as u64) as usize
            }
        };
        let want: Vec<u64> = acked
            .iter()
            .copied()
            .filter(|i| topic_of(*i) == t)
            .collect();
        let client = c.plain_client(owner).await;
        let got = replay_all(&client, topic, want.len() as u64).await;
        client.close().await;
        for from_b in [false, true] {
            let one: Vec<u64> = got
                .iter()
                .copied()
                .filter(|i| (*i >= AT_B) == from_b)
                .collect();
            for w in one.windows(2) {
                assert!(w[0] < w[1], "{topic}: out of order or duplicated: {w:?}");
            }
        }
        let lost: Vec<u64> = want.iter().copied().filter(|i| !got.contains(i)).collect();
        assert!(
            lost.is_empty(),
            "{topic} at {owner}: acked but lost: {lost:?}"
        );
    }
    c.shutdown().await;
}
