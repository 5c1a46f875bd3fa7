//! Wildcard subscribers in the engine, on the paused clock: every batch of every matching
//! topic (those alive when it subscribed, those created later, and a topic created again
//! after it retired) reaches the subscriber after a `BatchTopic` naming its topic, in each
//! topic's order; other topics never do; after the unsubscribe nothing does; and a wildcard
//! subscriber does not keep a topic alive.

use starling_access::Pattern;
use starling_config::SlowSubscriberPolicy::Block;
use starling_proto::{Frame, StartAt};

use super::{Engine, Setup, Wire, number, payload, quiesce, within};

/// The wire's events as (topic, number), checking that each EventBatch follows a BatchTopic.
fn tagged(wire: &Wire) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut topic: Option<String> = None;
    for frame in wire.frames() {
        match frame {
            Frame::BatchTopic(t) => {
                assert!(topic.is_none(), "two BatchTopic frames in a row");
                topic = Some(t.topic);
            }
            Frame::EventBatch(b) => {
                let t = topic.take().expect("an EventBatch without its BatchTopic");
                out.extend(b.events.iter().map(|e| (t.clone(), number(e))));
            }
            other => panic!("unexpected frame {other:?}"),
        }
    }
    assert!(topic.is_none(), "a BatchTopic without its EventBatch");
    out
}

fn of(events: &[(String, u64)], topic: &str) -> Vec<u64> {
    events
        .iter()
        .filter(|(t, _)| t == topic)
        .map(|(_, n)| *n)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn a_wildcard_subscriber_follows_every_matching_topic_old_new_and_recreated() {
    let mut e = Engine::new(Setup::default());
    // `a.x` is alive (a plain subscriber) before the wildcard subscription.
    let (_plain, plain_wire, _) = e.subscribe("a.x", Block, 16, StartAt::Live, false).await;
    let (sub, wire) = e.subscriber("a.*", Block, 16);
    let pattern = Pattern::parse("a.*").expect("pattern");
    e.topics.subscribe_pattern(sub.clone(), pattern.clone());
    quiesce().await;
    e.publish("a.x", vec![payload(1, 8), payload(2, 8)]).await;
    e.publish("a.y", vec![payload(3, 8)]).await; // created after the subscription
    e.publish("b.x", vec![payload(4, 8)]).await; // not matched
    e.publish("a.x.z", vec![payload(5, 8)]).await; // not matched: three tokens
    e.publish("a.x", vec![payload(6, 8)]).await;
    within(e.topics.flush_all()).await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    let got = tagged(&wire);
    assert_eq!(of(&got, "a.x"), [1, 2, 6]);
    assert_eq!(of(&got, "a.y"), [3]);
    assert_eq!(got.len(), 4, "{got:?}");
    // The plain subscriber's stream has no BatchTopic.
    assert!(
        plain_wire
            .frames()
            .iter()
            .all(|f| matches!(f, Frame::EventBatch(_))),
        "{:?}",
        plain_wire.frames()
    );

    // `a.y` has only the wildcard subscriber: it retires when idle all the same, and a new
    // `a.y` task gets the subscriber again.
    let before = e.topics.len();
    tokio::time::advance(std::time::Duration::from_secs(7300)).await;
    quiesce().await;
    assert!(
        e.topics.len() < before,
        "idle topics retired: {before} → {}",
        e.topics.len()
    );
    e.publish("a.y", vec![payload(7, 8)]).await;
    e.flush("a.y").await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    assert_eq!(of(&tagged(&wire), "a.y"), [3, 7]);

    // After the unsubscribe, nothing more.
    e.topics.unsubscribe_pattern(&sub, &pattern);
    assert_eq!(e.topics.wildcard_subscriptions(), 0);
    e.publish("a.x", vec![payload(8, 8)]).await;
    e.publish("a.new", vec![payload(9, 8)]).await;
    within(e.topics.flush_all()).await;
    quiesce().await;
    assert_eq!(tagged(&wire).len(), 5);
    assert_eq!(
        plain_wire.events().len(),
        4,
        "the plain subscriber got a.x's 1, 2, 6, 8"
    );
}

#[tokio::test(start_paused = true)]
async fn two_wildcards_and_a_plain_subscriber_each_get_every_batch() {
    let mut e = Engine::new(Setup::default());
    let (_p, plain, _) = e.subscribe("t.a", Block, 16, StartAt::Live, false).await;
    let (one, w1) = e.subscriber("t.*", Block, 16);
    let (all, w2) = e.subscriber(">", Block, 16);
    e.topics
        .subscribe_pattern(one, Pattern::parse("t.*").expect("pattern"));
    e.topics
        .subscribe_pattern(all, Pattern::parse(">").expect("pattern"));
    quiesce().await;
    for n in 0..10 {
        e.publish("t.a", vec![payload(n, 8)]).await;
        e.publish("u", vec![payload(100 + n, 8)]).await;
    }
    within(e.topics.flush_all()).await;
    within(e.counters.wait_queues_empty()).await;
    quiesce().await;
    let expect: Vec<u64> = (0..10).collect();
    assert_eq!(of(&tagged(&w1), "t.a"), expect);
    assert_eq!(tagged(&w1).len(), 10);
    assert_eq!(of(&tagged(&w2), "t.a"), expect);
    assert_eq!(of(&tagged(&w2), "u"), (100..110).collect::<Vec<_>>());
    let plain: Vec<u64> = plain.events().iter().map(|(_, e)| number(e)).collect();
    assert_eq!(plain, expect);
}
