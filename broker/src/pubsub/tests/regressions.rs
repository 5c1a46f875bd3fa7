//! One case per ordering, duplication or loss fix made in this code (the commit each guards
//! is named in its doc), plus the drain and the single writer of a subscriber's sink.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use starling_config::SlowSubscriberPolicy::{Block, DropNew, DropOld};
use starling_proto::{Frame, Ping, Position, StartAt};

use super::{Engine, Setup, number, payload, quiesce, within};
use crate::pubsub::counters::DropReason;
use crate::pubsub::topic::CaughtUp;

fn numbers(events: &[(Position, bytes::Bytes)]) -> Vec<u64> {
    events.iter().map(|(_, e)| number(e)).collect()
}

/// c5d7dee: a late batch at a former owner (accepted just before it learned of the change)
/// continues the stream its subscribers followed; a fresh id would be newer than the new
/// owner's stream. 6bc8d67: when it owns the topic again, the new stream is above the old.
#[tokio::test(start_paused = true)]
async fn a_late_batch_at_a_former_owner_continues_its_stream() {
    let mut e = Engine::new(Setup::default());
    let (_sub, wire, _) = e.subscribe("t", Block, 8, StartAt::Live, false).await;
    e.publish("t", vec![payload(0, 8)]).await;
    e.flush("t").await;
    e.change_owner(false);
    e.publish("t", vec![payload(1, 8)]).await;
    e.flush("t").await;
    e.change_owner(true);
    e.publish("t", vec![payload(2, 8)]).await;
    e.flush("t").await;
    quiesce().await;
    let ev = wire.events();
    assert_eq!(numbers(&ev), vec![0, 1, 2]);
    assert_eq!(
        ev[1].0.stream, ev[0].0.stream,
        "the late batch continues the stream"
    );
    assert_eq!(ev[1].0.seq, 1);
    assert!(
        ev[2].0.stream > ev[1].0.stream,
        "owning again: a newer stream"
    );
    assert_eq!(ev[2].0.seq, 0);
}

/// 261c0e9: a resume replays every retained stream that started after the subscriber's, not
/// only the newest (an owner that restarted and then saw a membership change lost its middle
/// stream: 2 of 2,314 acked messages in an e2e run).
#[tokio::test(start_paused = true)]
async fn a_resume_replays_every_later_stream() {
    let mut e = Engine::new(Setup::default());
    let (_w, witness, _) = e.subscribe("t", Block, 8, StartAt::Live, false).await;
    for n in 0..3u64 {
        e.publish("t", vec![payload(2 * n, 8), payload(2 * n + 1, 8)])
            .await;
        e.flush("t").await;
        e.change_owner(true); // the next batch starts a new stream
    }
    quiesce().await;
    let streams: Vec<u64> = witness.events().iter().map(|(p, _)| p.stream).collect();
    assert!(
        streams[1] < streams[2] && streams[3] < streams[4],
        "{streams:?}"
    );
    let resume = Position {
        stream: streams[0],
        seq: 1,
    };
    let (_s, wire, _) = e
        .subscribe("t", Block, 8, StartAt::Position(resume), false)
        .await;
    e.flush("t").await;
    quiesce().await;
    let got: Vec<u64> = wire
        .events()
        .iter()
        .filter(|(q, _)| (q.stream, q.seq) >= (resume.stream, resume.seq))
        .map(|(_, b)| number(b))
        .collect();
    assert_eq!(
        got,
        vec![1, 2, 3, 4, 5],
        "the middle stream is replayed too"
    );
}

/// 106a818: a subscriber resuming at a relay from before its retained tail is held back and
/// fed from the owner first, then replayed the tail and joined: the tail's newer events used
/// to go first (newest stream, then the older ones), and with the relay already past the
/// position the older events never came.
#[tokio::test(start_paused = true)]
async fn a_relay_subscriber_from_before_the_tail_is_caught_up_first() {
    let mut e = Engine::new(Setup::default());
    e.change_owner(false);
    let s1 = |seq| Position { stream: 100, seq };
    let s2 = |seq| Position { stream: 200, seq };
    // The relay started late: its tail is stream 200 only.
    e.relay("t", s2(0), (10..14).map(|n| payload(n, 8)).collect())
        .await;
    e.flush("t").await;
    let (sub, wire, behind) = e
        .subscribe("t", Block, 8, StartAt::Position(s1(2)), true)
        .await;
    let from = within(behind.expect("may catch up"))
        .await
        .expect("held back");
    assert_eq!(from, s1(2));
    // The relay goes on meanwhile: none of it may reach the held-back subscriber yet.
    e.relay("t", s2(4), (14..16).map(|n| payload(n, 8)).collect())
        .await;
    e.flush("t").await;
    quiesce().await;
    assert!(wire.events().is_empty(), "nothing before its catch-up");
    let fed = (2..5).map(|n| payload(n, 8)).collect();
    assert_eq!(
        e.topics.catch_up("t", sub.id, s1(2), fed).await,
        CaughtUp::Behind
    );
    // The owner's stream 200 from its start: the tail reaches back to it, so it joins.
    let fed = (10..12).map(|n| payload(n, 8)).collect();
    assert_eq!(
        e.topics.catch_up("t", sub.id, s2(0), fed).await,
        CaughtUp::Joined
    );
    e.relay("t", s2(6), vec![payload(16, 8)]).await;
    e.flush("t").await;
    quiesce().await;
    let mut kept = Vec::new();
    let mut last: Option<Position> = None;
    for (p, b) in wire.events() {
        if last.is_none_or(|l| (p.stream, p.seq) > (l.stream, l.seq)) {
            kept.push(number(&b));
            last = Some(p);
        }
    }
    assert_eq!(kept, vec![2, 3, 4, 10, 11, 12, 13, 14, 15, 16]);
}

/// Relayed events keep the owner's positions and are relayed once (an upstream resubscribing
/// replays from where it stood); local messages accepted before a relayed run are sealed
/// first, so they keep their order.
#[tokio::test(start_paused = true)]
async fn relayed_repeats_are_dropped_and_local_messages_keep_their_order() {
    let mut e = Engine::new(Setup::default());
    let (_s, wire, _) = e.subscribe("t", Block, 16, StartAt::Live, false).await;
    e.publish("t", vec![payload(0, 8)]).await;
    let owner = |seq| Position { stream: 7, seq };
    e.relay("t", owner(0), (100..103).map(|n| payload(n, 8)).collect())
        .await;
    e.relay("t", owner(1), (101..105).map(|n| payload(n, 8)).collect())
        .await;
    e.flush("t").await;
    quiesce().await;
    assert_eq!(numbers(&wire.events()), vec![0, 100, 101, 102, 103, 104]);
    assert_eq!(wire.events()[1].0, owner(0));
}

/// ff88855 (drop_old scheduling): a subscriber whose oldest batches were evicted for a new
/// one is still written to, and the evicted events are counted.
#[tokio::test(start_paused = true)]
async fn drop_old_evicts_the_oldest_and_still_delivers() {
    let mut e = Engine::new(Setup::default());
    let (_s, wire, _) = e.subscribe("t", DropOld, 2, StartAt::Live, false).await;
    wire.stall(true);
    for n in 0..6 {
        e.publish("t", vec![payload(n, 8)]).await;
        e.flush("t").await;
    }
    wire.stall(false);
    e.flush("t").await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    // One parked while stalled (0), then the newest two of the rest.
    assert_eq!(numbers(&wire.events()), vec![0, 4, 5]);
    assert_eq!(e.counters.dropped(DropReason::QueueFullOld), 3);
}

/// `drop_new` refuses the batch for that subscriber only, and counts it.
#[tokio::test(start_paused = true)]
async fn drop_new_refuses_for_the_slow_subscriber_only() {
    let mut e = Engine::new(Setup::default());
    let (_a, slow, _) = e.subscribe("t", DropNew, 1, StartAt::Live, false).await;
    let (_b, fast, _) = e.subscribe("t", Block, 16, StartAt::Live, false).await;
    slow.stall(true);
    for n in 0..4 {
        e.publish("t", vec![payload(n, 8)]).await;
        e.flush("t").await;
    }
    slow.stall(false);
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    assert_eq!(numbers(&fast.events()), vec![0, 1, 2, 3]);
    assert_eq!(numbers(&slow.events()), vec![0, 1]);
    assert_eq!(e.counters.dropped(DropReason::QueueFullNew), 2);
}

/// 933799c, 27e2565: the broker-wide retention cap (checked against the engine's own count,
/// not a metric) makes the topic whose batch passes it give up its own oldest batches first.
#[tokio::test(start_paused = true)]
async fn the_broker_wide_cap_takes_the_busy_topics_history_first() {
    let setup = Setup {
        max_events: 1,
        replay_max_total_bytes: 2_000,
        ..Setup::default()
    };
    let e = Engine::new(setup);
    e.publish("quiet", vec![payload(0, 400)]).await;
    e.flush("quiet").await;
    for n in 1..20 {
        e.publish("busy", vec![payload(n, 400)]).await;
    }
    e.flush("busy").await;
    let retained = e.counters.retained_bytes.load(Ordering::Acquire);
    assert!(retained <= 2_000, "{retained}");
    let mut e = e;
    let (_s, quiet, _) = e
        .subscribe(
            "quiet",
            Block,
            8,
            StartAt::Position(Position { stream: 0, seq: 0 }),
            false,
        )
        .await;
    e.flush("quiet").await;
    quiesce().await;
    assert_eq!(
        numbers(&quiet.events()),
        vec![0],
        "the quiet topic keeps its tail"
    );
}

/// 45500ab: a quiet topic's retained tail expires on a timer armed for its oldest batch (it
/// used to wait for the next publish or resume).
#[tokio::test(start_paused = true)]
async fn a_quiet_topics_tail_expires_on_its_own() {
    let setup = Setup {
        replay_window: Duration::from_secs(30),
        ..Setup::default()
    };
    let e = Engine::new(setup);
    e.publish("t", vec![payload(0, 100)]).await;
    e.flush("t").await;
    assert!(e.counters.retained_bytes.load(Ordering::Acquire) > 0);
    tokio::time::sleep(Duration::from_secs(31)).await;
    assert_eq!(e.counters.retained_bytes.load(Ordering::Acquire), 0);
}

/// A batch is sealed by its delay on the topic's clock, with nothing else happening.
#[tokio::test(start_paused = true)]
async fn a_batch_is_sealed_by_its_delay() {
    let mut e = Engine::new(Setup::default());
    let (_s, wire, _) = e.subscribe("t", Block, 8, StartAt::Live, false).await;
    e.publish("t", vec![payload(0, 8)]).await;
    quiesce().await;
    assert!(wire.events().is_empty(), "one event of four: still open");
    tokio::time::sleep(super::BATCH_DELAY).await;
    quiesce().await;
    assert_eq!(numbers(&wire.events()), vec![0]);
    assert_eq!(
        e.counters
            .batch_flushes(crate::pubsub::batcher::Trigger::Delay),
        1
    );
}

/// 46c4684: an idle topic retires only when nothing can reach it; a subscribed one does not.
#[tokio::test(start_paused = true)]
async fn an_idle_topic_retires_only_without_subscribers() {
    let mut e = Engine::new(Setup::default());
    let (sub, _w, _) = e.subscribe("kept", Block, 8, StartAt::Live, false).await;
    e.publish("gone", vec![payload(0, 8)]).await;
    e.flush("gone").await;
    assert_eq!(e.counters.topics.load(Ordering::Acquire), 2);
    tokio::time::sleep(Duration::from_secs(7201)).await;
    quiesce().await;
    assert_eq!(e.topics.len(), 1, "the unsubscribed topic retired");
    assert_eq!(e.counters.topics.load(Ordering::Acquire), 1);
    e.topics.unsubscribe(&sub);
    tokio::time::sleep(Duration::from_secs(7201)).await;
    quiesce().await;
    assert!(e.topics.is_empty());
}

/// The single writer: replies queued by the subscription handler go out in queue order with
/// the batches (`SubscribeOk` before any EventBatch), and the end finishes the sink after
/// them.
#[tokio::test(start_paused = true)]
async fn replies_and_batches_share_one_writer_in_queue_order() {
    let mut e = Engine::new(Setup::default());
    let (sub, wire) = e.subscriber("t", Block, 8);
    let pong = |nonce| Frame::Pong(Ping { nonce });
    if sub.reply(pong(1).to_bytes()).await {
        e.lanes.schedule(Arc::clone(&sub)).await;
    }
    e.topics.reserve("t").expect("room");
    e.topics.subscribe(Arc::clone(&sub), StartAt::Live, false);
    e.publish("t", vec![payload(0, 8)]).await;
    e.flush("t").await;
    wire.stall(true);
    e.publish("t", vec![payload(1, 8)]).await;
    e.flush("t").await;
    if sub.reply(pong(2).to_bytes()).await {
        e.lanes.schedule(Arc::clone(&sub)).await;
    }
    e.topics.unsubscribe(&sub);
    let ended = sub.end();
    assert!(!wire.finished(), "the parked write is not done");
    wire.stall(false);
    within(ended.wait()).await;
    assert!(wire.finished());
    let kinds: Vec<String> = wire
        .frames()
        .iter()
        .map(|f| match f {
            Frame::Pong(p) => format!("pong {}", p.nonce),
            Frame::EventBatch(b) => format!("events {}", b.events.len()),
            other => other.name().to_string(),
        })
        .collect();
    assert_eq!(kinds, vec!["pong 1", "events 1", "events 1", "pong 2"]);
}

/// The drain: it waits on the engine's own count of queued batches (an event, not a poll),
/// and each subscriber's end comes after everything queued to it.
#[tokio::test(start_paused = true)]
async fn the_drain_waits_for_queued_batches_then_ends_each_sink() {
    let mut e = Engine::new(Setup::default());
    let (sub, wire, _) = e.subscribe("t", Block, 8, StartAt::Live, false).await;
    wire.stall(true);
    for n in 0..3 {
        e.publish("t", vec![payload(n, 8)]).await;
        e.flush("t").await;
    }
    assert_eq!(e.counters.queued_batches(), 2, "one parked, two queued");
    let counters = Arc::clone(&e.counters);
    let drained = tokio::spawn(async move { counters.wait_queues_empty().await });
    quiesce().await;
    assert!(!drained.is_finished());
    wire.stall(false);
    within(drained).await.expect("drained");
    within(sub.end().wait()).await;
    assert_eq!(numbers(&wire.events()), vec![0, 1, 2]);
    assert!(wire.finished());
}

/// A sink that breaks closes its subscriber: nothing more is queued to it, what was queued is
/// counted as dropped, and its end does not wait.
#[tokio::test(start_paused = true)]
async fn a_broken_sink_closes_its_subscriber() {
    let mut e = Engine::new(Setup::default());
    let (sub, wire, _) = e.subscribe("t", Block, 8, StartAt::Live, false).await;
    wire.break_off();
    e.publish("t", vec![payload(0, 8)]).await;
    e.flush("t").await;
    quiesce().await;
    assert!(sub.is_closed());
    e.publish("t", vec![payload(1, 8)]).await;
    e.flush("t").await;
    within(sub.end().wait()).await;
    assert_eq!(e.counters.queued_batches(), 0);
    assert!(!wire.finished());
}
