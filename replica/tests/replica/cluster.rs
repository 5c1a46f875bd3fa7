//! A replicated topic's behaviour on the simulated network, case by case: publish and read
//! back on every replica (R3 and R1), a typed refusal from a non-leader, a replica re-joining
//! with an empty volume caught up through a snapshot, membership 3 → 5 → 3, and a leader
//! power cut with no acknowledged publish lost. Simulated time (tokio's paused clock).

use std::time::Duration;

use crate::common::{Checker, Cluster, node, test_config};
use starling_replica::{ReplicaConfig, ReplicaError};

const SEC: Duration = Duration::from_secs(1);

fn msgs(tag: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|k| format!("{tag}-{k}").into_bytes()).collect()
}

async fn publish_n(c: &Cluster, checker: &mut Checker, tag: &str, n: usize) -> u64 {
    let mut last = 0;
    for i in 0..n {
        let m = msgs(&format!("{tag}{i}"), 2);
        let index = c.publish(m.clone(), 5 * SEC).await.unwrap();
        checker.ack(index, m);
        last = index;
    }
    last
}

async fn check_all(c: &Cluster, checker: &mut Checker, upto: u64) {
    for id in c.live() {
        let t = c.topic(id);
        t.wait_applied(upto, 10 * SEC).await.unwrap();
        checker.check_complete(id, &t);
    }
}

#[tokio::test(start_paused = true)]
async fn r3_publish_is_read_back_on_every_replica() {
    let c = Cluster::start(1, &[1, 2, 3], test_config()).await;
    c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    let last = publish_n(&c, &mut checker, "a", 30).await;
    check_all(&c, &mut checker, last).await;
    assert_eq!(checker.acked.len(), 30);
}

/// `TopicStatus::matched`: the leader knows how far each replica's log reaches (itself
/// included), the other replicas know nothing of it.
#[tokio::test(start_paused = true)]
async fn the_leader_reports_each_replicas_progress() {
    let c = Cluster::start(4, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    let last = publish_n(&c, &mut checker, "a", 5).await;
    check_all(&c, &mut checker, last).await;
    tokio::time::sleep(SEC).await;
    let matched = c.topic(leader).status().matched;
    assert_eq!(matched.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3]);
    for (id, index) in &matched {
        assert!(index.is_some_and(|i| i >= last), "{id}: {index:?} < {last}");
    }
    for id in c.live().into_iter().filter(|id| *id != leader) {
        assert!(c.topic(id).status().matched.is_empty(), "{id}");
    }
}

#[tokio::test(start_paused = true)]
async fn r1_publish_is_read_back() {
    let c = Cluster::start(2, &[1], test_config()).await;
    c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    let last = publish_n(&c, &mut checker, "a", 10).await;
    check_all(&c, &mut checker, last).await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_refuses_with_the_leader() {
    let c = Cluster::start(3, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    // Followers learn the leader from its first heartbeat.
    tokio::time::sleep(SEC).await;
    let follower = c.live().into_iter().find(|&id| id != leader).unwrap();
    match c.topic(follower).publish(msgs("x", 1)).await {
        Err(ReplicaError::NotLeader { leader: l }) => assert_eq!(l, Some(leader)),
        other => panic!("expected NotLeader, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn an_empty_volume_rejoins_under_the_same_id() {
    let mut c = Cluster::start(4, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    publish_n(&c, &mut checker, "a", 20).await;
    let victim = c.live().into_iter().find(|&id| id != leader).unwrap();
    c.wipe(victim).await;
    // Enough entries while it is away that the leader snapshots and purges past them.
    let last = publish_n(&c, &mut checker, "b", 100).await;
    c.boot(victim).await;
    assert!(c.topic(victim).is_catching_up());
    check_all(&c, &mut checker, last).await;
    let status = c.topic(victim).status();
    assert!(status.voters.contains(&victim));
    // Caught up: the next append from the leader lifts its vote guard.
    tokio::time::sleep(SEC).await;
    assert!(!c.topic(victim).is_catching_up());
}

/// Three replicas; entries acknowledged by the leader and one follower while the other
/// follower is cut off; then that follower's volume is lost and the leader goes down. The
/// cut-off follower and the emptied one must not elect a leader (it would lack acknowledged
/// entries): the emptied replica drops vote requests until it caught up. When the old
/// leader returns, a leader with every acknowledged entry is elected and all catch up.
#[tokio::test(start_paused = true)]
async fn an_emptied_replica_does_not_elect_a_leader_missing_acked_entries() {
    let mut c = Cluster::start(7, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    publish_n(&c, &mut checker, "a", 10).await;
    let others: Vec<_> = c.live().into_iter().filter(|&id| id != leader).collect();
    let (behind, emptied) = (others[0], others[1]);
    c.net.isolate(behind, &c.ids());
    publish_n(&c, &mut checker, "b", 10).await;
    c.wipe(emptied).await;
    c.crash(leader, true).await;
    c.net.heal();
    c.boot(emptied).await;
    tokio::time::sleep(5 * SEC).await;
    assert_eq!(
        c.leader(),
        None,
        "a leader without the acknowledged entries was elected"
    );
    c.boot(leader).await;
    c.await_leader(10 * SEC).await.unwrap();
    let last = publish_n(&c, &mut checker, "c", 3).await;
    check_all(&c, &mut checker, last).await;
}

#[tokio::test(start_paused = true)]
async fn membership_three_five_three() {
    let mut c = Cluster::start(5, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    publish_n(&c, &mut checker, "a", 50).await;
    for id in [4, 5] {
        c.boot_new(id).await;
        c.topic(leader).add_replica(id, node(id)).await.unwrap();
    }
    assert_eq!(c.topic(leader).status().voters.len(), 5);
    let last = publish_n(&c, &mut checker, "b", 10).await;
    check_all(&c, &mut checker, last).await;
    for id in [4, 5] {
        c.topic(leader).remove_replica(id).await.unwrap();
        c.retire(id).await;
    }
    assert_eq!(c.topic(leader).status().voters.len(), 3);
    let last = publish_n(&c, &mut checker, "c", 10).await;
    check_all(&c, &mut checker, last).await;
}

#[tokio::test(start_paused = true)]
async fn leader_power_cut_loses_no_ack() {
    let mut c = Cluster::start(6, &[1, 2, 3], test_config()).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let mut checker = Checker::default();
    publish_n(&c, &mut checker, "a", 25).await;
    c.crash(leader, true).await;
    let new = c.await_leader(10 * SEC).await.unwrap();
    assert_ne!(new, leader);
    publish_n(&c, &mut checker, "b", 5).await;
    c.boot(leader).await;
    let last = publish_n(&c, &mut checker, "c", 5).await;
    check_all(&c, &mut checker, last).await;
}

#[tokio::test(start_paused = true)]
async fn a_follower_far_behind_is_caught_up_through_frames_too_small_for_one_append() {
    // 64 entries of about 6 KiB each per append would be ~400 KiB: over a 64 KiB frame. The
    // library is told the payload is too large and sends fewer entries at a time. No
    // snapshot (it would bypass the appends).
    let config = ReplicaConfig {
        snapshot_every: 100_000,
        ..test_config()
    }
    .within_frame(64 * 1024);
    let c = Cluster::start(6, &[1, 2, 3], config).await;
    let leader = c.await_leader(5 * SEC).await.unwrap();
    let behind = c.live().into_iter().find(|&id| id != leader).unwrap();
    c.net.isolate(behind, &c.ids());
    let mut checker = Checker::default();
    let mut last = 0;
    for i in 0..60 {
        let m = vec![vec![(i % 251) as u8; 1500]];
        last = c.publish(m.clone(), 5 * SEC).await.unwrap();
        checker.ack(last, m);
    }
    c.net.heal();
    let t = c.topic(behind);
    t.wait_applied(last, 30 * SEC).await.unwrap();
    checker.check_complete(behind, &t);
}
