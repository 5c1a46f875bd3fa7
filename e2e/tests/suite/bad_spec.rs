//! The API server refuses bad specs with the CRD's own messages.

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Resource};
use starling_e2e::Env;
use starling_operator::crd::{BrokerCluster, BrokerClusterSpec};

async fn refused(env: &Env, ns: &str, spec: serde_json::Value) -> String {
    let ar = ApiResource::erase::<BrokerCluster>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), ns, &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": BrokerCluster::api_version(&()),
        "kind": BrokerCluster::kind(&()),
        "metadata": { "name": "bad" },
        "spec": spec,
    }))
    .expect("object");
    match api.create(&PostParams::default(), &obj).await {
        Ok(_) => panic!("the API server accepted {spec}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            status.message
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
}

#[tokio::test]
async fn bad_specs_are_refused_with_clear_messages() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("badspec").await.expect("namespace");
    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({
            "autoscaling": { "enabled": true, "minTier": "large", "maxTier": "small" }
        }),
    )
    .await;
    assert!(msg.contains("minTier") && msg.contains("maxTier"), "{msg}");
    let msg = refused(&env, &ns.name, serde_json::json!({ "profile": "fastest" })).await;
    assert!(msg.contains("profile") && msg.contains("fastest"), "{msg}");
    let msg = refused(&env, &ns.name, serde_json::json!({ "replicas": 0 })).await;
    assert!(msg.contains("replicas"), "{msg}");
    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({ "config": { "event_batch_max_events": 0 } }),
    )
    .await;
    assert!(msg.contains("event_batch_max_events"), "{msg}");
    ns.delete().await;
}

/// `replicas` is capped at `starling_config::MAX_REPLICAS` by the CRD, through the spec and
/// through the `/scale` subresource (the autoscaling path), so one spec cannot make the
/// operator render a member list for billions of brokers.
#[tokio::test]
async fn replicas_past_the_cap_are_refused_by_the_api_server() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("replicascap").await.expect("namespace");
    let max = starling_config::MAX_REPLICAS;
    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({ "replicas": 2147483647 }),
    )
    .await;
    assert!(
        msg.contains(&format!("replicas must be at most {max}")),
        "{msg}"
    );
    let msg = refused(&env, &ns.name, serde_json::json!({ "replicas": max + 1 })).await;
    assert!(msg.contains("replicas"), "{msg}");

    // A valid cluster, paused so the test does not wait for brokers: /scale past the cap is
    // refused with the same rule and the stored spec keeps its value.
    ns.create_cluster(
        "capped",
        BrokerClusterSpec {
            replicas: Some(1),
            paused: true,
            ..Default::default()
        },
    )
    .await
    .expect("create");
    let scale = serde_json::json!({ "spec": { "replicas": 2147483647 } });
    match ns
        .clusters()
        .patch_scale("capped", &PatchParams::default(), &Patch::Merge(&scale))
        .await
    {
        Ok(s) => panic!("the API server accepted /scale to 2147483647: {s:?}"),
        Err(kube::Error::Api(status)) => {
            assert_eq!(status.code, 422, "{status:?}");
            assert!(status.message.contains("replicas"), "{}", status.message);
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    let stored = ns.clusters().get("capped").await.expect("get");
    assert_eq!(stored.spec.replicas, Some(1));
    ns.delete().await;
}

/// A spec whose worst case does not fit the broker container's memory limit is refused by the
/// operator (the shared memory-fit formula in starling-config): `Degraded` with reason
/// `InvalidConfig` and a message naming the knobs and the numbers, and no StatefulSet.
#[tokio::test]
async fn a_config_that_does_not_fit_its_memory_limit_is_refused_by_the_operator() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("memfit").await.expect("namespace");
    let spec: BrokerClusterSpec = serde_json::from_value(serde_json::json!({
        "resources": { "limits": { "memory": "256Mi" } },
        "config": { "cache_max_bytes": 4_294_967_296u64 },
    }))
    .expect("spec");
    ns.create_cluster("toobig", spec).await.expect("create");
    let api = ns.clusters();
    let message = starling_e2e::wait::until(
        "BrokerCluster toobig Degraded by the memory fit",
        Duration::from_secs(60),
        || {
            let api = api.clone();
            async move {
                let bc = api.get("toobig").await.ok()?;
                let c = bc
                    .status?
                    .conditions
                    .into_iter()
                    .find(|c| c.type_ == "Degraded" && c.status == "True")?;
                (c.reason == "InvalidConfig").then_some(c.message)
            }
        },
    )
    .await
    .expect("Degraded with InvalidConfig");
    assert!(message.contains("memory limit is 256.0 MiB"), "{message}");
    assert!(message.contains("cache_max_bytes"), "{message}");
    let sts = ns
        .api::<StatefulSet>()
        .get_opt("toobig")
        .await
        .expect("get StatefulSet");
    assert!(sts.is_none(), "a refused spec renders no StatefulSet");
    ns.delete().await;
}

/// CPU, memory and volume sizes are int-or-string like a pod's: `cpu: 2` and
/// `memory: 1073741824` written as JSON integers are admitted and stored as written, while a
/// string that is not a quantity, a negative number and a fractional number are refused.
#[tokio::test]
async fn integer_quantities_are_admitted_and_bad_ones_refused() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("quantities").await.expect("namespace");
    let ar = ApiResource::erase::<BrokerCluster>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(env.client.clone(), &ns.name, &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": BrokerCluster::api_version(&()),
        "kind": BrokerCluster::kind(&()),
        "metadata": { "name": "ints" },
        "spec": {
            "paused": true,
            "resources": {
                "requests": { "cpu": 1, "memory": 536_870_912 },
                "limits": { "cpu": 2, "memory": 1_073_741_824 }
            },
            "storage": { "size": 1_073_741_824 }
        },
    }))
    .expect("object");
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .unwrap_or_else(|e| panic!("the API server refused integer quantities: {e}"));
    let limits = &created.data["spec"]["resources"]["limits"];
    assert_eq!(limits["cpu"], serde_json::json!(2), "stored as written");
    assert_eq!(limits["memory"], serde_json::json!(1_073_741_824));
    let typed = ns.clusters().get("ints").await.expect("get");
    let limits = typed.spec.resources.and_then(|r| r.limits).expect("limits");
    assert_eq!(limits.cpu.as_ref().map(|q| q.as_str()), Some("2"));
    assert_eq!(
        limits.memory.as_ref().map(|q| q.as_str()),
        Some("1073741824")
    );

    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({ "paused": true, "resources": { "limits": { "memory": "lots" } } }),
    )
    .await;
    assert!(msg.contains("must be a Kubernetes quantity"), "{msg}");
    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({ "paused": true, "resources": { "requests": { "cpu": -1 } } }),
    )
    .await;
    assert!(msg.contains("must be a Kubernetes quantity"), "{msg}");
    let msg = refused(
        &env,
        &ns.name,
        serde_json::json!({ "paused": true, "storage": { "size": 0.5 } }),
    )
    .await;
    assert!(msg.contains("storage.size"), "{msg}");
    ns.delete().await;
}
