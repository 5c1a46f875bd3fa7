//! A small/balanced BrokerCluster becomes Ready, runs the real broker with the balanced config,
//! and carries a pub/sub round trip and cache traffic from the node through its client Service.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use starling_config::memory::MemoryBudgets;
use starling_config::{ConfigOverrides, Profile, Tier, quantity, resolve};
use starling_e2e::Env;
use starling_operator::crd::BrokerClusterSpec;
use starling_operator::names::Names;
use starling_operator::validate::force_operator_knobs;

#[tokio::test]
async fn small_balanced_cluster_serves_pubsub_and_cache() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("pubsub").await.expect("namespace");
    ns.create_cluster(
        "events",
        BrokerClusterSpec {
            tier: Tier::Small,
            profile: Profile::Balanced,
            ..Default::default()
        },
    )
    .await
    .expect("create");
    let bc = ns.wait_ready("events").await.expect("Ready");
    let status = bc.status.expect("status");
    assert_eq!(status.ready_replicas, status.replicas);
    assert_eq!(status.profile, Some(Profile::Balanced));
    assert_eq!(status.tier, Some(Tier::Small));
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Degraded")
        .map(|c| c.status.clone());
    assert_eq!(degraded.as_deref(), Some("False"));
    let endpoints = status.endpoints.expect("endpoints");
    assert_eq!(endpoints.quic_port, 7400);
    assert!(endpoints.host.starts_with("events."), "{}", endpoints.host);

    // The ConfigMap and every running broker hold the balanced profile at the small tier, with
    // the knobs the operator sets (listeners, the generated TLS secret, the members ConfigMap,
    // authentication and the peer certificate), and the byte budgets and object caps derived
    // from the broker container's memory limit (docs/configuration.md, "Memory fit").
    let mut overrides = ConfigOverrides::default();
    force_operator_knobs(&mut overrides, &Names::new("events"), &ns.name);
    let mut expected = resolve(Profile::Balanced, Some(Tier::Small), &overrides).expect("valid");
    let sts = ns
        .api::<StatefulSet>()
        .get("events")
        .await
        .expect("StatefulSet");
    let limit = sts
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.resources)
        .and_then(|r| r.limits)
        .and_then(|l| l.get("memory").cloned())
        .expect("the broker container has a memory limit");
    let limit = quantity::parse_units(&limit.0).expect("a memory quantity");
    MemoryBudgets::for_limit(limit).apply_to(&mut expected);
    assert_eq!(
        expected.cluster_members_configmap.as_deref(),
        Some("events-members")
    );
    let in_cm = ns
        .configmap_config("events")
        .await
        .expect("ConfigMap config");
    assert_eq!(in_cm, expected);
    let pods = ns.broker_pods("events").await.expect("pods");
    assert_eq!(pods.len(), 1);
    for pod in &pods {
        assert_eq!(
            pod.image, env.broker_image,
            "pods run the real broker image"
        );
        assert_eq!(
            ns.broker_config(pod).await.expect("broker /config"),
            expected
        );
    }

    // Pub/sub and cache from the node through the client Service.
    let client = ns.client("events").await.expect("client");
    let mut sub = client.subscribe("e2e").await.expect("subscribe");
    for i in 0..20u32 {
        client
            .publish_acked("e2e", i.to_be_bytes().to_vec())
            .await
            .expect("publish");
    }
    for i in 0..20u32 {
        let ev = tokio::time::timeout(Duration::from_secs(10), sub.next_event())
            .await
            .expect("event in time")
            .expect("stream open")
            .expect("event");
        assert_eq!(ev.payload.as_ref(), i.to_be_bytes());
    }
    client
        .cache_put("k", "v", Some(Duration::from_secs(60)))
        .await
        .expect("put");
    assert_eq!(
        client.cache_get("k").await.expect("get").as_deref(),
        Some(&b"v"[..])
    );
    client.close().await;
    ns.delete().await;
}
