//! Replicated durable topics (`durable_replicas: 3`) on three brokers in one process: a
//! `persisted` ack means the batch committed on a majority of replicas; a subscriber on
//! another broker gets every acked message once, in order, live and resuming from the start
//! or from a position, and the topic keeps taking publishes when one replica stops. Messages
//! with headers keep them through the Raft entry, live and replayed, at every broker.

use std::time::Duration;

use starling_client::{Event, Message, Position, Subscription};
use starling_testkit::replicated::{
    FROM_THE_START, publish_message_until_acked, publish_until_acked, read,
};

use crate::harness::{TestCluster, index, payload};

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

/// The next `n` events of `sub`, whole.
async fn events(sub: &mut Subscription, n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let ev = tokio::time::timeout(Duration::from_secs(10), sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("only {} of {n} events", out.len()))
            .expect("subscription open")
            .expect("event");
        out.push(ev);
    }
    out
}

/// What the test publishes as message `i`: every third one has no headers, the others a
/// header `n` with the number (and every fifth one a second header).
fn message(i: u64) -> Message {
    let m = Message::new(payload(i));
    match (i % 3, i % 5) {
        (0, _) => m,
        (_, 0) => m.header("n", i.to_string()).header("five", "yes"),
        _ => m.header("n", i.to_string()),
    }
}

/// Each event's number and its headers as (name, value) pairs.
fn numbered(evs: &[Event]) -> Vec<(u64, Vec<(String, String)>)> {
    evs.iter()
        .map(|e| {
            let h = e
                .headers
                .iter()
                .map(|h| (h.name.clone(), h.value.clone()))
                .collect();
            (index(&e.payload), h)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_on_a_replicated_topic_are_delivered_and_replayed_at_every_broker() {
    const N: u64 = 60;
    let c = TestCluster::start_replicated("replicated-headers", &["a", "b", "c"], &["ledger.>"], 3)
        .await;
    c.converge(&["a", "b", "c"]).await;
    let topic = "ledger.headers";
    let at_a = c.plain_client("a").await;
    // The topic exists and has a leader before the subscriber and the burst.
    publish_until_acked(&at_a, topic, 1_000_000).await;
    let at_c = c.plain_client("c").await;
    let mut live = at_c.subscribe(topic).await.expect("subscribe at c");

    // Bursts of fire-and-forget publishes, each closed by an acked one: the batches of a burst
    // share Raft entries (the proposer merges what queues), so header indices are rebased
    // within an entry and a resume lands inside one.
    let mut i = 0;
    while i < N {
        let end = (i + 10).min(N);
        for j in i..end - 1 {
            at_a.publish_message(topic, message(j), false)
                .await
                .expect("publish");
        }
        at_a.publish_message(topic, message(end - 1), true)
            .await
            .expect("acked publish with headers on a replicated topic");
        i = end;
    }
    let want: Vec<(u64, Vec<(String, String)>)> = (0..N)
        .map(|i| {
            let h = message(i)
                .headers
                .into_iter()
                .map(|h| (h.name, h.value))
                .collect();
            (i, h)
        })
        .collect();
    let got = events(&mut live, N as usize).await;
    assert_eq!(numbered(&got), want, "live at c, headers and all");

    // From the start at b: the committed log's replay keeps the headers too.
    let at_b = c.plain_client("b").await;
    let mut from_start = at_b
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("subscribe from the start at b");
    let replayed = events(&mut from_start, N as usize + 1).await;
    assert_eq!(index(&replayed[0].payload), 1_000_000);
    assert_eq!(
        numbered(&replayed[1..]),
        want,
        "replayed from the start at b"
    );

    // Resume at a from inside an entry: the headers of what follows, rebased.
    for k in [13usize, 27, 44] {
        let resume = Position {
            stream: got[k].position.stream,
            seq: got[k].position.seq + 1,
        };
        let mut resumed = at_a
            .subscribe_from(topic, Some(resume))
            .await
            .expect("resume at a");
        let rest = events(&mut resumed, N as usize - k - 1).await;
        assert_eq!(
            numbered(&rest),
            want[k + 1..].to_vec(),
            "resumed at a after message {k}"
        );
    }
    drop(live);
    drop(from_start);
    at_a.close().await;
    at_b.close().await;
    at_c.close().await;
    c.shutdown().await;
}

/// Message `i` with message id `m{i}`.
fn with_id(i: u64) -> Message {
    Message::new(payload(i)).with_msg_id(format!("m{i}"))
}

/// Publishes [`with_id`]`(i)` until acked (a leader being elected, or one that has not
/// applied its predecessors' entries yet, answers `Unavailable`).
async fn publish_id_until_acked(client: &starling_client::Client, topic: &str, i: u64) {
    publish_message_until_acked(client, topic, with_id(i)).await;
}

/// Publishes every id of `ids` again at `client`, then reads the topic from the start there:
/// each stored once, in order, nothing after them; `after` says when, for the failure.
async fn retried_ids_are_stored_once(
    client: &starling_client::Client,
    topic: &str,
    ids: impl Iterator<Item = u64>,
    n: u64,
    after: &str,
) {
    for i in ids {
        publish_id_until_acked(client, topic, i).await;
    }
    let mut sub = client
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("subscribe from the start");
    let got = read(&mut sub, n as usize).await;
    assert_eq!(
        got.iter().map(|g| g.0).collect::<Vec<_>>(),
        (0..n).collect::<Vec<_>>(),
        "{after}: each id stored once, in order"
    );
    if let Ok(Some(extra)) =
        tokio::time::timeout(Duration::from_millis(500), sub.next_event()).await
    {
        panic!("{after}: a repeat was stored: {extra:?}");
    }
}

/// Publishes with message ids, their retries through another broker, the leader crashing,
/// the retries again at the next leader, then every broker crashing and restarting and the
/// retries once more: every id is stored once, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_id_repeated_on_a_replicated_topic_is_stored_once_across_a_leader_change() {
    const ORIGINALS: u64 = 20;
    const MORE: u64 = 10;
    let ids = ["a", "b", "c"];
    let mut c = TestCluster::start_replicated("replicated-dedup", &ids, &["ledger.>"], 3).await;
    c.converge(&ids).await;
    let topic = "ledger.dedup";
    let at_a = c.plain_client("a").await;
    let at_b = c.plain_client("b").await;
    for i in 0..ORIGINALS {
        publish_id_until_acked(&at_a, topic, i).await;
    }
    // Retries of every one, through another broker (forwarded to the leader, or the leader):
    // acked, not stored again.
    for i in 0..ORIGINALS {
        publish_id_until_acked(&at_b, topic, i).await;
    }
    let leaders = {
        let mut found = Vec::new();
        for id in ids {
            let labels = format!("topic=\"{topic}\"");
            if c.metric(id, "starling_replica_is_leader", &labels).await == 1.0 {
                found.push(id);
            }
        }
        found
    };
    assert_eq!(leaders.len(), 1, "one leader: {leaders:?}");
    let leader = leaders[0];
    at_a.close().await;
    at_b.close().await;
    // The leader crashes: the next one knows the ids from the committed log its replica
    // delivered.
    c.kill(leader).await;
    let survivor = *ids.iter().find(|id| **id != leader).expect("a survivor");
    let client = c.plain_client(survivor).await;
    retried_ids_are_stored_once(
        &client,
        topic,
        0..ORIGINALS + MORE,
        ORIGINALS + MORE,
        "after the leader crashed",
    )
    .await;
    let duplicates = c.metric_sum("starling_publish_duplicates_total", "").await;
    assert!(
        duplicates >= ORIGINALS as f64,
        "the new leader dropped the repeats: {duplicates} counted"
    );
    client.close().await;

    // Every broker crashes and restarts (the old leader with the entries it missed still to
    // apply): each replica's window starts from the ids its committed log holds from within
    // the window, and the entries applied after it opened bring the rest.
    for id in ids {
        c.kill(id).await;
    }
    for id in ids {
        c.start_broker(id).await;
    }
    c.converge(&ids).await;
    let client = c.plain_client(leader).await;
    retried_ids_are_stored_once(
        &client,
        topic,
        (0..ORIGINALS + MORE).rev(),
        ORIGINALS + MORE,
        "after every broker restarted",
    )
    .await;
    let duplicates = c.metric_sum("starling_publish_duplicates_total", "").await;
    assert!(
        duplicates >= (ORIGINALS + MORE) as f64,
        "every retry after the restart was a repeat: {duplicates} counted"
    );
    client.close().await;
    c.shutdown().await;
}
