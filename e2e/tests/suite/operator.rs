//! The operator release itself.

use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;
use starling_e2e::{Env, wait};

#[tokio::test]
async fn operator_installed_with_helm_is_ready() {
    let env = Env::new().await.expect("e2e environment");
    let api: Api<Deployment> = Api::namespaced(env.client.clone(), &env.operator_namespace);
    let ready = wait::until(
        "operator Deployment ready",
        std::time::Duration::from_secs(120),
        || {
            let api = api.clone();
            async move {
                let d = api.get("starling-operator").await.ok()?;
                let s = d.status?;
                (s.ready_replicas.unwrap_or(0) >= 1).then_some(s.ready_replicas)
            }
        },
    )
    .await
    .expect("the operator becomes ready");
    assert!(ready.unwrap_or(0) >= 1);
    let labels = api
        .get("starling-operator")
        .await
        .expect("deployment")
        .metadata
        .labels
        .unwrap_or_default();
    assert_eq!(
        labels
            .get("app.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("Helm")
    );
}
