//! A topics document moving an open replicated topic between 3 and 5 replicas: five brokers
//! in one process over real QUIC, an R3 topic under `persisted` publishes, its policy
//! rewritten to `replicas: 5` (the leader's mover adds the two other brokers as learners,
//! they catch up and become voters) and back to 3 (the two outside the placement's first
//! three are removed and delete their files). After each move every acknowledged message is
//! read back once, in order, at the same positions, from every replica of the topic.

use starling_config::topics::{TopicPolicy, TopicsDocument};
use tokio::time::Instant;

use crate::harness::TestCluster;
use crate::replica_moves::{
    Publisher, check_read_back, placement_of, publish_marker, some_publishes, wait_placed_n,
};

const FIVE: [&str; 5] = ["a", "b", "c", "d", "e"];
const TOPIC: &str = "ledger.grow";

fn document(replicas: u32) -> String {
    let mut p = TopicPolicy::new("ledger", "ledger.>");
    p.replicas = Some(replicas);
    TopicsDocument::new(vec![p]).render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_moves_an_open_topic_3_5_3_under_load_without_losing_an_acked_message() {
    let topics = vec![TOPIC.to_string()];
    let c = TestCluster::start_converged_with_topics("policy-moves", &FIVE, &document(3)).await;
    let three = placement_of(&FIVE, TOPIC, 3);
    let five = placement_of(&FIVE, TOPIC, 5);

    // R3, under load at a broker that is not necessarily a replica.
    let publisher = Publisher::start_from(&c, "a", &topics, 0).await;
    some_publishes(&c, "b", &topics, 1 << 40).await;
    wait_placed_n(&c, &topics, &FIVE, 3).await;

    // 3 → 5: every broker a voter, the two new replicas caught up.
    let grow = Instant::now();
    c.write_topics(&document(5));
    wait_placed_n(&c, &topics, &FIVE, 5).await;
    let grown = grow.elapsed();
    some_publishes(&c, "c", &topics, 2 << 40).await;
    let (up, refused_up) = publisher.finish().await;
    let up = up.get(TOPIC).cloned().unwrap_or_default();
    let at_a = c.plain_client("a").await;
    publish_marker(&at_a, TOPIC, 3 << 40).await;
    check_read_back(&c, &five, TOPIC, &up, 3 << 40).await;

    // 5 → 3, under load again: the two outside the first three of the placement leave.
    let publisher = Publisher::start_from(&c, "a", &topics, 1 << 30).await;
    some_publishes(&c, "d", &topics, 4 << 40).await;
    let shrink = Instant::now();
    c.write_topics(&document(3));
    wait_placed_n(&c, &topics, &FIVE, 3).await;
    let shrunk = shrink.elapsed();
    some_publishes(&c, "e", &topics, 5 << 40).await;
    let (down, refused_down) = publisher.finish().await;
    let down = down.get(TOPIC).cloned().unwrap_or_default();
    publish_marker(&at_a, TOPIC, 6 << 40).await;
    let all: Vec<u64> = up.iter().chain(&down).copied().collect();
    check_read_back(&c, &three, TOPIC, &all, 6 << 40).await;

    assert!(
        up.len() >= 5 && down.len() >= 5,
        "too few publishes acked during the moves: {} and {}",
        up.len(),
        down.len()
    );
    let started = c
        .metric_sum("starling_replica_moves_total", "outcome=\"started\"")
        .await;
    assert!(started >= 2.0, "two moves counted, {started} started");
    println!(
        "policy moves 3 → 5 in {grown:?} ({} acked, {refused_up} refused), 5 → 3 in {shrunk:?} ({} acked, {refused_down} refused)",
        up.len(),
        down.len()
    );
    at_a.close().await;
    c.shutdown().await;
}
