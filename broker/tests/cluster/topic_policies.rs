//! Per-topic replica counts from a topics document (`topics_file`) on three brokers in one
//! process, while `durable_replicas` is 1: the topic a policy gives 3 replicas is a Raft group
//! on all three (its `persisted` acks mean a majority committed; read back from the start at
//! another broker, every acked message once, in order), another durable topic stays
//! single-copy (no replica anywhere), and `GET /replicas` and `GET /storage` name the policy
//! with the configured and current replica counts.

use starling_config::topics::{TopicPolicy, TopicsDocument};
use starling_testkit::replicated::{FROM_THE_START, publish_until_acked, read_indexes as read};

use crate::harness::TestCluster;

const MESSAGES: u64 = 60;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_replicates_one_topic_three_ways_while_another_stays_single_copy() {
    let mut ledger = TopicPolicy::new("ledger", "ledger.r3");
    ledger.replicas = Some(3);
    let plain = TopicPolicy::new("plain", "plain.>");
    let doc = TopicsDocument::new(vec![ledger, plain]).render();
    let c =
        TestCluster::start_converged_with_topics("topic-policies", &["a", "b", "c"], &doc).await;

    // The single-copy topic: a live subscriber at c, persisted publishes at a.
    let at_a = c.plain_client("a").await;
    let at_c = c.plain_client("c").await;
    let mut single_live = at_c.subscribe("plain.r1").await.expect("subscribe at c");
    for i in 0..MESSAGES {
        publish_until_acked(&at_a, "ledger.r3", i).await;
        publish_until_acked(&at_a, "plain.r1", i).await;
    }
    let want: Vec<u64> = (0..MESSAGES).collect();
    assert_eq!(
        read(&mut single_live, MESSAGES as usize).await,
        want,
        "the single-copy topic, live at c"
    );

    // The replicated topic, from the start at b: every acked message once, in order.
    let at_b = c.plain_client("b").await;
    let mut from_start = at_b
        .subscribe_from("ledger.r3", Some(FROM_THE_START))
        .await
        .expect("subscribe from the start at b");
    assert_eq!(
        read(&mut from_start, MESSAGES as usize).await,
        want,
        "the replicated topic, from the start at b"
    );

    // Every broker holds a replica of ledger.r3, with three voters, under the policy; none
    // holds one of plain.r1.
    for id in ["a", "b", "c"] {
        let body = c.http(id, "/replicas").await;
        let replicas: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let topics = replicas.as_array().expect("an array");
        assert!(
            topics.iter().all(|t| t["topic"] != "plain.r1"),
            "plain.r1 is single-copy: {body}"
        );
        let r3 = topics
            .iter()
            .find(|t| t["topic"] == "ledger.r3")
            .unwrap_or_else(|| panic!("no replica of ledger.r3 at {id}: {body}"));
        assert_eq!(r3["policy"], "ledger", "{body}");
        assert_eq!(r3["configured_replicas"], 3, "{body}");
        assert_eq!(r3["current_replicas"], 3, "{body}");
        assert!(r3["sync"].is_object(), "the roll's field stays: {body}");
    }
    // `/storage`: each broker names the policy of the topics open there with their counts;
    // the replicated topic is open on all three, the single-copy one at least at its owner.
    let mut single_seen = 0;
    for id in ["a", "b", "c"] {
        let body = c.http(id, "/storage").await;
        let storage: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let topics = storage["topics"].as_array().expect("topics").clone();
        let counts = |t: &serde_json::Value| {
            (
                t["configured_replicas"].as_u64(),
                t["current_replicas"].as_u64(),
            )
        };
        let r3 = topics
            .iter()
            .find(|t| t["topic"] == "ledger.r3")
            .unwrap_or_else(|| panic!("ledger.r3 not open at {id}: {body}"));
        assert_eq!(r3["policy"], "ledger", "{body}");
        assert_eq!(counts(r3), (Some(3), Some(3)), "{body}");
        if let Some(r1) = topics.iter().find(|t| t["topic"] == "plain.r1") {
            assert_eq!(r1["policy"], "plain", "{body}");
            assert_eq!(counts(r1), (Some(1), Some(1)), "{body}");
            single_seen += 1;
        }
    }
    assert!(single_seen >= 1, "plain.r1 open nowhere");

    drop(single_live);
    drop(from_start);
    at_a.close().await;
    at_b.close().await;
    at_c.close().await;
    c.shutdown().await;
}
