//! Replicated durable topics (`durable_replicas: 3`) on three brokers in one process: a
//! `persisted` ack means the batch committed on a majority of replicas; a subscriber on
//! another broker gets every acked message once, in order, live and resuming from the start
//! or from a position, and the topic keeps taking publishes when one replica stops.

use starling_client::Position;
use starling_testkit::replicated::{FROM_THE_START, publish_until_acked, read};

use crate::harness::{TestCluster, payload};

const MESSAGES: u64 = 150;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_ack_persisted_and_deliver_once_in_order_on_every_broker() {
    let mut c =
        TestCluster::start_replicated("replicated", &["a", "b", "c"], &["ledger.>"], 3).await;
    c.converge(&["a", "b", "c"]).await;
    let topic = "ledger.r3";

    // A live subscriber at c, before anything is published.
    let at_c = c.plain_client("c").await;
    let mut live = at_c.subscribe(topic).await.expect("subscribe at c");

    let at_a = c.plain_client("a").await;
    for i in 0..MESSAGES {
        publish_until_acked(&at_a, topic, i).await;
    }
    let want: Vec<u64> = (0..MESSAGES).collect();
    let got = read(&mut live, MESSAGES as usize).await;
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        want,
        "live at c: every acked message once, in order"
    );
    // Positions grow strictly: stable numbers, the same on every replica.
    assert!(
        got.windows(2)
            .all(|w| (w[0].1.stream, w[0].1.seq) < (w[1].1.stream, w[1].1.seq))
    );

    // From the start at b, another broker: the same messages at the same positions.
    let at_b = c.plain_client("b").await;
    let mut from_start = at_b
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("subscribe from the start at b");
    let replayed = read(&mut from_start, MESSAGES as usize).await;
    assert_eq!(replayed, got, "the replay at b matches live delivery at c");

    // Resume from a position in the middle, at a: what follows it, nothing before.
    let (_, mid) = got[99];
    let resume = Position {
        stream: mid.stream,
        seq: mid.seq + 1,
    };
    let mut resumed = at_a
        .subscribe_from(topic, Some(resume))
        .await
        .expect("resume at a");
    let rest = read(&mut resumed, (MESSAGES - 100) as usize).await;
    assert_eq!(rest, got[100..].to_vec(), "resume from a position");

    // One replica stops: the other two keep committing, and the live subscriber at c (or,
    // if c stopped, the one at b) sees the new messages.
    drop(resumed);
    drop(from_start);
    at_a.close().await;
    c.kill("a").await;
    let more = 20;
    for i in MESSAGES..MESSAGES + more {
        publish_until_acked(&at_b, topic, i).await;
    }
    let after = read(&mut live, more as usize).await;
    assert_eq!(
        after.iter().map(|g| g.0).collect::<Vec<_>>(),
        (MESSAGES..MESSAGES + more).collect::<Vec<_>>(),
        "after a replica stopped"
    );
    drop(live);
    at_b.close().await;
    at_c.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fewer_members_than_replicas_refuse_persisted_publishes_as_retryable() {
    let c = TestCluster::start_replicated("replicated-few", &["a", "b"], &["ledger.>"], 3).await;
    c.converge(&["a", "b"]).await;
    let client = c.plain_client("a").await;
    match client.publish_acked("ledger.few", payload(0)).await {
        Err(starling_client::ClientError::Server { code, message }) => {
            assert_eq!(code, starling_proto::ErrorCode::Unavailable, "{message}");
            assert!(message.contains("durable_replicas"), "{message}");
        }
        other => panic!("a topic with 2 of 3 replicas took a persisted publish: {other:?}"),
    }
    client.close().await;
    c.shutdown().await;
}
