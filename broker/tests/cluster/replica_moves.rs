//! Replica sets follow the membership (`durable_replicas: 3`): brokers in one process over
//! real QUIC, scaled 3 → 5 → 3 while `persisted` publishes run, and a leader crash in the
//! middle of a move. Afterwards every topic's voters are the first three members of its
//! placement order, no learner is left, the brokers outside the set hold no replica and no
//! files of it, and every acknowledged message is read back from every final replica once,
//! in order, at the same positions.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use starling_broker::cluster::replica_link::replica_id;
use starling_client::{Client, Position, Subscription};
use starling_placement::Kind;
use tokio::time::Instant;

use crate::harness::{TestCluster, index, payload};

const REPLICAS: usize = 3;
/// Position (1, 0): a replicated topic from its start.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
/// How long the replica sets may take to reach the placement after a change.
const MOVE_DEADLINE: Duration = Duration::from_secs(60);

/// The first `REPLICAS` members of `topic`'s placement order among `members`.
fn placement(members: &[&str], topic: &str) -> Vec<String> {
    placement_of(members, topic, REPLICAS)
}

/// The first `n` members of `topic`'s placement order among `members`.
pub(crate) fn placement_of(members: &[&str], topic: &str, n: usize) -> Vec<String> {
    starling_placement::ranked(members.iter().copied(), Kind::Topic, topic.as_bytes())
        .into_iter()
        .take(n)
        .map(str::to_string)
        .collect()
}

fn ids(members: &[String]) -> BTreeSet<u64> {
    members.iter().map(|m| replica_id(m)).collect()
}

/// `count` topic names whose replica set over `after` differs from the one over `before`,
/// the first of them led, after the change, by a member that joined (the one that would
/// create the topic if it found no state).
fn moving_topics(before: &[&str], after: &[&str], count: usize) -> Vec<String> {
    let joined: Vec<&str> = after
        .iter()
        .copied()
        .filter(|m| !before.contains(m))
        .collect();
    let mut topics: Vec<String> = Vec::new();
    for i in 0..10_000 {
        let t = format!("ledger.move-{i}");
        let (b, a) = (placement(before, &t), placement(after, &t));
        if ids(&b) == ids(&a) {
            continue;
        }
        let new_first = joined.contains(&a[0].as_str());
        if topics.is_empty() != new_first {
            continue;
        }
        topics.push(t);
        if topics.len() == count {
            return topics;
        }
    }
    panic!("no {count} topics move between {before:?} and {after:?}");
}

/// The voters and the learners of a topic, as its leader sees them.
type Membership = (BTreeSet<u64>, BTreeSet<u64>);

/// What the running brokers' replicas say of `topic`: the leader's voters and learners, and
/// which brokers have a replica of it open.
fn replica_state(c: &TestCluster, topic: &str) -> (Option<Membership>, BTreeSet<String>) {
    let mut leader = None;
    let mut open = BTreeSet::new();
    for (id, b) in &c.running {
        if let Some(s) = b.replica_status(topic) {
            open.insert(id.clone());
            if s.is_leader {
                leader = Some((s.voters, s.learners));
            }
        }
    }
    (leader, open)
}

/// Waits until every topic's voters are its placement over `members`, with no learner, and
/// exactly the brokers of the set have a replica open; then checks that no other broker
/// keeps the topic's replica files.
async fn wait_placed(c: &TestCluster, topics: &[String], members: &[&str]) {
    wait_placed_n(c, topics, members, REPLICAS).await;
}

/// [`wait_placed`] for topics of `n` replicas.
pub(crate) async fn wait_placed_n(c: &TestCluster, topics: &[String], members: &[&str], n: usize) {
    let deadline = Instant::now() + MOVE_DEADLINE;
    for topic in topics {
        let want = placement_of(members, topic, n);
        let want_ids = ids(&want);
        let want_open: BTreeSet<String> = want.iter().cloned().collect();
        loop {
            let (leader, open) = replica_state(c, topic);
            if leader.as_ref() == Some(&(want_ids.clone(), BTreeSet::new())) && open == want_open {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{topic}: replicas not moved to {want:?} (voters, learners at the leader: {leader:?}; open at {open:?})"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for id in c.running.keys().filter(|id| !want_open.contains(*id)) {
            let dir = c
                .dir()
                .join(format!("data-{id}"))
                .join(starling_broker::durable::escape::dir_name(topic));
            // The replica is closed before its files are removed: they go soon after.
            while dir.join("raft").exists() || dir.join("committed").exists() {
                assert!(
                    Instant::now() < deadline,
                    "{topic}: {id} left the replica set but kept its files in {}",
                    dir.display()
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Acknowledged publish indexes by topic, and how many publishes were refused.
pub(crate) type Acked = (BTreeMap<String, Vec<u64>>, u64);

/// Publishes `persisted` (the cluster's ack level) round-robin over `topics` until `stop`;
/// every publish has a fresh index, a refused or timed-out one is not retried (it may or may
/// not have committed).
async fn publish_until(
    client: Client,
    topics: Vec<String>,
    stop: Arc<AtomicBool>,
    base: u64,
) -> Acked {
    let mut acked: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut refused = 0;
    let mut i = base;
    while !stop.load(Ordering::Acquire) {
        for t in &topics {
            i += 1;
            match client.publish_acked(t, payload(i)).await {
                Ok(()) => acked.entry(t.clone()).or_default().push(i),
                Err(_) => {
                    refused += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
    }
    client.close().await;
    (acked, refused)
}

/// Publishes `payload(marker)` to `topic` at `client` until acked.
pub(crate) async fn publish_marker(client: &Client, topic: &str, marker: u64) {
    let deadline = Instant::now() + MOVE_DEADLINE;
    while let Err(e) = client.publish_acked(topic, payload(marker)).await {
        assert!(
            Instant::now() < deadline,
            "{topic}: marker never acked: {e}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Everything `topic` holds from the start at broker `at`, up to `marker`.
async fn read_back(c: &TestCluster, at: &str, topic: &str, marker: u64) -> Vec<(u64, Position)> {
    let client = c.plain_client(at).await;
    let mut sub: Subscription = client
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("subscribe from the start");
    let mut got = Vec::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(15), sub.next_event()).await {
            Ok(Some(Ok(ev))) => {
                let i = index(&ev.payload);
                if i == marker {
                    break;
                }
                got.push((i, ev.position));
            }
            other => panic!(
                "{topic} at {at}: reading back stopped after {} events: {other:?}",
                got.len()
            ),
        }
    }
    drop(sub);
    client.close().await;
    got
}

/// Every acked index of `topic` is read back once, in order, at the same positions on every
/// broker of `at` (unacked publishes may be there too, each at most once).
pub(crate) async fn check_read_back(
    c: &TestCluster,
    at: &[String],
    topic: &str,
    acked: &[u64],
    marker: u64,
) {
    let mut first: Option<Vec<(u64, Position)>> = None;
    for id in at {
        let got = read_back(c, id, topic, marker).await;
        let seen: Vec<u64> = got.iter().map(|g| g.0).collect();
        let unique: BTreeSet<u64> = seen.iter().copied().collect();
        assert_eq!(
            unique.len(),
            seen.len(),
            "{topic} at {id}: a message read twice"
        );
        let acked_set: BTreeSet<u64> = acked.iter().copied().collect();
        let acked_seen: Vec<u64> = seen
            .iter()
            .copied()
            .filter(|i| acked_set.contains(i))
            .collect();
        assert_eq!(
            acked_seen, acked,
            "{topic} at {id}: every acked message once, in order"
        );
        assert!(
            got.windows(2)
                .all(|w| (w[0].1.stream, w[0].1.seq) < (w[1].1.stream, w[1].1.seq)),
            "{topic} at {id}: positions grow"
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert_eq!(&got, f, "{topic}: {id} and {} differ", at[0]),
        }
    }
}

/// A publisher over `topics` at `at`, with per-topic ack counts to wait on.
pub(crate) struct Publisher {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Acked>,
}

impl Publisher {
    async fn start(c: &TestCluster, at: &str, topics: &[String]) -> Publisher {
        Publisher::start_from(c, at, topics, 0).await
    }

    /// A publisher whose indexes start after `base` (distinct from another publisher's).
    pub(crate) async fn start_from(
        c: &TestCluster,
        at: &str,
        topics: &[String],
        base: u64,
    ) -> Publisher {
        let client = c.plain_client(at).await;
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(publish_until(
            client,
            topics.to_vec(),
            Arc::clone(&stop),
            base,
        ));
        Publisher { stop, task }
    }

    pub(crate) async fn finish(self) -> Acked {
        self.stop.store(true, Ordering::Release);
        self.task.await.expect("publisher")
    }
}

/// Five acked publishes per topic at `at` (indexes from `base`, outside the publisher's):
/// the topics run.
pub(crate) async fn some_publishes(c: &TestCluster, at: &str, topics: &[String], base: u64) {
    let client = c.plain_client(at).await;
    for (k, topic) in topics.iter().enumerate() {
        for j in 0..5 {
            publish_marker(&client, topic, base + (k as u64) * 100 + j).await;
        }
    }
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_3_5_3_moves_every_replica_set_to_its_placement_without_losing_an_acked_message() {
    let three = ["a", "b", "c"];
    let five = ["a", "b", "c", "d", "e"];
    let topics = moving_topics(&three, &five, 3);
    let mut c = TestCluster::start_replicated("replica-moves", &three, &["ledger.>"], 3).await;
    c.converge(&three).await;

    // Background publishes at `a` (a member throughout), and the topics created on a, b, c.
    let publisher = Publisher::start(&c, "a", &topics).await;
    some_publishes(&c, "b", &topics, 1 << 40).await;
    wait_placed(&c, &topics, &three).await;

    // 3 → 5.
    for id in ["d", "e"] {
        c.start_broker(id).await;
    }
    c.write_members(&five);
    c.converge(&five).await;
    wait_placed(&c, &topics, &five).await;
    some_publishes(&c, "c", &topics, 2 << 40).await;

    // 5 → 3: d and e leave the member list but keep running until their replicas moved.
    c.write_members(&three);
    c.converge(&three).await;
    wait_placed(&c, &topics, &three).await;
    // Every topic whose placement over five differs from its placement over three changed
    // twice (one whose three best brokers are the same among five did not move at all): each
    // change was started by some leader, or, when it came while the first move was still
    // dropping its last learners, taken over by that move (`retargeted`). Every started move
    // ends once: `completed` on the leader that saw the desired set reached, `failed` on one
    // that stopped leading first (a leader outside the new set steps down after the last
    // step, and its successor finds nothing to do). The leader counts its end at its next
    // check, after the placement above was seen.
    let moved = topics
        .iter()
        .filter(|t| ids(&placement(&five, t)) != ids(&placement(&three, t)))
        .count();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (started, retargeted, completed, failed) = loop {
        let mut n = [0.0; 4];
        for (k, outcome) in ["started", "retargeted", "completed", "failed"]
            .iter()
            .enumerate()
        {
            n[k] = c
                .metric_sum(
                    "starling_replica_moves_total",
                    &format!("outcome=\"{outcome}\""),
                )
                .await;
        }
        let counts = (n[0], n[1], n[2], n[3]);
        if counts.2 + counts.3 >= counts.0 || Instant::now() >= deadline {
            break counts;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    println!(
        "replica moves: {started} started, {retargeted} retargeted, {completed} completed, {failed} failed"
    );
    assert!(
        started + retargeted >= (2 * moved) as f64 && completed + failed == started,
        "moves counted: {started} started, {retargeted} retargeted, {completed} completed, \
         {failed} failed, for {moved} topics that moved"
    );
    c.stop("d").await;
    c.stop("e").await;

    let (acked, refused) = publisher.finish().await;
    let final_set: Vec<String> = three.iter().map(|s| (*s).to_string()).collect();
    let at_a = c.plain_client("a").await;
    for (k, topic) in topics.iter().enumerate() {
        let marker = (3 << 40) + k as u64;
        publish_marker(&at_a, topic, marker).await;
        let acked = acked.get(topic).cloned().unwrap_or_default();
        assert!(
            acked.len() >= 10,
            "{topic}: only {} publishes acked",
            acked.len()
        );
        check_read_back(&c, &final_set, topic, &acked, marker).await;
    }
    println!(
        "replica moves 3 → 5 → 3: acked {:?}, refused {refused}",
        acked
            .iter()
            .map(|(t, a)| (t.as_str(), a.len()))
            .collect::<Vec<_>>()
    );
    at_a.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_move_cut_short_by_a_leader_crash_is_finished_by_the_next_leader() {
    let three = ["a", "b", "c"];
    let four = ["a", "b", "c", "d"];
    let topics = moving_topics(&three, &four, 1);
    let topic = &topics[0];
    let mut c = TestCluster::start_replicated("replica-move-crash", &three, &["ledger.>"], 3).await;
    c.converge(&three).await;
    some_publishes(&c, "a", &topics, 1 << 40).await;
    wait_placed(&c, &topics, &three).await;

    c.start_broker("d").await;
    // Publishes at the joining member throughout (forwarded to the leader).
    let publisher = Publisher::start(&c, "d", &topics).await;
    c.write_members(&four);
    // The move begins (d joins as a learner): then its leader crashes.
    let d = replica_id("d");
    let deadline = Instant::now() + MOVE_DEADLINE;
    let leader = loop {
        let found = c.running.iter().find_map(|(id, b)| {
            b.replica_status(topic)
                .filter(|s| s.is_leader && (s.learners.contains(&d) || s.voters.contains(&d)))
                .map(|_| id.clone())
        });
        if let Some(id) = found {
            break id;
        }
        assert!(Instant::now() < deadline, "{topic}: the move never began");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    c.kill(&leader).await;
    // Back soon, with its files, like a restarted pod.
    c.start_broker(&leader).await;
    c.converge(&four).await;
    wait_placed(&c, &topics, &four).await;

    let (acked, refused) = publisher.finish().await;
    let final_set = placement(&four, topic);
    let client = c.plain_client(&final_set[0]).await;
    let marker = 3 << 40;
    publish_marker(&client, topic, marker).await;
    let acked = acked.get(topic.as_str()).cloned().unwrap_or_default();
    check_read_back(&c, &final_set, topic, &acked, marker).await;
    println!(
        "replica move with the leader ({leader}) crashed: acked {}, refused {refused}",
        acked.len()
    );
    client.close().await;
    c.shutdown().await;
}
