//! The API server refuses bad specs with the CRD's own messages.

use kube::api::{DynamicObject, PostParams};
use kube::discovery::ApiResource;
use kube::{Api, Resource};
use starling_e2e::Env;
use starling_operator::crd::BrokerCluster;

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
