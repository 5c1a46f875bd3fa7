//! Queue groups in the engine, on the paused clock: each batch of the topic goes to exactly
//! one member of each group while plain subscribers get every batch; members with equal room
//! take turns, a stalled member gets at most what its queue holds, a group whose members are
//! all full applies the slow-subscriber policy once for the group; a wildcard group gets each
//! batch of each matching topic once; and, under random joins, leaves, stalls and publishes
//! (proptest), no message reaches two members and every message published while the group had
//! a member was either delivered to one or counted as dropped.

use std::collections::HashSet;
use std::sync::Arc;

use proptest::prelude::*;
use starling_access::Pattern;
use starling_config::SlowSubscriberPolicy::{Block, DropNew};
use starling_proto::{Frame, StartAt};

use super::{Engine, Setup, Wire, number, payload, quiesce, within};
use crate::pubsub::counters::DropReason;
use crate::pubsub::subscriber::Subscriber;

const TOPIC: &str = "jobs";

/// The message numbers a wire received.
fn numbers(wire: &Wire) -> Vec<u64> {
    wire.events().iter().map(|(_, e)| number(e)).collect()
}

/// Publishes message `n` as its own batch and fans it out.
async fn publish_one(e: &Engine, topic: &str, n: u64) {
    e.publish(topic, vec![payload(n, 16)]).await;
    e.flush(topic).await;
}

/// Lets every queue drain (no wire is stalled).
async fn drain(e: &Engine) {
    within(e.topics.flush_all()).await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
}

/// Joins `n` members of group `group` of `TOPIC`.
async fn members(
    e: &mut Engine,
    group: &str,
    n: usize,
    capacity: usize,
) -> Vec<(Arc<Subscriber>, Arc<Wire>)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let (sub, wire) = e.subscriber_in(TOPIC, Some(group), DropNew, capacity, false);
        e.topics.reserve(TOPIC).expect("under max_topics");
        e.topics.subscribe(Arc::clone(&sub), StartAt::Live, false);
        out.push((sub, wire));
    }
    quiesce().await;
    out
}

#[tokio::test(start_paused = true)]
async fn each_batch_goes_to_one_member_and_plain_subscribers_get_every_one() {
    let mut e = Engine::new(Setup::default());
    let (_plain, plain_wire, _) = e
        .subscribe(TOPIC, Block, 1 << 12, StartAt::Live, false)
        .await;
    let group = members(&mut e, "workers", 4, 64).await;
    let other = members(&mut e, "audit", 1, 1 << 12).await;
    for n in 0..400 {
        publish_one(&e, TOPIC, n).await;
        quiesce().await;
    }
    drain(&e).await;
    let all: Vec<u64> = (0..400).collect();
    assert_eq!(
        numbers(&plain_wire),
        all,
        "a plain subscriber gets everything"
    );
    assert_eq!(
        numbers(&other[0].1),
        all,
        "a one-member group gets everything"
    );
    let mut seen = Vec::new();
    for (_, wire) in &group {
        let got = numbers(wire);
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
        // Equal room everywhere: a strict rotation.
        assert_eq!(got.len(), 100, "fair share");
        seen.extend(got);
    }
    seen.sort_unstable();
    assert_eq!(seen, all, "each message to exactly one member");
    assert_eq!(
        e.counters
            .group_events
            .load(std::sync::atomic::Ordering::Relaxed),
        800
    );
}

#[tokio::test(start_paused = true)]
async fn a_stalled_member_gets_at_most_its_queue_and_the_others_take_the_rest() {
    let mut e = Engine::new(Setup::default());
    let group = members(&mut e, "workers", 4, 8).await;
    group[0].1.stall(true);
    for n in 0..200 {
        publish_one(&e, TOPIC, n).await;
        quiesce().await;
    }
    let stalled_queue = group[0].0.queued();
    group[0].1.stall(false);
    drain(&e).await;
    let counts: Vec<usize> = group.iter().map(|(_, w)| numbers(w).len()).collect();
    assert!(
        counts[0] <= 8 + 1,
        "the stalled member got {counts:?} ({stalled_queue} queued)"
    );
    assert_eq!(counts.iter().sum::<usize>(), 200, "{counts:?}");
    assert!(counts[1..].iter().all(|&c| c >= 60), "{counts:?}");
    assert_eq!(
        e.counters.dropped(DropReason::QueueFullNew),
        0,
        "nothing dropped"
    );
}

#[tokio::test(start_paused = true)]
async fn a_group_whose_members_are_all_full_drops_under_drop_new() {
    let mut e = Engine::new(Setup::default());
    let group = members(&mut e, "workers", 2, 2).await;
    for (_, wire) in &group {
        wire.stall(true);
    }
    for n in 0..20 {
        publish_one(&e, TOPIC, n).await;
        quiesce().await;
    }
    for (_, wire) in &group {
        wire.stall(false);
    }
    drain(&e).await;
    let got: usize = group.iter().map(|(_, w)| numbers(w).len()).sum();
    let dropped = e.counters.dropped(DropReason::QueueFullNew);
    assert!(dropped > 0);
    assert_eq!(
        got as u64 + dropped,
        20,
        "each message taken once or dropped once"
    );
    assert_eq!(
        e.counters
            .group_dropped_events
            .load(std::sync::atomic::Ordering::Relaxed),
        dropped
    );
}

#[tokio::test(start_paused = true)]
async fn under_block_a_full_group_waits_for_any_member_not_a_stuck_one() {
    let mut e = Engine::new(Setup::default());
    let mut group = Vec::new();
    for _ in 0..2 {
        let (sub, wire) = e.subscriber_in(TOPIC, Some("workers"), Block, 1, false);
        e.topics.subscribe(Arc::clone(&sub), StartAt::Live, false);
        group.push((sub, wire));
    }
    quiesce().await;
    // Member 0 never reads again; member 1 stops for a while: both queues fill, and the
    // round-robin's next choice is member 0, the stuck one.
    group[0].1.stall(true);
    group[1].1.stall(true);
    let topics = Arc::clone(&e.topics);
    let publisher = tokio::spawn(async move {
        for n in 0..40 {
            topics.reserve(TOPIC).expect("under max_topics");
            let msg = crate::pubsub::topic::TopicMsg {
                payloads: vec![payload(n, 16)],
                headers: Vec::new(),
                ack: None,
                origin: None,
                hold: None,
            };
            topics.publish(TOPIC, msg).await;
            topics.flush(TOPIC).await;
        }
    });
    for _ in 0..8 {
        quiesce().await;
    }
    assert!(
        !publisher.is_finished(),
        "both members are full: the topic waits"
    );
    // Member 1 reads again: the topic goes on through it alone.
    group[1].1.stall(false);
    within(publisher).await.expect("publisher");
    drain_all_but_stuck(&e).await;
    // The stuck member holds what its writer took and its one queue slot; member 1 got the
    // rest.
    let stuck = 40 - numbers(&group[1].1).len();
    assert!(stuck <= 2, "the stuck member holds {stuck}");
    group[0].1.stall(false);
    drain(&e).await;
    let mut all: Vec<u64> = group.iter().flat_map(|(_, w)| numbers(w)).collect();
    all.sort_unstable();
    assert_eq!(all, (0..40).collect::<Vec<_>>(), "nothing lost under block");
}

/// Lets the lanes write what they can (a stalled wire keeps its batches).
async fn drain_all_but_stuck(e: &Engine) {
    within(e.topics.flush_all()).await;
    for _ in 0..8 {
        quiesce().await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_wildcard_group_gets_each_message_of_each_matching_topic_once() {
    let mut e = Engine::new(Setup::default());
    let pattern = Pattern::parse("jobs.>").expect("pattern");
    let mut wires = Vec::new();
    for _ in 0..2 {
        let (sub, wire) = e.subscriber_in("jobs.>", Some("w"), DropNew, 64, false);
        e.topics.subscribe_pattern(sub, pattern.clone());
        wires.push(wire);
    }
    quiesce().await;
    for n in 0..40 {
        let topic = if n % 2 == 0 { "jobs.a" } else { "jobs.b.c" };
        e.topics.reserve(topic).expect("under max_topics");
        publish_one(&e, topic, n).await;
    }
    publish_one(&e, "other", 99).await;
    drain(&e).await;
    let mut seen = Vec::new();
    for wire in &wires {
        let frames = wire.frames();
        // Every EventBatch comes right after its BatchTopic.
        for pair in frames.chunks(2) {
            assert!(matches!(pair[0], Frame::BatchTopic(_)), "{pair:?}");
            assert!(matches!(pair[1], Frame::EventBatch(_)), "{pair:?}");
        }
        let got = numbers(wire);
        assert!(!got.is_empty(), "both members get some");
        seen.extend(got);
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..40).collect::<Vec<_>>());
}

#[derive(Debug, Clone)]
enum Op {
    Publish(u8),
    Join { capacity: u8 },
    Leave(u8),
    Stall(u8, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (1u8..4).prop_map(Op::Publish),
        2 => (1u8..6).prop_map(|capacity| Op::Join { capacity }),
        1 => any::<u8>().prop_map(Op::Leave),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(w, on)| Op::Stall(w, on)),
    ]
}

struct Member {
    sub: Arc<Subscriber>,
    wire: Arc<Wire>,
    left: bool,
}

async fn run(ops: Vec<Op>) {
    let mut e = Engine::new(Setup::default());
    let (_plain, plain_wire, _) = e
        .subscribe(TOPIC, Block, 1 << 16, StartAt::Live, false)
        .await;
    let mut group: Vec<Member> = Vec::new();
    let (mut published, mut with_members) = (0u64, 0u64);
    for op in ops {
        let live: Vec<usize> = (0..group.len()).filter(|&i| !group[i].left).collect();
        match op {
            Op::Publish(count) => {
                let payloads = (0..u64::from(count))
                    .map(|i| payload(published + i, 16))
                    .collect();
                published += u64::from(count);
                if !live.is_empty() {
                    with_members += u64::from(count);
                }
                e.publish(TOPIC, payloads).await;
                e.flush(TOPIC).await;
                quiesce().await;
            }
            Op::Join { capacity } => {
                let (sub, wire) =
                    e.subscriber_in(TOPIC, Some("g"), DropNew, usize::from(capacity), false);
                e.topics.subscribe(Arc::clone(&sub), StartAt::Live, false);
                group.push(Member {
                    sub,
                    wire,
                    left: false,
                });
                quiesce().await;
            }
            Op::Leave(which) => {
                if let Some(&i) = live.get(usize::from(which) % live.len().max(1)) {
                    // What it was given is written first, so every event is accounted for.
                    group[i].wire.stall(false);
                    within(group[i].sub.wait_empty()).await;
                    quiesce().await;
                    e.topics.unsubscribe(&group[i].sub);
                    group[i].left = true;
                    quiesce().await;
                }
            }
            Op::Stall(which, on) => {
                if let Some(&i) = live.get(usize::from(which) % live.len().max(1)) {
                    group[i].wire.stall(on);
                    quiesce().await;
                }
            }
        }
    }
    for m in &group {
        m.wire.stall(false);
    }
    drain(&e).await;
    assert_eq!(
        numbers(&plain_wire),
        (0..published).collect::<Vec<_>>(),
        "the plain subscriber gets every message, in order"
    );
    let mut seen = HashSet::new();
    for m in &group {
        let got = numbers(&m.wire);
        assert!(got.windows(2).all(|w| w[0] < w[1]), "in order: {got:?}");
        for n in got {
            assert!(seen.insert(n), "message {n} reached two members");
        }
    }
    let dropped = e.counters.dropped(DropReason::QueueFullNew);
    assert_eq!(
        e.counters.dropped(DropReason::SubscriberClosed),
        0,
        "leavers were drained first"
    );
    assert_eq!(
        seen.len() as u64 + dropped,
        with_members,
        "every message published while the group had a member was taken once or dropped once"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn every_message_reaches_at_most_one_member_under_churn(
        ops in proptest::collection::vec(op(), 1..60)
    ) {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        rt.block_on(run(ops));
    }
}
