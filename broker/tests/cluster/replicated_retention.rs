//! A replicated topic's retention changed while it is open (the topics document rewritten):
//! three brokers in one process, an R3 topic whose logs roll every few KiB. After the change,
//! every replica (leader and followers) trims the oldest segments of its committed log at its
//! next apply; a read from the start at each broker begins at that replica's new first entry
//! and holds every acked message after it, once, in order; acked publishes keep working. Two
//! tests: a lower `retention_max_bytes`, and a `retention_max_age_ms` set once the first
//! messages are older than it (every closed segment of them goes; the one being appended to
//! stays).

use std::path::Path;
use std::time::Duration;

use starling_config::topics::{TopicPolicy, TopicsDocument};
use starling_testkit::replicated::{FROM_THE_START, publish_until_acked, read};
use tokio::time::Instant;

use crate::harness::{SOON, TestCluster};

const TOPIC: &str = "ledger.kept";
/// Segment size of the replicated logs: a few dozen entries each.
const SEGMENT: u64 = 1024;
/// The lowered retention: about two segments.
const KEEP: u64 = 2 * SEGMENT;
/// Published before the change (several segments' worth), and after it.
const BEFORE: u64 = 120;
const AFTER: u64 = 20;
const IDS: [&str; 3] = ["a", "b", "c"];

/// The retention age of the second test.
const AGE_MS: u64 = 1_000;

/// The topic's retention in the topics document.
#[derive(Clone, Copy)]
enum Retention {
    None,
    Bytes(u64),
    AgeMs(u64),
}

fn document(retention: Retention) -> String {
    let mut p = TopicPolicy::new("ledger", TOPIC);
    p.replicas = Some(3);
    match retention {
        Retention::None => {}
        Retention::Bytes(b) => p.retention_max_bytes = Some(b),
        Retention::AgeMs(ms) => p.retention_max_age_ms = Some(ms),
    }
    TopicsDocument::new(vec![p]).render()
}

/// The bytes and the first entry index of the committed log's segments under `dir` (every
/// generation directory), from their names (`{stream:016x}-{seq:016x}.log`, seq the index).
fn committed_log(dir: &Path) -> (u64, Option<u64>) {
    let (bytes, firsts) = segments(dir);
    (bytes, firsts.first().copied())
}

/// The bytes of the committed log's segments under `dir`, and each segment's first entry
/// index, in order.
fn segments(dir: &Path) -> (u64, Vec<u64>) {
    let (mut bytes, mut firsts) = (0, Vec::new());
    let Ok(generations) = std::fs::read_dir(dir) else {
        return (0, Vec::new());
    };
    for generation in generations.flatten() {
        let Ok(files) = std::fs::read_dir(generation.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let Some(stem) = name.strip_suffix(".log") else {
                continue;
            };
            let Some(seq) = stem
                .split_once('-')
                .and_then(|(_, s)| u64::from_str_radix(s, 16).ok())
            else {
                continue;
            };
            bytes += f.metadata().map(|m| m.len()).unwrap_or(0);
            firsts.push(seq);
        }
    }
    firsts.sort_unstable();
    (bytes, firsts)
}

/// Waits until every broker's `GET /storage` shows `TOPIC` with `retention`.
async fn wait_in_force(c: &TestCluster, retention: Retention) {
    let (field, value) = match retention {
        Retention::None => return,
        Retention::Bytes(b) => ("retention_max_bytes", b),
        Retention::AgeMs(ms) => ("retention_max_age_ms", ms),
    };
    let deadline = Instant::now() + SOON;
    for id in IDS {
        loop {
            let body = c.http(id, "/storage").await;
            let storage: serde_json::Value = serde_json::from_str(&body).expect("JSON");
            let in_force = storage["topics"].as_array().is_some_and(|topics| {
                topics
                    .iter()
                    .any(|t| t["topic"] == TOPIC && t[field] == value)
            });
            if in_force {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{id}: the new retention never in force: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Publishes [`BEFORE`] messages, sets `retention` on the open topic, publishes [`AFTER`]
/// more, and checks every replica's trim and what a read from the start there returns.
async fn retention_trims_every_replica(tag: &str, retention: Retention) {
    let c = TestCluster::start_with_topics_in_segments(
        tag,
        &IDS,
        1,
        &document(Retention::None),
        SEGMENT,
    )
    .await;
    c.converge(&IDS).await;
    let at_a = c.plain_client("a").await;
    for i in 0..BEFORE {
        publish_until_acked(&at_a, TOPIC, i).await;
    }
    let committed = |id: &str| {
        c.dir()
            .join(format!("data-{id}"))
            .join(starling_broker::durable::escape::dir_name(TOPIC))
            .join("committed")
    };
    // Nothing trimmed yet: several segments on every replica, the first message at b.
    for id in IDS {
        let (bytes, _) = committed_log(&committed(id));
        assert!(
            bytes > 2 * KEEP,
            "{id}: only {bytes} bytes before the change"
        );
    }
    let at_b = c.plain_client("b").await;
    let mut from_start = at_b
        .subscribe_from(TOPIC, Some(FROM_THE_START))
        .await
        .expect("subscribe at b");
    assert_eq!(read(&mut from_start, 1).await[0].0, 0, "before the change");
    drop(from_start);
    // The segment each replica is appending to: retention never deletes it.
    let active: Vec<u64> = IDS
        .iter()
        .map(|id| segments(&committed(id)).1.last().copied().unwrap_or(0))
        .collect();
    if let Retention::AgeMs(ms) = retention {
        // Every message so far older than the age when the retention comes into force.
        tokio::time::sleep(Duration::from_millis(ms + 300)).await;
    }

    // Change the retention: in force on every broker, then trimmed at each replica's next
    // apply, while acked publishes go on (at a follower or the leader alike).
    let rewritten = Instant::now();
    c.write_topics(&document(retention));
    wait_in_force(&c, retention).await;
    for i in BEFORE..BEFORE + AFTER {
        publish_until_acked(&at_b, TOPIC, i).await;
    }
    let deadline = Instant::now() + SOON;
    let mut firsts = Vec::new();
    for (id, active) in IDS.into_iter().zip(active) {
        let first = loop {
            let (bytes, first) = committed_log(&committed(id));
            let trimmed = match retention {
                Retention::None => true,
                Retention::Bytes(keep) => bytes <= keep,
                // Every closed segment of the old messages gone.
                Retention::AgeMs(_) => first.is_some_and(|f| f >= active),
            };
            if trimmed && let Some(first) = first {
                break first;
            }
            assert!(
                Instant::now() < deadline,
                "{id}: the committed log still holds {bytes} bytes from entry {first:?} on \
                 (the segment appended to at the change began at entry {active})"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        // From the start at this broker: its first retained entry, then every acked message
        // after it, once, in order, up to the last one.
        let client = c.plain_client(id).await;
        let mut sub = client
            .subscribe_from(TOPIC, Some(FROM_THE_START))
            .await
            .expect("subscribe from the start");
        let head = read(&mut sub, 1).await[0];
        let (oldest, position) = head;
        assert!(oldest > 0, "{id}: nothing trimmed");
        assert_eq!(
            position.seq >> 24,
            first,
            "{id}: the read from the start begins at the first retained entry"
        );
        let rest = read(&mut sub, (BEFORE + AFTER - 1 - oldest) as usize).await;
        let got: Vec<u64> = std::iter::once(oldest)
            .chain(rest.iter().map(|r| r.0))
            .collect();
        assert_eq!(
            got,
            (oldest..BEFORE + AFTER).collect::<Vec<_>>(),
            "{id}: every acked message from the first retained one on, once, in order"
        );
        assert!(
            std::iter::once(head)
                .chain(rest)
                .collect::<Vec<_>>()
                .windows(2)
                .all(|w| w[0].1.seq < w[1].1.seq),
            "{id}: positions grow"
        );
        drop(sub);
        client.close().await;
        firsts.push((id, oldest));
    }
    println!(
        "replicated retention ({tag}): trimmed on every replica {:?} after the rewrite; oldest message kept per replica {firsts:?}",
        rewritten.elapsed()
    );
    at_a.close().await;
    at_b.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lowered_retention_trims_every_replica_of_an_open_replicated_topic() {
    retention_trims_every_replica("replicated-retention", Retention::Bytes(KEEP)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_age_retention_trims_every_replica_of_an_open_replicated_topic() {
    retention_trims_every_replica("replicated-retention-age", Retention::AgeMs(AGE_MS)).await;
}
