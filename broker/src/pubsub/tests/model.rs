//! Randomised operation sequences (proptest) against a reference model of one topic.
//!
//! **At the owner**: publishes, live and resuming subscribers (from any position the topic
//! numbered, one past the end, or a sequence number it never reached), each slow-subscriber
//! policy with stalled readers, a blocked reader pushing back its publisher, unsubscribes,
//! owner changes (new streams; a late batch at a former owner), clock advances (delay-sealed
//! batches), and the drain's end of every subscriber. A witness subscriber, live from the start
//! and never slow, records the topic's history; the model checks every other subscriber
//! against it:
//! - positions strictly increase (streams ascend; within a stream, sequence numbers ascend),
//!   and the witness saw every message exactly once, in publication order;
//! - a `block` subscriber gets exactly the history from where it started (live: after its
//!   subscription; resuming: the first event at or after its position), no gap, no repeat
//!   (a resumed batch may start before the position: only those events come before it);
//! - a `drop_new` or `drop_old` subscriber gets part of it, in order, without repeats, and the
//!   events all of them miss add up to the dropped events counted.
//!
//! **At a relay** (another member owns the topic): runs of the owner's events relayed with
//! overlaps (an upstream resubscribing replays from where it stood), live and resuming
//! subscribers, including ones from before the relay's tail, which the topic holds back and
//! the model feeds from the owner's history in runs, interleaved with newer relayed runs,
//! until they join. Every subscriber gets the owner's history from where it started, in
//! order, each event once after dropping repeats the way the client does.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;
use starling_config::SlowSubscriberPolicy;
use starling_proto::{Position, StartAt};
use tokio::sync::oneshot;

use super::{Engine, Setup, Wire, number, payload, within};
use crate::pubsub::counters::DropReason;
use crate::pubsub::subscriber::Subscriber;
use crate::pubsub::topic::CaughtUp;

const TOPIC: &str = "model";

/// Where a subscriber starts, relative to the history at the time.
#[derive(Debug, Clone)]
enum Start {
    Live,
    /// The position of the event `back` events before the end (clamped to the oldest).
    Back(u16),
    /// One past the last event.
    End,
    /// A sequence number the current stream never reached.
    Beyond(u8),
}

#[derive(Debug, Clone)]
enum Op {
    Publish {
        count: u8,
        len: u16,
    },
    Subscribe {
        policy: u8,
        capacity: u8,
        start: Start,
    },
    Unsubscribe {
        which: u8,
    },
    Stall {
        which: u8,
        on: bool,
    },
    PushBack {
        which: u8,
        count: u8,
    },
    Flush,
    OwnerChange {
        owns: bool,
    },
    Advance {
        secs: u8,
    },
}

fn start() -> impl Strategy<Value = Start> {
    prop_oneof![
        3 => Just(Start::Live),
        3 => (0u16..64).prop_map(Start::Back),
        1 => Just(Start::End),
        1 => (1u8..9).prop_map(Start::Beyond),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (1u8..6, 8u16..600).prop_map(|(count, len)| Op::Publish { count, len }),
        3 => (0u8..3, 1u8..5, start())
            .prop_map(|(policy, capacity, start)| Op::Subscribe { policy, capacity, start }),
        1 => any::<u8>().prop_map(|which| Op::Unsubscribe { which }),
        2 => (any::<u8>(), any::<bool>()).prop_map(|(which, on)| Op::Stall { which, on }),
        1 => (any::<u8>(), 1u8..4).prop_map(|(which, count)| Op::PushBack { which, count }),
        1 => Just(Op::Flush),
        1 => any::<bool>().prop_map(|owns| Op::OwnerChange { owns }),
        1 => (1u8..3).prop_map(|secs| Op::Advance { secs }),
    ]
}

fn policy(n: u8) -> SlowSubscriberPolicy {
    match n % 3 {
        0 => SlowSubscriberPolicy::Block,
        1 => SlowSubscriberPolicy::DropNew,
        _ => SlowSubscriberPolicy::DropOld,
    }
}

/// A subscriber of the model and where it started in the witness's history.
struct Tracked {
    sub: Arc<Subscriber>,
    wire: Arc<Wire>,
    policy: SlowSubscriberPolicy,
    capacity: usize,
    /// Index in the history of its first expected event.
    from: usize,
    /// The resume position, if it resumed.
    resume: Option<Position>,
    /// Unsubscribed when the history had this many events.
    until: Option<usize>,
}

/// The witness's history: every event's position and message number, checked for order.
fn history(witness: &Wire) -> Vec<(Position, u64)> {
    let events: Vec<(Position, u64)> = witness
        .events()
        .iter()
        .map(|(p, e)| (*p, number(e)))
        .collect();
    for pair in events.windows(2) {
        assert!(
            (pair[0].0.stream, pair[0].0.seq) < (pair[1].0.stream, pair[1].0.seq),
            "positions go back: {pair:?}"
        );
    }
    events
}

/// Where each batch starts in the witness's history (it gets every live batch as one frame).
fn batch_starts(witness: &Wire) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    for frame in witness.frames() {
        if let starling_proto::Frame::EventBatch(b) = frame {
            starts.push(at);
            at += b.events.len();
        }
    }
    starts
}

/// The first index of `history` at or after `p`.
fn index_of(history: &[(Position, u64)], p: Position) -> usize {
    history
        .iter()
        .position(|(q, _)| (q.stream, q.seq) >= (p.stream, p.seq))
        .unwrap_or(history.len())
}

/// Flushes the topic and waits until the witness has written everything.
async fn settle(engine: &Engine, witness: &Subscriber) {
    engine.flush(TOPIC).await;
    within(witness.wait_empty()).await;
    tokio::task::yield_now().await;
}

async fn run_owner(ops: Vec<Op>) {
    let mut engine = Engine::new(Setup::default());
    let block = SlowSubscriberPolicy::Block;
    let (witness, witness_wire, _) = engine
        .subscribe(TOPIC, block, 1 << 16, StartAt::Live, false)
        .await;
    let mut subs: Vec<Tracked> = Vec::new();
    let mut published = 0u64;
    for op in ops {
        match op {
            Op::Publish { count, len } => {
                let payloads = (0..count)
                    .map(|i| payload(published + u64::from(i), usize::from(len)))
                    .collect();
                published += u64::from(count);
                engine.publish(TOPIC, payloads).await;
            }
            Op::Subscribe {
                policy: p,
                capacity,
                start,
            } => {
                // Quiescent first: what was published before is delivered before it joins.
                settle(&engine, &witness).await;
                let h = history(&witness_wire);
                let (start_at, from, resume) = match (start, h.last()) {
                    (Start::Live, _) | (_, None) => (StartAt::Live, h.len(), None),
                    (Start::Back(back), Some(_)) => {
                        let i = h.len().saturating_sub(1 + usize::from(back));
                        let p = h[i].0;
                        (StartAt::Position(p), i, Some(p))
                    }
                    (Start::End, Some((last, _))) => {
                        let p = Position {
                            stream: last.stream,
                            seq: last.seq + 1,
                        };
                        (StartAt::Position(p), h.len(), Some(p))
                    }
                    (Start::Beyond(n), Some((last, _))) => {
                        let p = Position {
                            stream: last.stream,
                            seq: last.seq + 1 + u64::from(n),
                        };
                        (StartAt::Position(p), h.len(), Some(p))
                    }
                };
                let policy = policy(p);
                let (sub, wire, _) = engine
                    .subscribe(TOPIC, policy, usize::from(capacity), start_at, false)
                    .await;
                subs.push(Tracked {
                    sub,
                    wire,
                    policy,
                    capacity: usize::from(capacity),
                    from,
                    resume,
                    until: None,
                });
            }
            Op::Unsubscribe { which } => {
                // Only `block` subscribers leave early: a dropping one's misses must all be
                // counted against queue drops at the end.
                let live: Vec<usize> = (0..subs.len())
                    .filter(|&i| subs[i].until.is_none() && subs[i].policy == block)
                    .collect();
                if let Some(&i) = live.get(usize::from(which) % live.len().max(1)) {
                    settle(&engine, &witness).await;
                    subs[i].until = Some(history(&witness_wire).len());
                    subs[i].wire.stall(false);
                    engine.topics.unsubscribe(&subs[i].sub);
                }
            }
            Op::Stall { which, on } => {
                // A stalled `block` reader would hold the topic (and this test) until
                // released: that is `PushBack`.
                let dropping: Vec<usize> = (0..subs.len())
                    .filter(|&i| subs[i].until.is_none() && subs[i].policy != block)
                    .collect();
                if let Some(&i) = dropping.get(usize::from(which) % dropping.len().max(1)) {
                    subs[i].wire.stall(on);
                }
            }
            Op::PushBack { which, count } => {
                let blocking: Vec<usize> = (0..subs.len())
                    .filter(|&i| subs[i].until.is_none() && subs[i].policy == block)
                    .collect();
                let Some(&i) = blocking.get(usize::from(which) % blocking.len().max(1)) else {
                    continue;
                };
                // A reader that stops reading: its parked write holds one batch, its queue
                // fills, and then the topic (and so its publisher) waits for it.
                settle(&engine, &witness).await;
                subs[i].wire.stall(true);
                while subs[i].sub.queued() < subs[i].capacity {
                    engine.publish(TOPIC, vec![payload(published, 32)]).await;
                    published += 1;
                    engine.flush(TOPIC).await;
                }
                let topics = Arc::clone(&engine.topics);
                let first = published;
                let more = u64::from(count);
                published += more;
                let pushed_back = tokio::spawn(async move {
                    for n in first..first + more {
                        let msg = crate::pubsub::topic::TopicMsg {
                            payloads: vec![payload(n, 32)],
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
                    tokio::task::yield_now().await;
                }
                assert!(
                    !pushed_back.is_finished(),
                    "a full `block` queue pushes back"
                );
                subs[i].wire.stall(false);
                within(pushed_back).await.expect("publisher");
            }
            Op::Flush => engine.flush(TOPIC).await,
            Op::OwnerChange { owns } => {
                settle(&engine, &witness).await;
                engine.change_owner(owns);
            }
            Op::Advance { secs } => {
                tokio::time::advance(Duration::from_secs(u64::from(secs))).await;
            }
        }
    }
    // The drain: readers read again, the topic is flushed, and every subscriber's sink is
    // finished after everything queued to it.
    for t in &subs {
        t.wire.stall(false);
    }
    settle(&engine, &witness).await;
    within(engine.counters.wait_queues_empty()).await;
    within(witness.end().wait()).await;
    for t in &subs {
        within(t.sub.end().wait()).await;
        assert!(
            t.wire.finished() || t.until.is_some(),
            "a sink left unfinished"
        );
    }
    check_owner(&engine, &witness_wire, &subs, published);
}

fn check_owner(engine: &Engine, witness: &Wire, subs: &[Tracked], published: u64) {
    let h = history(witness);
    let numbers: Vec<u64> = h.iter().map(|(_, n)| *n).collect();
    assert_eq!(
        numbers,
        (0..published).collect::<Vec<_>>(),
        "the witness saw every message once, in order"
    );
    let starts = batch_starts(witness);
    let mut missed = 0u64;
    for (k, t) in subs.iter().enumerate() {
        let got: Vec<(Position, u64)> = t
            .wire
            .events()
            .iter()
            .map(|(p, e)| (*p, number(e)))
            .collect();
        for pair in got.windows(2) {
            assert!(
                (pair[0].0.stream, pair[0].0.seq) < (pair[1].0.stream, pair[1].0.seq),
                "subscriber {k}: repeated or out of order: {pair:?}"
            );
        }
        // Where its events start: live, after its subscription; resuming, the whole batch
        // holding its position (a resumed batch is sent whole; the client drops the events
        // before its position), or the live events after it for a position not reached yet.
        let from = match t.resume {
            None => t.from,
            Some(p) => {
                let at = index_of(&h, p);
                let batch = starts.iter().rev().find(|&&s| s <= at).copied();
                batch.filter(|_| at < h.len()).unwrap_or(at).min(t.from)
            }
        };
        let until = t.until.unwrap_or(h.len());
        let expected = &h[from.min(until)..until];
        for e in &got {
            assert!(
                h.contains(e),
                "subscriber {k}: {e:?} is not in the topic's history"
            );
        }
        match (t.policy, t.until) {
            (SlowSubscriberPolicy::Block, None) => {
                assert_eq!(
                    got, expected,
                    "subscriber {k} (block) lost or gained events"
                );
            }
            (SlowSubscriberPolicy::Block, Some(_)) => {
                assert!(
                    expected.starts_with(&got),
                    "subscriber {k} (block, unsubscribed) got more than its history"
                );
            }
            (_, _) => {
                let in_range = got.iter().filter(|e| expected.contains(e)).count();
                assert_eq!(
                    in_range,
                    got.len(),
                    "subscriber {k}: events outside its range"
                );
                missed += (expected.len() - got.len()) as u64;
            }
        }
    }
    let c = &engine.counters;
    let counted = c.dropped(DropReason::QueueFullNew)
        + c.dropped(DropReason::QueueFullOld)
        + c.dropped(DropReason::QueueBudget);
    assert_eq!(
        missed, counted,
        "every event a subscriber missed is counted"
    );
    assert_eq!(c.queued_batches(), 0);
    assert_eq!(
        engine.lanes.queue_budget.used(),
        0,
        "the queue budget is given back"
    );
}

fn paused_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn at_the_owner_every_subscriber_gets_its_history(ops in proptest::collection::vec(op(), 1..60)) {
        paused_runtime().block_on(run_owner(ops));
    }
}

// ---- At a relay ----

/// The owner's history: stream 100 (seq 0..150), then stream 200 (seq 0..250).
fn owner_history() -> Vec<Position> {
    let mut h: Vec<Position> = (0..150).map(|seq| Position { stream: 100, seq }).collect();
    h.extend((0..250).map(|seq| Position { stream: 200, seq }));
    h
}

#[derive(Debug, Clone)]
enum RelayOp {
    Relay { overlap: u8, count: u8 },
    Subscribe { start: Option<u16> },
    Feed { which: u8, count: u8 },
}

fn relay_op() -> impl Strategy<Value = RelayOp> {
    prop_oneof![
        4 => (0u8..6, 1u8..20).prop_map(|(overlap, count)| RelayOp::Relay { overlap, count }),
        2 => proptest::option::of(0u16..400).prop_map(|start| RelayOp::Subscribe { start }),
        3 => (any::<u8>(), 1u8..12).prop_map(|(which, count)| RelayOp::Feed { which, count }),
    ]
}

/// A relay subscriber: where it started in the owner's history, and its catch-up.
struct RelaySub {
    sub: Arc<Subscriber>,
    wire: Arc<Wire>,
    from: usize,
    /// Held back: the next index of the owner's history to feed it.
    behind: Option<usize>,
    pending: Option<oneshot::Receiver<Position>>,
}

/// The owner's events `from..to` (one stream at most) as a relayed run.
fn run_of(owner: &[Position], from: usize, to: usize) -> (Position, Vec<Bytes>) {
    let stream = owner[from].stream;
    let to = (from..to)
        .find(|&i| owner[i].stream != stream)
        .unwrap_or(to);
    let payloads = (from..to).map(|i| payload(i as u64, 24)).collect();
    (owner[from], payloads)
}

async fn feed(engine: &Engine, owner: &[Position], s: &mut RelaySub, count: usize) {
    let Some(at) = s.behind else { return };
    let (origin, payloads) = if at >= owner.len() {
        (owner[owner.len() - 1], Vec::new())
    } else {
        run_of(owner, at, (at + count).min(owner.len()))
    };
    let fed = payloads.len();
    let answer = within(engine.topics.catch_up(TOPIC, s.sub.id, origin, payloads)).await;
    s.behind = match answer {
        CaughtUp::Behind => Some(at + fed),
        CaughtUp::Joined => None,
        CaughtUp::Gone => panic!("a held-back subscriber is gone"),
    };
}

async fn run_relay(first: usize, ops: Vec<RelayOp>) {
    let mut engine = Engine::new(Setup::default());
    engine.change_owner(false);
    let owner = owner_history();
    let block = SlowSubscriberPolicy::Block;
    let mut relayed = first; // one past the last owner event relayed
    let mut started = false;
    let mut subs: Vec<RelaySub> = Vec::new();
    for op in ops {
        match op {
            RelayOp::Relay { overlap, count } => {
                let from = if started {
                    relayed.saturating_sub(usize::from(overlap)).max(first)
                } else {
                    first
                };
                let to = (relayed + usize::from(count)).min(owner.len());
                if from >= to {
                    continue;
                }
                let (origin, payloads) = run_of(&owner, from, to);
                relayed = relayed.max(from + payloads.len());
                started = true;
                engine.relay(TOPIC, origin, payloads).await;
            }
            RelayOp::Subscribe { start } => {
                engine.flush(TOPIC).await;
                let (start_at, from) = match start {
                    Some(i) if started => {
                        let i = usize::from(i).min(relayed.saturating_sub(1));
                        (StartAt::Position(owner[i]), i)
                    }
                    _ => (StartAt::Live, relayed),
                };
                let (sub, wire, pending) = engine.subscribe(TOPIC, block, 4, start_at, true).await;
                subs.push(RelaySub {
                    sub,
                    wire,
                    from,
                    behind: None,
                    pending,
                });
            }
            RelayOp::Feed { which, count } => {
                if subs.is_empty() {
                    continue;
                }
                let i = usize::from(which) % subs.len();
                learn_behind(&owner, &mut subs[i]).await;
                feed(&engine, &owner, &mut subs[i], usize::from(count)).await;
            }
        }
    }
    for s in &mut subs {
        learn_behind(&owner, s).await;
        while s.behind.is_some() {
            feed(&engine, &owner, s, 16).await;
        }
    }
    engine.flush(TOPIC).await;
    within(engine.counters.wait_queues_empty()).await;
    for (k, s) in subs.iter().enumerate() {
        within(s.sub.end().wait()).await;
        // What a client keeps: events after the last one it kept.
        let mut kept: Vec<u64> = Vec::new();
        let mut last: Option<Position> = None;
        for (p, e) in s.wire.events() {
            if last.is_none_or(|l| (p.stream, p.seq) > (l.stream, l.seq)) {
                assert_eq!(
                    owner[number(&e) as usize],
                    p,
                    "subscriber {k}: payload moved"
                );
                kept.push(number(&e));
                last = Some(p);
            }
        }
        let kept: Vec<u64> = kept
            .into_iter()
            .skip_while(|&n| (n as usize) < s.from)
            .collect();
        let end = relayed.max(kept.last().map_or(0, |&n| n as usize + 1));
        let expected: Vec<u64> = (s.from.min(end)..end).map(|i| i as u64).collect();
        assert_eq!(kept, expected, "subscriber {k} from {}", s.from);
    }
}

/// Reads whether the topic held subscriber `s` back (and from where).
async fn learn_behind(owner: &[Position], s: &mut RelaySub) {
    let Some(rx) = s.pending.take() else { return };
    // The topic answers once it handled the subscription; a dropped sender: it joined.
    if let Ok(p) = within(rx).await {
        let i = owner
            .iter()
            .position(|q| *q == p)
            .expect("a position of the owner");
        assert_eq!(i, s.from, "held back from where it asked");
        s.behind = Some(i);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn at_a_relay_every_subscriber_gets_the_owners_history(
        first in 0usize..40,
        ops in proptest::collection::vec(relay_op(), 1..50),
    ) {
        paused_runtime().block_on(run_relay(first, ops));
    }
}
