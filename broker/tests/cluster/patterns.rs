//! Patterns across a cluster (`cluster::fan_in`): a wildcard subscription at one broker gets
//! every matching topic from its owner, once, in each topic's order, even where that broker
//! also relays one of the topics for a plain subscriber; request/reply works when requester,
//! responder and the topic's owner are three different members (and "no responders" is the
//! owner's answer); a queue group of a pattern shares the topics of every owner among members
//! that joined at different brokers.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use starling_client::{Client, ClientError, Subscription};
use starling_placement::Kind;
use starling_testkit::payload::{index, payload};

use crate::harness::{SOON, TestCluster, key_owned_by};

const MEMBERS: [&str; 3] = ["a", "b", "c"];

/// `n` topics under `prefix.`, at least one owned by each member.
fn spread_topics(prefix: &str, n: usize) -> Vec<String> {
    let mut topics: Vec<String> = MEMBERS
        .iter()
        .map(|m| key_owned_by(&format!("{prefix}."), Kind::Topic, &MEMBERS, m))
        .collect();
    let mut i = 0;
    while topics.len() < n {
        let t = format!("{prefix}.more-{i}");
        if !topics.contains(&t) {
            topics.push(t);
        }
        i += 1;
    }
    topics
}

/// Receives from `subs` until `want` events arrived in all (failing after `SOON`), then half
/// a second more, so a duplicate would show; returns each subscription's (topic, index).
async fn collect(subs: &mut [Subscription], want: usize) -> Vec<Vec<(String, u32)>> {
    crate::collect_each(subs, want, |e| (e.topic.to_string(), index(&e.payload))).await
}

/// Publishes `per_topic` events to each topic from `client`, acked, numbered `topic index *
/// 1000 + i`.
async fn publish_all(client: &Client, topics: &[String], per_topic: u32) {
    for i in 0..per_topic {
        for (t, topic) in topics.iter().enumerate() {
            let n = u32::try_from(t).unwrap() * 1000 + i;
            client
                .publish_acked(topic, payload(n))
                .await
                .expect("publish");
        }
    }
}

/// Every topic's events once each, in order.
fn once_in_order(got: &[(String, u32)], topics: &[String], per_topic: u32) {
    let mut by_topic: HashMap<&str, Vec<u32>> = HashMap::new();
    for (topic, n) in got {
        by_topic.entry(topic.as_str()).or_default().push(*n);
    }
    for (t, topic) in topics.iter().enumerate() {
        let base = u32::try_from(t).unwrap() * 1000;
        let want: Vec<u32> = (base..base + per_topic).collect();
        assert_eq!(
            by_topic.get(topic.as_str()).cloned().unwrap_or_default(),
            want,
            "events of {topic}"
        );
    }
    assert_eq!(got.len(), topics.len() * per_topic as usize, "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wildcard_subscription_gets_every_owners_topics_once_and_in_order() {
    let cluster = TestCluster::start("patterns", &MEMBERS).await;
    let topics = spread_topics("orders", 6);
    let owned_by_b = key_owned_by("orders.", Kind::Topic, &MEMBERS, "b");
    assert!(topics.contains(&owned_by_b));

    let plain_a = cluster.plain_client("a").await;
    let routing_c = cluster.routing_client("c").await;
    let mut subs = vec![
        plain_a.subscribe("orders.>").await.expect("subscribe at a"),
        routing_c
            .subscribe("orders.*")
            .await
            .expect("routed subscribe"),
    ];
    // a also relays one of b's topics for a plain subscriber: the wildcard subscription must
    // not get that topic twice (from the relay and from b).
    let mut relayed = plain_a.subscribe(&owned_by_b).await.expect("subscribe");
    assert!(
        cluster
            .metric("a", "starling_cluster_forwarded_total", "op=\"feed\"")
            .await
            >= 2.0,
        "a subscribed at the two other members"
    );

    let publisher = cluster.plain_client("b").await;
    publish_all(&publisher, &topics, 5).await;
    let got = collect(&mut subs, 2 * topics.len() * 5).await;
    once_in_order(&got[0], &topics, 5);
    once_in_order(&got[1], &topics, 5);
    for i in 0..5 {
        let event = tokio::time::timeout(SOON, relayed.next_event())
            .await
            .expect("relayed event")
            .expect("open")
            .expect("event");
        let t = topics.iter().position(|t| *t == owned_by_b).unwrap();
        assert_eq!(index(&event.payload), u32::try_from(t).unwrap() * 1000 + i);
    }

    for c in [plain_a, routing_c, publisher] {
        c.close().await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_are_answered_across_members_and_no_responders_is_the_owners_answer() {
    let cluster = TestCluster::start("requests", &MEMBERS).await;
    // The service topic is owned by c; the responder is at b, the requester at a.
    let service = key_owned_by("svc.", Kind::Topic, &MEMBERS, "c");
    let responder = cluster.plain_client("b").await;
    let mut requests = responder.subscribe(&service).await.expect("subscribe");
    let answering = {
        let responder = responder.clone();
        tokio::spawn(async move {
            while let Some(Ok(request)) = requests.next_event().await {
                let mut answer = b"re: ".to_vec();
                answer.extend_from_slice(&request.payload);
                responder.reply(&request, answer).await.expect("reply");
            }
        })
    };
    for requester in [
        cluster.plain_client("a").await,
        cluster.routing_client("a").await,
    ] {
        for i in 0..3 {
            let reply = requester
                .request(&service, format!("ping {i}"), SOON)
                .await
                .expect("answered");
            assert_eq!(&reply.payload[..], format!("re: ping {i}").as_bytes());
        }
        // Nobody subscribes to this one anywhere: the owner says so, at once.
        let nobody = key_owned_by("svc.none-", Kind::Topic, &MEMBERS, "b");
        let started = Instant::now();
        match requester.request(&nobody, "ping", SOON).await {
            Err(ClientError::NoResponders(t)) => assert_eq!(t, nobody),
            other => panic!("expected NoResponders, got {other:?}"),
        }
        assert!(started.elapsed() < Duration::from_secs(5));
        requester.close().await;
    }

    // A wildcard responder at c answers requests on a topic a owns.
    let wild = cluster.routing_client("c").await;
    let mut wild_requests = wild.subscribe("wsvc.*").await.expect("subscribe");
    let wild_answering = {
        let wild = wild.clone();
        tokio::spawn(async move {
            while let Some(Ok(request)) = wild_requests.next_event().await {
                wild.reply(&request, request.topic.as_bytes().to_vec())
                    .await
                    .expect("reply");
            }
        })
    };
    let topic = key_owned_by("wsvc.", Kind::Topic, &MEMBERS, "a");
    let requester = cluster.plain_client("b").await;
    let reply = requester
        .request(&topic, "who", SOON)
        .await
        .expect("answered by the wildcard responder");
    assert_eq!(&reply.payload[..], topic.as_bytes());

    answering.abort();
    wild_answering.abort();
    for c in [requester, responder, wild] {
        c.close().await;
    }
    cluster.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pattern_queue_group_shares_every_owners_topics_among_members_anywhere() {
    let cluster = TestCluster::start("pgroups", &MEMBERS).await;
    let topics = spread_topics("jobs", 6);
    let (at_a, at_b) = (
        cluster.plain_client("a").await,
        cluster.plain_client("b").await,
    );
    let mut members = vec![
        at_a.subscribe_group("jobs.*", "workers")
            .await
            .expect("join at a"),
        at_b.subscribe_group("jobs.*", "workers")
            .await
            .expect("join at b"),
    ];
    let publisher = cluster.plain_client("c").await;
    publish_all(&publisher, &topics, 10).await;
    let want = topics.len() * 10;
    let got = collect(&mut members, want).await;
    let all: Vec<(String, u32)> = got.iter().flatten().cloned().collect();
    let distinct: HashSet<(String, u32)> = all.iter().cloned().collect();
    assert_eq!(
        all.len(),
        distinct.len(),
        "an event reached the group twice"
    );
    assert_eq!(all.len(), want, "{got:?}");
    assert!(
        got.iter().all(|m| !m.is_empty()),
        "both members got work: {got:?}"
    );

    for c in [at_a, at_b, publisher] {
        c.close().await;
    }
    cluster.shutdown().await;
}
