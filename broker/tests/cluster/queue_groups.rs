//! Queue groups in a cluster: a group is served by its topic's owner, so members that joined
//! at any broker share one copy of the topic's events (each event reaches one member, once).
//! A routing client is sent to the owner with `Moved`; a plain client's group subscription at
//! a broker that does not own the topic is refused with the owner named; and when the topic
//! moves, the group's members meet again at the new owner.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use starling_client::{ClientError, Subscription};
use starling_placement::Kind;
use starling_proto::ErrorCode;
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
    let mut got = vec![Vec::new(); members.len()];
    let deadline = Instant::now() + SOON;
    let mut settle: Option<Instant> = None;
    loop {
        let total: usize = got.iter().map(Vec::len).sum();
        if total >= want && settle.is_none() {
            settle = Some(Instant::now() + Duration::from_millis(500));
        }
        if settle.is_some_and(|s| Instant::now() >= s) {
            return got;
        }
        assert!(
            Instant::now() < deadline,
            "{total} of {want} events arrived"
        );
        for (i, m) in members.iter_mut().enumerate() {
            if let Ok(Some(Ok(event))) =
                tokio::time::timeout(Duration::from_millis(20), m.next_event()).await
            {
                got[i].push(index(&event.payload));
            }
        }
    }
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

    // A plain client at the broker that does not own the topic is told where the group is.
    let plain_at_a = cluster.plain_client("a").await;
    match plain_at_a.subscribe_group(&topic, GROUP).await {
        Err(ClientError::Server {
            code: ErrorCode::InvalidRequest,
            message,
        }) => assert!(message.contains(&cluster.addr("b")), "{message}"),
        other => panic!("expected InvalidRequest, got {:?}", other.map(|s| s.id())),
    }
    assert_eq!(
        cluster
            .metric("a", "starling_queue_group_refused_clustered_total", "")
            .await,
        1.0
    );

    // Routing clients bootstrapped at either broker, and a plain client at the owner.
    let routing_a = cluster.routing_client("a").await;
    let routing_b = cluster.routing_client("b").await;
    let plain_at_b = cluster.plain_client("b").await;
    let mut members = vec![
        routing_a
            .subscribe_group(&topic, GROUP)
            .await
            .expect("join"),
        routing_b
            .subscribe_group(&topic, GROUP)
            .await
            .expect("join"),
        plain_at_b
            .subscribe_group(&topic, GROUP)
            .await
            .expect("join"),
    ];
    assert_eq!(
        cluster
            .metric("b", "starling_queue_group_members", "")
            .await,
        3.0,
        "every member joined at the owner"
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

    // c joins and owns the topic: the group's subscriptions at b end with `Moved`, the routing
    // members join again at c; the plain member at b is refused there now (b no longer owns
    // the topic), so it gets nothing more rather than a second copy.
    cluster.start_broker("c").await;
    cluster.write_members(&["a", "b", "c"]);
    cluster.converge(&["a", "b", "c"]).await;
    let deadline = Instant::now() + SOON;
    while cluster
        .metric("c", "starling_queue_group_members", "")
        .await
        < 2.0
    {
        assert!(
            Instant::now() < deadline,
            "the routing members did not meet again at the new owner"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        cluster
            .metric("b", "starling_queue_group_members", "")
            .await,
        0.0,
        "no member is left at the old owner"
    );
    for i in ROUND..2 * ROUND {
        plain_at_a
            .publish_acked(&topic, payload(i))
            .await
            .expect("publish");
    }
    let got = collect(&mut members, ROUND as usize).await;
    once_each(&got, ROUND, 2 * ROUND);
    assert!(got[2].is_empty(), "the plain member at b: {:?}", got[2]);

    for c in [plain_at_a, routing_a, routing_b, plain_at_b] {
        c.close().await;
    }
    cluster.shutdown().await;
}
