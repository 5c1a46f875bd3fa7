//! A 3-broker BrokerCluster behaves as one broker through its client Service: the members
//! ConfigMap lists every broker, every broker runs with it and with the shared generated
//! certificate, and traffic split over separate connections (which kube-proxy may land on
//! different brokers) meets: a subscriber on one connection receives, in order, what a
//! publisher on another sends, and a cache value written through one connection is read
//! through another.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use starling_config::Tier;
use starling_e2e::Env;
use starling_operator::crd::BrokerClusterSpec;

const CLUSTER: &str = "mesh";
const TOPIC: &str = "mesh-orders";
const MESSAGES: u32 = 50;
const KEYS: u32 = 20;

fn payload(i: u32) -> Vec<u8> {
    format!("order-{i:03}").into_bytes()
}

#[tokio::test]
async fn cluster_meets_through_service() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("cluster").await.expect("namespace");
    ns.create_cluster(
        CLUSTER,
        BrokerClusterSpec {
            tier: Tier::Small,
            replicas: Some(3),
            ..Default::default()
        },
    )
    .await
    .expect("create");
    let bc = ns.wait_ready(CLUSTER).await.expect("Ready");
    let status = bc.status.expect("status");
    assert_eq!(status.ready_replicas, 3);
    assert_eq!(status.members, Some(3), "every broker is a member");

    // The member list, in the format the brokers read.
    let cm = ns
        .api::<ConfigMap>()
        .get(&format!("{CLUSTER}-members"))
        .await
        .expect("members ConfigMap");
    let data: BTreeMap<String, String> = cm.data.unwrap_or_default();
    let members: Vec<&str> = data.get("members").map_or(vec![], |m| m.lines().collect());
    let want: Vec<String> = (0..3)
        .map(|i| {
            format!(
                "{CLUSTER}-{i} {CLUSTER}-{i}.{CLUSTER}-headless.{}.svc.cluster.local:7400",
                ns.name
            )
        })
        .collect();
    assert_eq!(members, want);

    // One generated certificate, named in every broker's config.
    let secret = ns
        .api::<Secret>()
        .get(&format!("{CLUSTER}-tls"))
        .await
        .expect("generated TLS secret");
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    let pods = ns.broker_pods(CLUSTER).await.expect("pods");
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        let cfg = ns.broker_config(pod).await.expect("broker /config");
        assert_eq!(
            cfg.cluster_members_configmap.as_deref(),
            Some("mesh-members"),
            "{}",
            pod.name
        );
        assert_eq!(
            cfg.tls_cert_file.as_deref(),
            Some(std::path::Path::new("/etc/starling/tls/tls.crt")),
            "{}",
            pod.name
        );
    }
    // Whichever broker a new connection lands on, it presents the shared certificate.
    for _ in 0..6 {
        let c = ns
            .verified_client(CLUSTER)
            .await
            .expect("a connection verified against the generated certificate");
        c.close().await;
    }

    // Pub/sub across connections. The subscriber and the publisher are separate clients,
    // so kube-proxy may route them to different brokers. Warm-up messages are published until
    // the subscriber sees one (the subscription may take a poll interval to reach the topic's
    // owner); then the 50 acked messages must all arrive, in order.
    let subscriber = ns.client(CLUSTER).await.expect("subscriber client");
    let mut sub = subscriber.subscribe(TOPIC).await.expect("subscribe");
    let publisher = ns.client(CLUSTER).await.expect("publisher client");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut warm = 0u32;
    loop {
        warm += 1;
        publisher
            .publish_acked(TOPIC, format!("warm-{warm}").into_bytes())
            .await
            .unwrap_or_else(|e| panic!("warm-up publish {warm}: {e}"));
        let seen = tokio::time::timeout(Duration::from_millis(500), sub.next_event()).await;
        if let Ok(Some(Ok(ev))) = seen
            && ev.payload.starts_with(b"warm-")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the subscriber saw none of {warm} warm-up messages in 30 s"
        );
    }
    for i in 0..MESSAGES {
        publisher
            .publish_acked(TOPIC, payload(i))
            .await
            .unwrap_or_else(|e| panic!("publish {i}: {e}"));
    }
    let mut received = Vec::new();
    while received.len() < MESSAGES as usize {
        let ev = tokio::time::timeout(Duration::from_secs(10), sub.next_event())
            .await
            .unwrap_or_else(|_| panic!("only {} of {MESSAGES} messages arrived", received.len()))
            .expect("subscription open")
            .expect("event");
        if ev.payload.starts_with(b"warm-") {
            continue; // late warm-up messages
        }
        received.push(ev.payload.to_vec());
    }
    let want: Vec<Vec<u8>> = (0..MESSAGES).map(payload).collect();
    assert_eq!(received, want, "every message, in publish order");
    publisher.close().await;
    subscriber.close().await;

    // The cache across connections: put through one client, get through a fresh one.
    let writer = ns.client(CLUSTER).await.expect("writer client");
    for i in 0..KEYS {
        writer
            .cache_put(
                format!("mesh-key-{i}"),
                format!("value-{i}"),
                Some(Duration::from_secs(300)),
            )
            .await
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
    writer.close().await;
    let reader = ns.client(CLUSTER).await.expect("reader client");
    for i in 0..KEYS {
        let got = reader
            .cache_get(format!("mesh-key-{i}"))
            .await
            .unwrap_or_else(|e| panic!("get {i}: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(format!("value-{i}").as_bytes()),
            "mesh-key-{i}"
        );
    }
    reader.close().await;
    ns.delete().await;
}
