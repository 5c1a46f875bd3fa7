//! A real Prometheus (Debian's `prometheus` binary, run on the node) discovers the broker pods
//! and the operator from the API server, scrapes them, and sees Starling's series move.
//!
//! Debian builds Prometheus without its Kubernetes discovery (`kubernetes_sd_configs` is "not
//! found in type config.ScrapeConfig" in 2.42.0+ds), and Prometheus does not build from the Go
//! module proxy. So the test gives Prometheus an `http_sd_configs` endpoint that answers from
//! the real API server with what `kubernetes_sd_configs` role `pod` would produce here: every
//! container port named `http` or `metrics` of the pods in the watched namespaces, labelled
//! with namespace and pod. Scraping, storage and queries are Prometheus's own.
//!
//! The operator's PromQL signal source (`--prometheus-url`, `autoscale::promql`) is then run
//! against this Prometheus and must rate the cluster's broker pod with a publish rate above 0.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::ListParams;
use starling_config::Tier;
use starling_e2e::{Env, http, wait};
use starling_operator::autoscale::promql::{self, PromQlSource};
use starling_operator::autoscale::scrape::{Owner, targets};
use starling_operator::crd::BrokerClusterSpec;
use starling_operator::names::{self, Names};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A Debian `prometheus` process on this node, scraping the pods of some namespaces through
/// [`serve_discovery`], with rule files loaded. Killed, and its data removed, on drop.
pub(crate) struct Prometheus {
    /// Its HTTP address.
    pub addr: SocketAddr,
    child: tokio::process::Child,
    sd_task: tokio::task::JoinHandle<()>,
    dir: PathBuf,
}

/// One sample of an instant query's result vector.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    /// The series' labels.
    pub labels: BTreeMap<String, String>,
    /// Its value (NaN and infinities included, as Prometheus answers them).
    pub value: f64,
}

impl Prometheus {
    /// Starts Prometheus (scrape and rule evaluation every 2 s) on the pods of `namespaces`,
    /// loading `rule_files` as they are.
    pub(crate) async fn start(env: &Env, namespaces: Vec<String>, rule_files: &[PathBuf]) -> Self {
        let sd = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("sd listener");
        let sd_addr = sd.local_addr().expect("sd addr");
        let dir = std::env::temp_dir().join(format!(
            "starling-prom-{}-{:08x}",
            namespaces.first().map(String::as_str).unwrap_or("none"),
            rand::random::<u32>()
        ));
        let sd_task = tokio::spawn(serve_discovery(env.clone(), namespaces, sd));
        std::fs::create_dir_all(dir.join("data")).expect("dir");
        let rules: String = rule_files
            .iter()
            .map(|f| format!("  - {}\n", f.display()))
            .collect();
        let cfg = format!(
            r#"global: {{scrape_interval: 2s, evaluation_interval: 2s}}
rule_files:
{}scrape_configs:
  - job_name: starling
    http_sd_configs:
      - url: http://{sd_addr}/targets
        refresh_interval: 2s
"#,
            if rules.is_empty() { "  []\n" } else { &rules }
        );
        std::fs::write(dir.join("prometheus.yml"), cfg).expect("config");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .expect("port")
            .local_addr()
            .expect("addr")
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().expect("addr");
        let child = tokio::process::Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("Debian's prometheus is installed (e2e/cluster/install.sh)");
        Prometheus {
            addr,
            child,
            sd_task,
            dir,
        }
    }

    /// `GET path` of its HTTP API as JSON, if it answers 200.
    pub(crate) async fn api(&self, path: &str) -> Option<serde_json::Value> {
        let (status, body) = http::get(self.addr, path).await.ok()?;
        if status != 200 {
            return None;
        }
        serde_json::from_str(&body).ok()
    }

    /// The result vector of an instant query of `q` now, if the query succeeds.
    pub(crate) async fn query_vector(&self, q: &str) -> Option<Vec<Sample>> {
        let url: promql::PrometheusUrl = format!("http://{}", self.addr).parse().ok()?;
        let (status, body) = http::get_url(&url.query_url(q, Timestamp::now()))
            .await
            .ok()?;
        if status != 200 {
            return None;
        }
        let v: serde_json::Value = serde_json::from_str(&body).ok()?;
        if v["data"]["resultType"] != "vector" {
            return None;
        }
        v["data"]["result"]
            .as_array()?
            .iter()
            .map(|r| {
                let labels = serde_json::from_value(r["metric"].clone()).ok()?;
                let value = r["value"][1].as_str()?.parse().ok()?;
                Some(Sample { labels, value })
            })
            .collect()
    }

    /// The value of a one-sample instant query, if Prometheus has it.
    pub(crate) async fn value(&self, q: &str) -> Option<f64> {
        self.query_vector(q).await?.first().map(|s| s.value)
    }

    /// Stops Prometheus and waits for it to exit; dropping it then stops the discovery
    /// endpoint and removes the data.
    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Also when a test panics: the process is killed (`kill_on_drop`), the discovery endpoint
/// stopped and the data directory removed.
impl Drop for Prometheus {
    fn drop(&mut self) {
        self.sd_task.abort();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Kubernetes-backed HTTP service discovery: lists the pods of `namespaces` from the API
/// server on every request and answers in Prometheus's `http_sd` format. Like the chart's
/// PodMonitor (`podTargetLabels`), a pod's `starling.dev/cluster` label becomes the target
/// label `starling_dev_cluster`.
async fn serve_discovery(env: Env, namespaces: Vec<String>, listener: tokio::net::TcpListener) {
    loop {
        let Ok((mut stream, _)) = listener.accept().await else {
            return;
        };
        let mut groups = Vec::new();
        for ns in &namespaces {
            let pods: Api<Pod> = Api::namespaced(env.client.clone(), ns);
            let Ok(list) = pods.list(&ListParams::default()).await else {
                continue;
            };
            for pod in list.items {
                let name = pod.metadata.name.clone().unwrap_or_default();
                let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
                    continue;
                };
                let mut labels = serde_json::json!({ "namespace": ns, "pod": name });
                if let Some(cluster) = pod
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(names::CLUSTER_LABEL))
                {
                    labels["starling_dev_cluster"] = cluster.clone().into();
                }
                let ports = pod
                    .spec
                    .iter()
                    .flat_map(|s| s.containers.iter())
                    .flat_map(|c| c.ports.iter().flatten());
                for port in ports.filter(|p| matches!(p.name.as_deref(), Some("http" | "metrics")))
                {
                    groups.push(serde_json::json!({
                        "targets": [format!("{ip}:{}", port.container_port)],
                        "labels": labels,
                    }));
                }
            }
        }
        let body = serde_json::Value::Array(groups).to_string();
        let resp = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let mut buf = [0u8; 4096];
        let _ = stream.read(&mut buf).await;
        let _ = stream.write_all(resp.as_bytes()).await;
    }
}

#[tokio::test]
async fn prometheus_discovers_and_scrapes_brokers_and_operator() {
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

    let prom = Prometheus::start(
        &env,
        vec![ns.name.clone(), env.operator_namespace.clone()],
        &[],
    )
    .await;
    let prom_addr = prom.addr;

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
        prom.value(&published).await.filter(|v| *v >= 10.0)
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
        prom.value(&published).await.filter(|v| *v >= first + 10.0)
    })
    .await
    .expect("the publish counter moves");

    // The operator's PromQL source (`--prometheus-url`), against this real Prometheus, with its
    // default selector (this test's namespace, the cluster's pods): it rates every broker pod.
    let source = PromQlSource::new(
        format!("http://{prom_addr}")
            .parse()
            .expect("Prometheus URL"),
        promql::DEFAULT_SELECTOR,
        Duration::from_secs(30),
        promql::Access::default(),
    )
    .expect("PromQL source");
    let listed = Api::<Pod>::namespaced(env.client.clone(), &ns.name)
        .list(&ListParams::default().labels(&Names::new("watched").selector_string()))
        .await
        .expect("list broker pods");
    // The autoscaler's own rule: only the StatefulSet's pods count (scrape::owned_by).
    let names = Names::new("watched");
    let sts = Api::<StatefulSet>::namespaced(env.client.clone(), &ns.name)
        .get(&names.statefulset)
        .await
        .expect("the cluster's StatefulSet");
    let owner = Owner {
        name: &names.statefulset,
        uid: sts.metadata.uid.as_deref().expect("a StatefulSet UID"),
        replicas: sts
            .spec
            .as_ref()
            .and_then(|s| s.replicas)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(1),
    };
    let pods: Vec<String> = targets(&listed.items, &owner)
        .into_iter()
        .map(|t| t.pod)
        .collect();
    assert!(!pods.is_empty(), "the cluster has broker pods");
    let mut prev = Timestamp::now();
    let obs = wait::until(
        "the PromQL source rates every broker pod",
        Duration::from_secs(60),
        || {
            let (source, pods, client, namespace) = (&source, &pods, &client, &ns.name);
            let from = prev;
            let at = Timestamp::now();
            prev = at;
            async move {
                // Keep the counter moving inside the rate window.
                client.publish_acked("scraped", vec![1u8]).await.ok()?;
                let o = source
                    .observe(
                        namespace,
                        "watched",
                        pods,
                        pods.len(),
                        Duration::from_secs(5),
                        Some(from),
                        at,
                    )
                    .await;
                eprintln!(
                    "PromQL observation: {}/{} pods rated, publish {:.2} msg/s, missing {:?}",
                    o.pods_rated,
                    o.pods_expected,
                    o.load(),
                    o.missing
                );
                (o.complete() && o.load() > 0.0).then_some(o)
            }
        },
    )
    .await
    .expect("the PromQL source rates the cluster's pods from the real Prometheus");
    assert_eq!(obs.pods_rated, pods.len());
    assert_eq!(obs.pods_expected, pods.len());
    assert!(obs.total.publish > 0.0, "{obs:?}");
    assert!(obs.missing.is_empty(), "{obs:?}");
    assert_eq!(
        obs.pod_cpu.keys().cloned().collect::<Vec<_>>(),
        pods,
        "a CPU rate per pod"
    );

    let reconciles = format!(
        "sum(starling_operator_reconcile_total{{namespace=\"{}\"}})",
        env.operator_namespace
    );
    let before = wait::until(
        "operator series scraped",
        Duration::from_secs(90),
        || async { prom.value(&reconciles).await.filter(|v| *v > 0.0) },
    )
    .await
    .expect("Prometheus scrapes the operator's reconcile counter");
    ns.patch_spec("watched", serde_json::json!({ "replicas": 2 }))
        .await
        .expect("patch");
    wait::until(
        "reconcile counter moves",
        Duration::from_secs(90),
        || async { prom.value(&reconciles).await.filter(|v| *v > before) },
    )
    .await
    .expect("the reconcile counter moves");

    prom.stop().await;
    ns.delete().await;
}
