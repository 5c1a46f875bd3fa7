//! Publishers and subscribers meet wherever they connect: forwarding for plain clients (one
//! upstream subscription per topic however many local subscribers), direct routing for the SDK.

use std::time::{Duration, Instant};

use starling_broker::cluster::peer_client::PeerClient;
use starling_client::Subscription;
use starling_placement::Kind;

use crate::harness::{SOON, TestCluster, index, key_owned_by, payload};

async fn recv_indices(sub: &mut Subscription, n: usize) -> Vec<u64> {
    let mut got = Vec::with_capacity(n);
    while got.len() < n {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(e))) => got.push(index(&e.payload)),
            other => panic!("after {} events: {other:?}", got.len()),
        }
    }
    got
}

async fn wait_for(c: &TestCluster, id: &str, metric: &str, want: f64) {
    let deadline = Instant::now() + SOON;
    loop {
        let v = c.metric(id, metric, "").await;
        if v == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{id} {metric} = {v}, want {want}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn publisher_on_a_and_subscribers_on_b_meet_at_owner_c_in_order() {
    let ids = ["a", "b", "c"];
    let c = TestCluster::start("meet", &ids).await;
    let topic = key_owned_by("orders", Kind::Topic, &ids, "c");

    let subscriber = c.plain_client("b").await;
    let mut s1 = subscriber.subscribe(&topic).await.expect("subscribe 1");
    let mut s2 = subscriber.subscribe(&topic).await.expect("subscribe 2");
    // Two local subscribers on b, ONE upstream subscription at c.
    wait_for(&c, "b", "starling_cluster_upstream_subscriptions", 1.0).await;
    wait_for(&c, "c", "starling_subscriptions", 1.0).await;

    let publisher = c.plain_client("a").await;
    for i in 0..200 {
        publisher
            .publish_acked(&topic, payload(i))
            .await
            .expect("acked through forwarding");
    }
    let want: Vec<u64> = (0..200).collect();
    assert_eq!(recv_indices(&mut s1, 200).await, want);
    assert_eq!(recv_indices(&mut s2, 200).await, want);

    assert_eq!(
        c.metric("a", "starling_cluster_forwarded_total", "op=\"publish\"")
            .await,
        200.0
    );
    assert_eq!(
        c.metric("c", "starling_published_messages_total", "").await,
        200.0
    );
    assert_eq!(c.metric("c", "starling_subscriptions", "").await, 1.0);
    assert_eq!(
        c.metric("b", "starling_cluster_upstream_subscriptions", "")
            .await,
        1.0
    );

    // The last local subscriber leaving releases the upstream.
    s1.unsubscribe().await;
    s2.unsubscribe().await;
    wait_for(&c, "b", "starling_cluster_upstream_subscriptions", 0.0).await;
    wait_for(&c, "c", "starling_subscriptions", 0.0).await;

    // Cache through a plain client: one keyspace, whoever is asked.
    let keys: Vec<String> = (0..30).map(|i| format!("k{i}")).collect();
    for (i, k) in keys.iter().enumerate() {
        publisher
            .cache_put(k.clone(), payload(i as u64), None)
            .await
            .expect("put");
    }
    let reader = c.plain_client("b").await;
    for (i, k) in keys.iter().enumerate() {
        let v = reader.cache_get(k.clone()).await.expect("get");
        assert_eq!(v.as_deref().map(index), Some(i as u64), "{k}");
    }
    assert!(
        c.metric("a", "starling_cluster_forwarded_total", "op=\"cache\"")
            .await
            > 0.0
    );
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_subscription_from_a_time_at_a_non_owner_starts_at_the_owner() {
    let ids = ["a", "b"];
    let c = TestCluster::start("from-time", &ids).await;
    let topic = key_owned_by("orders", Kind::Topic, &ids, "a");
    let publisher = c.plain_client("a").await;
    for i in 0..10 {
        publisher
            .publish_acked(&topic, payload(i))
            .await
            .expect("ack");
    }
    tokio::time::sleep(Duration::from_millis(60)).await;
    let t1 = std::time::SystemTime::now();
    tokio::time::sleep(Duration::from_millis(60)).await;
    for i in 10..20 {
        publisher
            .publish_acked(&topic, payload(i))
            .await
            .expect("ack");
    }
    // b owns nothing of it and has no upstream yet: the time goes with the upstream it starts
    // at a, whose retained tail replays from there; then live.
    let subscriber = c.plain_client("b").await;
    let mut sub = subscriber
        .subscribe_from_time(&topic, t1)
        .await
        .expect("subscribe");
    assert_eq!(
        recv_indices(&mut sub, 10).await,
        (10..20).collect::<Vec<_>>()
    );
    wait_for(&c, "b", "starling_cluster_upstream_subscriptions", 1.0).await;
    for i in 20..25 {
        publisher
            .publish_acked(&topic, payload(i))
            .await
            .expect("ack");
    }
    assert_eq!(
        recv_indices(&mut sub, 5).await,
        (20..25).collect::<Vec<_>>()
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(500), sub.next_event())
            .await
            .is_err(),
        "nothing twice"
    );
    // A routing client goes to the owner itself, with the same result.
    let routed = c.routing_client("b").await;
    let mut direct = routed
        .subscribe_from_time(&topic, t1)
        .await
        .expect("subscribe");
    assert_eq!(
        recv_indices(&mut direct, 15).await,
        (10..25).collect::<Vec<_>>()
    );
    subscriber.close().await;
    routed.close().await;
    publisher.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_sdk_sends_each_topic_and_key_to_its_owner_without_forwarding() {
    let ids = ["a", "b", "c"];
    let c = TestCluster::start("route", &ids).await;
    let client = c.routing_client("a").await;
    assert_eq!(client.routing_epoch(), Some(c.epoch_of(&ids)));

    for owner in ids {
        let topic = key_owned_by("t", Kind::Topic, &ids, owner);
        let mut sub = client.subscribe(&topic).await.expect("subscribe");
        for i in 0..20 {
            client
                .publish_acked(&topic, payload(i))
                .await
                .expect("publish");
        }
        assert_eq!(
            recv_indices(&mut sub, 20).await,
            (0..20).collect::<Vec<_>>()
        );
        assert_eq!(
            c.metric(owner, "starling_published_messages_total", "")
                .await,
            20.0,
            "{owner} received its own topic's publishes"
        );
        sub.unsubscribe().await;
    }
    for i in 0..60u64 {
        client
            .cache_put(format!("key-{i}"), payload(i), None)
            .await
            .expect("put");
    }
    for i in 0..60u64 {
        let v = client.cache_get(format!("key-{i}")).await.expect("get");
        assert_eq!(v.as_deref().map(index), Some(i));
    }
    for id in ids {
        assert!(
            c.metric(id, "starling_cache_entries", "").await > 0.0,
            "{id} holds keys"
        );
    }
    assert_eq!(
        c.metric_sum("starling_cluster_forwarded_total", "").await,
        0.0,
        "a routing client never needs forwarding"
    );
    assert_eq!(c.metric_sum("starling_cluster_moved_total", "").await, 0.0);
    client.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stranger_without_the_peer_certificate_is_not_a_peer() {
    let ids = ["a", "b"];
    let c = TestCluster::start("stranger", &ids).await;
    // Asking for PEER without a certificate: refused in the Starling handshake.
    let bare = c.config("a");
    let err = PeerClient::connect(bare)
        .await
        .expect_err("PEER without the peer certificate is refused");
    assert!(
        matches!(&err, starling_client::ClientError::Unauthorized(m) if m.contains("PEER")),
        "{err}"
    );
    // A `starling:peer` certificate from another CA: the TLS handshake fails.
    let rogue =
        starling_testkit::pki::Ca::new("rogue CA").client(starling_broker::auth::PEER_IDENTITY);
    let forged = c
        .config("a")
        .with_credentials(starling_client::Credentials::Certificate {
            cert_pem: rogue.cert.into_bytes(),
            key_pem: rogue.key.into_bytes(),
        });
    let err = PeerClient::connect(forged)
        .await
        .expect_err("a peer certificate from another CA is refused");
    assert!(
        !matches!(err, starling_client::ClientError::Server { .. }),
        "refused by TLS, before any Starling frame: {err}"
    );
    // The members still reach each other (by their real certificates).
    let got = c.plain_client("a").await;
    let topic = key_owned_by("stranger", Kind::Topic, &ids, "b");
    got.publish_acked(&topic, "x")
        .await
        .expect("forwarded to b");
    got.close().await;
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn permissions_are_checked_where_the_client_arrives_and_peers_forward_freely() {
    let ids = ["a", "b", "c"];
    let token = "cluster-user-token";
    let users = format!(
        "version: 1\nusers:\n  - name: app\n    authentication: {{type: token, sha256: \"{}\"}}\n    permissions:\n      publish: {{allow: [\"ok.>\"]}}\n      subscribe: {{allow: [\"ok.>\"]}}\n      cache_read: {{allow: [\"ok.>\"]}}\n      cache_write: {{allow: [\"ok.>\"]}}\n",
        starling_access::token_hash_hex(token.as_bytes())
    );
    let c = TestCluster::start_with_users("perm", &ids, Some(&users)).await;
    let as_app = |id: &str| {
        c.config(id)
            .without_cluster_routing()
            .with_credentials(starling_client::Credentials::Token(token.into()))
    };
    assert!(matches!(
        starling_client::Client::connect(c.config("a")).await,
        Err(starling_client::ClientError::Unauthorized(_))
    ));
    let on_a = starling_client::Client::connect(as_app("a"))
        .await
        .expect("app on a");
    let on_c = starling_client::Client::connect(as_app("c"))
        .await
        .expect("app on c");
    let topic_b = key_owned_by("ok.t", Kind::Topic, &ids, "b");
    let key_b = key_owned_by("ok.k", Kind::CacheKey, &ids, "b");
    let mut sub = on_c.subscribe(&topic_b).await.expect("subscribe through c");
    tokio::time::sleep(Duration::from_millis(300)).await;
    on_a.publish_acked(&topic_b, payload(1))
        .await
        .expect("forwarded a -> b");
    let ev = tokio::time::timeout(SOON, sub.next_event())
        .await
        .expect("in time")
        .expect("an event")
        .expect("no error");
    assert_eq!(index(&ev.payload), 1);
    on_a.cache_put(key_b.clone(), payload(2), None)
        .await
        .expect("put via a");
    assert_eq!(
        on_c.cache_get(key_b)
            .await
            .expect("get via c")
            .as_deref()
            .map(index),
        Some(2)
    );
    // Refused at the broker the client reached: nothing is forwarded.
    let denied = key_owned_by("no.t", Kind::Topic, &ids, "b");
    let r = on_a.publish_acked(&denied, payload(3)).await;
    assert!(
        matches!(r, Err(starling_client::ClientError::Forbidden { ref op, .. }) if op == "publish"),
        "{r:?}"
    );
    assert_eq!(
        c.metric("a", "starling_forbidden_total", "publish").await,
        1.0
    );
    assert_eq!(
        c.metric("b", "starling_forbidden_total", "publish").await,
        0.0
    );
    on_a.close().await;
    on_c.close().await;
    c.shutdown().await;
}
