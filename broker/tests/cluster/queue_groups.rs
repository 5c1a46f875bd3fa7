//! Queue groups in a cluster: a group is served by its topic's owner, so members that joined
//! at any broker share one copy of the topic's events (each event reaches one member, once).
//! A routing client is sent to the owner with `Moved`; a plain client's group subscription at
//! a broker that does not own the topic is fed from the owner (`cluster::fan_in`); and when the
//! topic moves, the routing members meet again at the new owner while the plain ones are fed
//! from it.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use starling_client::Subscription;
use starling_placement::Kind;
use starling_testkit::payload::{index, payload};

use crate::harness::{SOON, TestCluster};

const GROUP: &str = "workers";
const ROUND: u32 = 60;

/// A topic owned by `b` among a and b, and by `c` once c joins.
fn moving_topic() -> String {
    (0..100_000)
        .map(|i| format!("jobs-{i}"))
        .find(|t| {
            let owner = |ids: &[&str]| {
                starling_placement::owner(ids.iter().copied(), Kind::Topic, t.as_bytes())
                    .map(str::to_string)
            };
            owner(&["a", "b"]).as_deref() == Some("b")
                && owner(&["a", "b", "c"]).as_deref() == Some("c")
        })
        .expect("some topic moves from b to c")
}

/// Receives from every member until `want` events arrived in all (failing after `SOON`), then
/// a moment more, so a duplicate would show; returns each member's indexes.
async fn collect(members: &mut [Subscription], want: usize) -> Vec<Vec<u32>> {
    crate::collect_each(members, want, |e| index(&e.payload)).await
}

/// Every index of `from..to` exactly once over all members.
fn once_each(got: &[Vec<u32>], from: u32, to: u32) {
    let all: Vec<u32> = got.iter().flatten().copied().collect();
    let distinct: HashSet<u32> = all.iter().copied().collect();
    assert_eq!(
        all.len(),
        distinct.len(),
        "an event reached the group twice: {got:?}"
    );
    assert_eq!(distinct, (from..to).collect::<HashSet<_>>(), "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queue_group_is_served_by_the_owner_for_members_at_every_broker() {
    let mut cluster = TestCluster::start("groups", &["a", "b"]).await;
    let topic = moving_topic();

    // Routing clients bootstrapped at either broker, a plain client at the owner (b) and one
    // at the other broker (a), fed from the owner.
    let routing_a = cluster.routing_client("a").await;
    let routing_b = cluster.routing_client("b").await;
    let plain_at_a = cluster.plain_client("a").await;
    let plain_at_b = cluster.plain_client("b").await;
    let mut members = Vec::new();
    for c in [&routing_a, &routing_b, &plain_at_b, &plain_at_a] {
        members.push(c.subscribe_group(&topic, GROUP).await.expect("join"));
    }
    assert_eq!(
        cluster
            .metric("b", "starling_queue_group_members", "")
            .await,
        4.0,
        "every member is one of the owner's group (the plain one at a through a's feed)"
    );
    assert_eq!(
        cluster
            .metric("a", "starling_cluster_forwarded_total", "op=\"feed\"")
            .await,
        1.0,
        "a feeds its plain member from the owner"
    );
    // Published at a, which forwards to the owner.
    for i in 0..ROUND {
        plain_at_a
            .publish_acked(&topic, payload(i))
            .await
            .expect("publish");
    }
    let got = collect(&mut members, ROUND as usize).await;
    once_each(&got, 0, ROUND);

    // c joins and owns the topic: the routing members' subscriptions at b end with `Moved`
    // and they join again at c; the plain members at a and b are fed from c (b's own group no
    // longer gets the topic's events: only the owner serves a group).
    cluster.start_broker("c").await;
    cluster.write_members(&["a", "b", "c"]);
    cluster.converge(&["a", "b", "c"]).await;
    let deadline = Instant::now() + SOON;
    while cluster
        .metric("c", "starling_queue_group_members", "")
        .await
        < 4.0
    {
        assert!(
            Instant::now() < deadline,
            "the members did not meet again at the new owner"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in ROUND..2 * ROUND {
        plain_at_a
            .publish_acked(&topic, payload(i))
            .await
            .expect("publish");
    }
    let got = collect(&mut members, ROUND as usize).await;
    once_each(&got, ROUND, 2 * ROUND);

    for c in [plain_at_a, routing_a, routing_b, plain_at_b] {
        c.close().await;
    }
    cluster.shutdown().await;
}
