//! A real Prometheus (Debian's `prometheus` binary, run on the node) discovers the broker pods
//! and the operator through `kubernetes_sd_configs` against the API server, scrapes them, and
//! sees Starling's series move.

use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use starling_config::Tier;
use starling_e2e::{Env, http, wait};
use starling_operator::crd::BrokerClusterSpec;

fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The value of a one-sample instant query, if Prometheus has it.
async fn query(prom: SocketAddr, q: &str) -> Option<f64> {
    let (status, body) = http::get(prom, &format!("/api/v1/query?query={}", encode(q)))
        .await
        .ok()?;
    if status != 200 {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

/// A ServiceAccount allowed to list and watch pods, and a token for it.
async fn discovery_token(env: &Env, ns: &str) -> String {
    let name = format!("{ns}-prometheus");
    let sa = ServiceAccount {
        metadata: ObjectMeta {
            name: Some("prometheus".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<ServiceAccount>::namespaced(env.client.clone(), ns)
        .create(&PostParams::default(), &sa)
        .await
        .expect("sa");
    let role = ClusterRole {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![String::new()]),
            resources: Some(vec!["pods".into()]),
            verbs: vec!["get".into(), "list".into(), "watch".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    Api::<ClusterRole>::all(env.client.clone())
        .create(&PostParams::default(), &role)
        .await
        .expect("role");
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: name.clone(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: "prometheus".into(),
            namespace: Some(ns.into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(env.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .expect("binding");
    request_token(env, ns).await
}

/// A bound token for the `prometheus` ServiceAccount (TokenRequest API).
async fn request_token(env: &Env, ns: &str) -> String {
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": { "expirationSeconds": 3600 }
    });
    let req = kube::core::Request::new(format!("/api/v1/namespaces/{ns}/serviceaccounts"));
    let http_req = req
        .create_subresource(
            "token",
            "prometheus",
            &PostParams::default(),
            serde_json::to_vec(&body).expect("json"),
        )
        .expect("request");
    let resp: serde_json::Value = env.client.request(http_req).await.expect("token request");
    resp["status"]["token"]
        .as_str()
        .expect("token in response")
        .to_string()
}

#[tokio::test]
async fn prometheus_scrapes_brokers_and_operator_via_kubernetes_sd() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("prom").await.expect("namespace");
    ns.create_cluster(
        "watched",
        BrokerClusterSpec {
            tier: Tier::Small,
            ..Default::default()
        },
    )
    .await
    .expect("create");
    ns.wait_ready("watched").await.expect("Ready");

    let token = discovery_token(&env, &ns.name).await;
    let dir = std::env::temp_dir().join(format!("starling-prom-{}", ns.name));
    std::fs::create_dir_all(dir.join("data")).expect("dir");
    std::fs::write(dir.join("token"), &token).expect("token file");
    let server = kube::Config::infer()
        .await
        .expect("kubeconfig")
        .cluster_url
        .to_string();
    let cfg = format!(
        r#"global: {{scrape_interval: 2s, evaluation_interval: 2s}}
scrape_configs:
  - job_name: starling
    kubernetes_sd_configs:
      - role: pod
        api_server: {server}
        bearer_token_file: {token}
        tls_config: {{insecure_skip_verify: true}}
        namespaces: {{names: [{ns}, {opns}]}}
    relabel_configs:
      - source_labels: [__meta_kubernetes_pod_container_port_name]
        regex: http|metrics
        action: keep
      - source_labels: [__meta_kubernetes_namespace]
        target_label: namespace
      - source_labels: [__meta_kubernetes_pod_name]
        target_label: pod
"#,
        token = dir.join("token").display(),
        ns = ns.name,
        opns = env.operator_namespace,
    );
    std::fs::write(dir.join("prometheus.yml"), cfg).expect("config");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("port")
        .local_addr()
        .expect("addr")
        .port();
    let prom_addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
    let mut prom = tokio::process::Command::new("prometheus")
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address={prom_addr}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("Debian's prometheus is installed (e2e/cluster/install.sh)");

    let published = format!(
        "sum(starling_published_messages_total{{namespace=\"{}\"}})",
        ns.name
    );
    let client = ns.client("watched").await.expect("client");
    for i in 0..10u32 {
        client
            .publish_acked("scraped", i.to_be_bytes().to_vec())
            .await
            .expect("publish");
    }
    let first = wait::until("broker series scraped", Duration::from_secs(90), || async {
        query(prom_addr, &published).await.filter(|v| *v >= 10.0)
    })
    .await
    .expect("Prometheus scrapes the broker's publish counter");
    for i in 0..10u32 {
        client
            .publish_acked("scraped", i.to_be_bytes().to_vec())
            .await
            .expect("publish");
    }
    wait::until("broker counter moves", Duration::from_secs(60), || async {
        query(prom_addr, &published)
            .await
            .filter(|v| *v >= first + 10.0)
    })
    .await
    .expect("the publish counter moves");

    let reconciles = format!(
        "sum(starling_operator_reconcile_total{{namespace=\"{}\"}})",
        env.operator_namespace
    );
    let before = wait::until(
        "operator series scraped",
        Duration::from_secs(90),
        || async { query(prom_addr, &reconciles).await.filter(|v| *v > 0.0) },
    )
    .await
    .expect("Prometheus scrapes the operator's reconcile counter");
    ns.patch_spec("watched", serde_json::json!({ "replicas": 2 }))
        .await
        .expect("patch");
    wait::until(
        "reconcile counter moves",
        Duration::from_secs(90),
        || async { query(prom_addr, &reconciles).await.filter(|v| *v > before) },
    )
    .await
    .expect("the reconcile counter moves");

    let _ = prom.kill().await;
    let _ = std::fs::remove_dir_all(&dir);
    let name = format!("{}-prometheus", ns.name);
    let _ = Api::<ClusterRoleBinding>::all(env.client.clone())
        .delete(&name, &Default::default())
        .await;
    let _ = Api::<ClusterRole>::all(env.client.clone())
        .delete(&name, &Default::default())
        .await;
    ns.delete().await;
}
