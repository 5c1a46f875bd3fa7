//! Publish de-duplication in the topic task, on the paused clock: a repeat of a message id is
//! dropped and counted, its ack comes only once its original's batch was offered (never
//! earlier), a batch's repeated ids are dropped one by one, and after the window the id is
//! new again.

use std::time::Duration;

use bytes::Bytes;
use starling_config::SlowSubscriberPolicy::Block;
use starling_proto::{Frame, Header, IndexedHeaders, MSG_ID, StartAt};
use tokio::sync::{Semaphore, mpsc};

use super::*;
use crate::pubsub::ack::{AckItem, AckToken};
use crate::pubsub::topic::TopicMsg;

/// Publishes `payloads` with the given message ids (by index) as one acked request; the ack
/// frames arrive on `acks`.
async fn publish_ids(
    e: &Engine,
    topic: &str,
    request_id: u64,
    payloads: Vec<Bytes>,
    ids: &[(u32, &str)],
    acks: &mpsc::UnboundedSender<AckItem>,
) {
    let permits = Arc::new(Semaphore::new(1));
    let permit = permits.acquire_owned().await.expect("permit");
    let count = payloads.len() as u32;
    e.topics.reserve(topic).expect("under max_topics");
    let msg = TopicMsg {
        payloads,
        headers: ids
            .iter()
            .map(|(i, id)| IndexedHeaders {
                index: *i,
                headers: vec![Header::new(MSG_ID, *id)],
            })
            .collect(),
        ack: Some(AckToken::new(request_id, count, acks.clone(), permit)),
        origin: None,
        hold: None,
    };
    e.topics.publish(topic, msg).await;
}

fn acked(rx: &mut mpsc::UnboundedReceiver<AckItem>) -> Vec<u64> {
    let mut out = Vec::new();
    while let Ok((frame, _)) = rx.try_recv() {
        match frame {
            Frame::PublishAck(a) => out.push(a.request_id),
            other => panic!("expected an ack, got {other:?}"),
        }
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_repeat_is_dropped_and_acked_only_after_its_original() {
    let mut e = Engine::new(Setup::default());
    let (_s, wire, _) = e.subscribe("d", Block, 16, StartAt::Live, false).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    publish_ids(&e, "d", 1, vec![payload(0, 8)], &[(0, "a")], &tx).await;
    publish_ids(&e, "d", 2, vec![payload(1, 8)], &[(0, "a")], &tx).await;
    quiesce().await;
    // The original sits in the open batch (max 4 events, a 1 s delay): neither is acked.
    assert_eq!(acked(&mut rx), Vec::<u64>::new());
    e.flush("d").await;
    quiesce().await;
    assert_eq!(
        acked(&mut rx),
        vec![1, 2],
        "the repeat rides on its original's batch"
    );
    // A repeat of a done original is answered at once.
    publish_ids(&e, "d", 3, vec![payload(2, 8)], &[(0, "a")], &tx).await;
    quiesce().await;
    assert_eq!(acked(&mut rx), vec![3]);
    within(e.counters.wait_queues_empty()).await;
    assert_eq!(numbers(&wire.events()), vec![0], "delivered once");
    assert_eq!(e.counters.duplicates.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn a_batch_drops_its_repeats_one_by_one() {
    let mut e = Engine::new(Setup::default());
    let (_s, wire, _) = e.subscribe("d", Block, 16, StartAt::Live, false).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    publish_ids(&e, "d", 1, vec![payload(0, 8)], &[(0, "a")], &tx).await;
    e.flush("d").await;
    // "a" again (a repeat of request 1), "b" new, "b" again (a repeat within the batch), and a
    // message without an id.
    let batch = vec![payload(1, 8), payload(2, 8), payload(3, 8), payload(4, 8)];
    publish_ids(&e, "d", 2, batch, &[(0, "a"), (1, "b"), (2, "b")], &tx).await;
    e.flush("d").await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    assert_eq!(acked(&mut rx), vec![1, 2]);
    assert_eq!(numbers(&wire.events()), vec![0, 2, 4]);
    assert_eq!(e.counters.duplicates.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn after_the_window_the_id_is_new_again() {
    let mut e = Engine::new(Setup {
        dedup_window: Duration::from_secs(5),
        ..Setup::default()
    });
    let (_s, wire, _) = e.subscribe("d", Block, 16, StartAt::Live, false).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    publish_ids(&e, "d", 1, vec![payload(0, 8)], &[(0, "a")], &tx).await;
    e.flush("d").await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    publish_ids(&e, "d", 2, vec![payload(1, 8)], &[(0, "a")], &tx).await;
    e.flush("d").await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    assert_eq!(acked(&mut rx), vec![1, 2]);
    assert_eq!(numbers(&wire.events()), vec![0, 1]);
    assert_eq!(e.counters.duplicates.load(Ordering::Relaxed), 0);
    assert!(e.counters.dedup_bytes.load(Ordering::Relaxed) > 0);
}

fn numbers(events: &[(starling_proto::Position, Bytes)]) -> Vec<u64> {
    events.iter().map(|(_, p)| number(p)).collect()
}
