//! Operator restarts mid-rollout converge without duplicates, and deleting a BrokerCluster
//! garbage-collects every child (StatefulSet, ConfigMaps, Services, ServiceAccount, Role,
//! RoleBinding, the generated TLS, CA, peer certificate and users Secrets, NetworkPolicy, PDB
//! and pods).

use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::Api;
use kube::api::{DeleteParams, ListParams};
use starling_config::{Profile, Tier};
use starling_e2e::{Env, TestNamespace, wait};
use starling_operator::crd::BrokerClusterSpec;

const MANAGED: &str = "app.kubernetes.io/managed-by=starling-operator";

async fn count<K>(ns: &TestNamespace) -> usize
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    <K as kube::Resource>::DynamicType: Default,
{
    ns.api::<K>()
        .list(&ListParams::default().labels(MANAGED))
        .await
        .map(|l| l.items.len())
        .unwrap_or(usize::MAX)
}

/// The operator's Secrets in the namespace, by name, sorted.
async fn secret_names(ns: &TestNamespace) -> Vec<String> {
    let mut names: Vec<String> = ns
        .api::<Secret>()
        .list(&ListParams::default().labels(MANAGED))
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The Secrets the operator keeps for a cluster without `spec.tls` and without BrokerUsers: its
/// CA, the brokers' peer certificate, the generated TLS certificate and the users document.
fn cluster_secrets(cluster: &str) -> Vec<String> {
    ["ca", "peer", "tls", "users"]
        .iter()
        .map(|s| format!("{cluster}-{s}"))
        .collect()
}

#[tokio::test]
async fn operator_restart_mid_rollout_converges_without_duplicates() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("restart").await.expect("namespace");
    let spec = BrokerClusterSpec {
        tier: Tier::Small,
        replicas: Some(2),
        ..Default::default()
    };
    ns.create_cluster("sturdy", spec).await.expect("create");
    ns.wait_ready("sturdy").await.expect("Ready");

    ns.patch_spec("sturdy", serde_json::json!({ "profile": "throughput" }))
        .await
        .expect("patch");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let operator_pods: Api<Pod> = Api::namespaced(env.client.clone(), &env.operator_namespace);
    let list = operator_pods
        .list(&ListParams::default().labels("app.kubernetes.io/name=starling-operator"))
        .await
        .expect("operator pods");
    assert!(!list.items.is_empty(), "operator pods exist");
    for p in list.items {
        if let Some(name) = p.metadata.name {
            operator_pods
                .delete(&name, &DeleteParams::default())
                .await
                .expect("delete operator pod");
        }
    }

    let bc = ns
        .wait_ready("sturdy")
        .await
        .expect("converges after the restart");
    assert_eq!(
        bc.status.as_ref().and_then(|s| s.profile),
        Some(Profile::Throughput)
    );
    for pod in ns.broker_pods("sturdy").await.expect("pods") {
        assert_eq!(
            ns.broker_config(&pod).await.expect("config").profile,
            Profile::Throughput
        );
    }
    assert_eq!(count::<StatefulSet>(&ns).await, 1);
    assert_eq!(count::<ConfigMap>(&ns).await, 2, "config + members");
    assert_eq!(count::<Service>(&ns).await, 2, "headless + client");
    assert_eq!(count::<ServiceAccount>(&ns).await, 1);
    assert_eq!(count::<Role>(&ns).await, 1);
    assert_eq!(count::<RoleBinding>(&ns).await, 1);
    assert_eq!(secret_names(&ns).await, cluster_secrets("sturdy"));
    assert_eq!(count::<NetworkPolicy>(&ns).await, 1);
    assert_eq!(count::<PodDisruptionBudget>(&ns).await, 1);
    ns.delete().await;
}

#[tokio::test]
async fn deleting_the_cluster_garbage_collects_every_child() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("gc").await.expect("namespace");
    let spec = BrokerClusterSpec {
        tier: Tier::Small,
        replicas: Some(2),
        ..Default::default()
    };
    ns.create_cluster("doomed", spec).await.expect("create");
    ns.wait_ready("doomed").await.expect("Ready");
    assert!(count::<StatefulSet>(&ns).await == 1 && count::<PodDisruptionBudget>(&ns).await == 1);
    assert!(
        count::<Role>(&ns).await == 1
            && count::<RoleBinding>(&ns).await == 1
            && count::<ConfigMap>(&ns).await == 2
            && count::<NetworkPolicy>(&ns).await == 1,
        "the brokers' Role, RoleBinding, members ConfigMap and NetworkPolicy exist"
    );
    assert_eq!(secret_names(&ns).await, cluster_secrets("doomed"));

    ns.clusters()
        .delete("doomed", &DeleteParams::foreground())
        .await
        .expect("delete");
    wait::until(
        "children garbage-collected",
        Duration::from_secs(120),
        || {
            let ns = &ns;
            async move {
                let left = count::<StatefulSet>(ns).await
                    + count::<ConfigMap>(ns).await
                    + count::<Service>(ns).await
                    + count::<ServiceAccount>(ns).await
                    + count::<Role>(ns).await
                    + count::<RoleBinding>(ns).await
                    + count::<Secret>(ns).await
                    + count::<NetworkPolicy>(ns).await
                    + count::<PodDisruptionBudget>(ns).await
                    + ns.broker_pods("doomed")
                        .await
                        .map(|p| p.len())
                        .unwrap_or(usize::MAX);
                (left == 0).then_some(())
            }
        },
    )
    .await
    .expect("every child is deleted");
    ns.delete().await;
}
