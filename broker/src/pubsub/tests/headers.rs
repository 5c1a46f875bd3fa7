//! Message headers in the engine, on the paused clock: a message's headers reach a subscriber
//! granted `HEADERS` in an `EventHeaders` frame right before its batch, indexed by the
//! message's place in that batch (after the `BatchTopic` on a wildcard subscription); a
//! subscriber not granted it receives the same EventBatch bytes alone; a batch without headers
//! has no `EventHeaders`.

use starling_access::Pattern;
use starling_config::SlowSubscriberPolicy::Block;
use starling_proto::{Frame, Header, IndexedHeaders, StartAt};

use super::{Engine, Setup, number, payload, quiesce, within};
use crate::pubsub::topic::TopicMsg;

fn h(name: &str, value: &str) -> Vec<Header> {
    vec![Header::new(name, value)]
}

/// Publishes payloads `numbers` to `topic` as one request, with `headers` by index.
async fn publish(e: &Engine, topic: &str, numbers: &[u64], headers: Vec<IndexedHeaders>) {
    e.topics.reserve(topic).expect("under max_topics");
    let msg = TopicMsg {
        payloads: numbers.iter().map(|&n| payload(n, 8)).collect(),
        headers,
        ack: None,
        origin: None,
        hold: None,
    };
    e.topics.publish(topic, msg).await;
}

/// The wire's events as (number, headers), checking that each `EventHeaders` precedes an
/// EventBatch and indexes within it.
fn with_headers(frames: Vec<Frame>) -> Vec<(u64, Vec<Header>)> {
    let mut out = Vec::new();
    let mut pending: Option<Vec<IndexedHeaders>> = None;
    for frame in frames {
        match frame {
            Frame::BatchTopic(_) => assert!(pending.is_none(), "BatchTopic after EventHeaders"),
            Frame::EventHeaders(eh) => {
                assert!(pending.is_none(), "two EventHeaders in a row");
                assert!(!eh.entries.is_empty(), "an empty EventHeaders");
                pending = Some(eh.entries);
            }
            Frame::EventBatch(b) => {
                let entries = pending.take().unwrap_or_default();
                if let Some(last) = entries.last() {
                    assert!(
                        (last.index as usize) < b.events.len(),
                        "index past the batch"
                    );
                }
                for (i, ev) in b.events.iter().enumerate() {
                    let hs = entries
                        .iter()
                        .find(|e| e.index as usize == i)
                        .map(|e| e.headers.clone())
                        .unwrap_or_default();
                    out.push((number(ev), hs));
                }
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }
    assert!(pending.is_none(), "EventHeaders without its EventBatch");
    out
}

#[tokio::test(start_paused = true)]
async fn headers_reach_subscribers_granted_them_and_only_them() {
    let mut e = Engine::new(Setup::default());
    let (with, with_wire) = e.subscriber_as("t", Block, 16, true);
    let (without, without_wire) = e.subscriber_as("t", Block, 16, false);
    let (wild, wild_wire) = e.subscriber_as("*", Block, 16, true);
    e.topics.reserve("t").expect("under max_topics");
    e.topics.subscribe(with.clone(), StartAt::Live, false);
    e.topics.subscribe(without.clone(), StartAt::Live, false);
    e.topics
        .subscribe_pattern(wild.clone(), Pattern::parse("*").expect("pattern"));
    quiesce().await;
    // One request with headers on its second message, then one without any headers, then
    // one whose only message has two headers: they may share batches, and the indices must
    // follow each message's place in its batch.
    publish(
        &e,
        "t",
        &[1, 2, 3],
        vec![IndexedHeaders {
            index: 1,
            headers: h("trace", "two"),
        }],
    )
    .await;
    publish(&e, "t", &[4], Vec::new()).await;
    let two = vec![Header::new("a", "1"), Header::new("b", "")];
    publish(
        &e,
        "t",
        &[5],
        vec![IndexedHeaders {
            index: 0,
            headers: two.clone(),
        }],
    )
    .await;
    within(e.topics.flush_all()).await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    let expected = vec![
        (1, vec![]),
        (2, h("trace", "two")),
        (3, vec![]),
        (4, vec![]),
        (5, two),
    ];
    assert_eq!(with_headers(with_wire.frames()), expected);
    assert_eq!(with_headers(wild_wire.frames()), expected);
    // Not granted: EventBatches only, the same events.
    let plain = without_wire.frames();
    assert!(
        plain.iter().all(|f| matches!(f, Frame::EventBatch(_))),
        "{plain:?}"
    );
    let numbers: Vec<u64> = with_headers(plain).into_iter().map(|(n, _)| n).collect();
    assert_eq!(numbers, [1, 2, 3, 4, 5]);
}

#[tokio::test(start_paused = true)]
async fn a_batch_without_headers_has_no_event_headers_frame() {
    let mut e = Engine::new(Setup::default());
    let (sub, wire) = e.subscriber_as("t", Block, 16, true);
    e.topics.reserve("t").expect("under max_topics");
    e.topics.subscribe(sub.clone(), StartAt::Live, false);
    quiesce().await;
    publish(&e, "t", &[1, 2], Vec::new()).await;
    within(e.topics.flush_all()).await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    let frames = wire.frames();
    assert!(
        frames.iter().all(|f| matches!(f, Frame::EventBatch(_))),
        "{frames:?}"
    );
    assert_eq!(with_headers(frames).len(), 2);
}
