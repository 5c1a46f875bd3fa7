//! The chart's observability pack against a real Prometheus scraping real brokers and the
//! operator: every panel query of the Grafana dashboard (`dashboards/starling.json`) returns
//! series, the alert rule file (`rules/starling.rules.yaml`) loads and evaluates without
//! error, one alert, `StarlingOperatorReconcileErrors`, goes active when the operator's
//! reconciles really fail, and another, `StarlingPeerDown`, fires when a broker is gone for good.
//!
//! The dashboard's variables are substituted the way `charts/promtool-check.sh` documents:
//! `$__rate_interval`, `$__interval` and `$__range` become `1m` (Prometheus scrapes every 2 s
//! here, so a minute holds about 30 samples); `$namespace`, `$cluster` and `$operator_namespace`
//! become this test's namespace, BrokerCluster and the operator's namespace; `$pod` becomes
//! `.*`, the variable's "All" value. A variable the test does not know fails it.
//!
//! A reconcile error is made for real: a ResourceQuota of zero Services in a second namespace
//! makes the API server refuse the operator's Service of a BrokerCluster there (403,
//! `reason="forbidden"`), and the operator retries with backoff.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use starling_e2e::{Env, wait};
use starling_operator::crd::BrokerClusterSpec;

use crate::prometheus::Prometheus;

const DASHBOARD: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../charts/starling-operator/dashboards/starling.json"
));
const RULES: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../charts/starling-operator/rules/starling.rules.yaml"
));

fn rules_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/starling-operator/rules/starling.rules.yaml")
}

/// The alert names of the rule file.
fn alert_names() -> BTreeSet<String> {
    RULES
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_string())
        .collect()
}

/// The values the dashboard's variables take in this test.
struct Vars {
    namespace: String,
    cluster: String,
    operator_namespace: String,
}

/// Escapes regex metacharacters (namespace and cluster names are DNS labels, so only `.`
/// could occur; escaped anyway).
fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let special = "\\.+*?()|[]{}^$".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// `expr` with the dashboard's variables replaced; an unknown `$variable` is an error.
fn substitute(expr: &str, vars: &Vars) -> Result<String, String> {
    let mut out = expr.to_string();
    for interval in ["$__rate_interval", "$__interval", "$__range"] {
        out = out.replace(interval, "1m");
    }
    // Longest names first, so `$namespace` does not eat the start of `$operator_namespace`'s
    // neighbours (no variable is a prefix of another, but keep the order safe anyway).
    for (name, value) in [
        (
            "$operator_namespace",
            regex_escape(&vars.operator_namespace),
        ),
        ("$namespace", regex_escape(&vars.namespace)),
        ("$cluster", regex_escape(&vars.cluster)),
        ("$pod", ".*".to_string()),
    ] {
        out = out.replace(name, &value);
    }
    if out.contains('$') {
        return Err(format!("unknown variable left in {out}"));
    }
    Ok(out)
}

/// One query of a dashboard panel.
#[derive(Debug, Clone)]
struct PanelQuery {
    panel: String,
    ref_id: String,
    expr: String,
}

fn panel_queries(dashboard: &serde_json::Value, vars: &Vars) -> Vec<PanelQuery> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().expect("panel title").to_string();
        let targets = panel["targets"].as_array().expect("panel targets");
        assert!(!targets.is_empty(), "panel {title:?} has no query");
        for t in targets {
            let expr = t["expr"].as_str().expect("target expr");
            out.push(PanelQuery {
                panel: title.clone(),
                ref_id: t["refId"].as_str().unwrap_or("?").to_string(),
                expr: substitute(expr, vars).expect("substitution"),
            });
        }
    }
    out
}

/// Publishes, subscribes and uses the cache until stopped, so rates and the latency and
/// hit-ratio panels have something to show. `direct` are clients of single brokers without
/// cluster routing: they publish to topics that other members own, which the brokers forward,
/// so every broker opens its peer links (they are opened on first use).
async fn traffic(
    client: starling_client::Client,
    direct: Vec<starling_client::Client>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut sub = client.subscribe("dashboard").await.expect("subscribe");
    client
        .cache_put("dashboard-key", b"value".to_vec(), None)
        .await
        .expect("cache put");
    let mut i = 0u64;
    while !*stop.borrow() {
        i += 1;
        let _ = client
            .publish_acked("dashboard", i.to_be_bytes().to_vec())
            .await;
        let _ = tokio::time::timeout(Duration::from_secs(2), sub.next_event()).await;
        let _ = client.cache_get("dashboard-key").await;
        if i.is_multiple_of(3) {
            let _ = client.cache_get(format!("absent-{i}")).await;
        }
        for (n, c) in direct.iter().enumerate() {
            let topic = format!("dashboard-{}", (i as usize + n) % 8);
            let _ = c.publish_acked(&topic, i.to_be_bytes().to_vec()).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A client of one broker pod, without cluster routing, as the suite's full-access user.
async fn direct_client(
    ip: std::net::IpAddr,
    user: &starling_e2e::users::UserCredentials,
) -> starling_client::Client {
    let cfg = user.config(format!("{ip}:7400")).without_cluster_routing();
    wait::until(
        &format!("connection to broker {ip}"),
        Duration::from_secs(60),
        || {
            let cfg = cfg.clone();
            async move { starling_client::Client::connect(cfg).await.ok() }
        },
    )
    .await
    .expect("direct client")
}

/// The first active alert of Prometheus's `/api/v1/alerts` that `matches`.
async fn active_alert(
    prom: &Prometheus,
    matches: impl Fn(&serde_json::Value) -> bool,
) -> Option<serde_json::Value> {
    let v = prom.api("/api/v1/alerts").await?;
    v["data"]["alerts"]
        .as_array()?
        .iter()
        .find(|a| matches(a))
        .cloned()
}

#[tokio::test]
async fn dashboard_queries_and_alert_rules_on_real_brokers() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("obs").await.expect("namespace");
    let spec =
        |v: serde_json::Value| -> BrokerClusterSpec { serde_json::from_value(v).expect("spec") };
    // Two brokers, so the peer panels have links to show.
    ns.create_cluster(
        "pack",
        spec(serde_json::json!({ "tier": "small", "replicas": 2 })),
    )
    .await
    .expect("create pack");
    // A spec the operator refuses (a CPU request above the small tier's limit of 1 in
    // e2e/values-e2e.yaml): the refused-specs panel's series.
    ns.create_cluster(
        "refused",
        spec(serde_json::json!({ "tier": "small", "resources": { "requests": { "cpu": "2" } } })),
    )
    .await
    .expect("create refused");
    ns.wait_ready("pack").await.expect("pack Ready");

    let prom = Prometheus::start(
        &env,
        vec![ns.name.clone(), env.operator_namespace.clone()],
        &[rules_path()],
    )
    .await;

    // The rule file loads as it is: Prometheus lists every alert of it.
    let want_alerts = alert_names();
    assert_eq!(
        want_alerts.len(),
        12,
        "the rule file's alerts: {want_alerts:?}"
    );
    let loaded = wait::until("the rule file loaded", Duration::from_secs(60), || async {
        let v = prom.api("/api/v1/rules").await?;
        let names: BTreeSet<String> = v["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .filter(|r| r["type"] == "alerting")
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect();
        (!names.is_empty()).then_some(names)
    })
    .await
    .expect("Prometheus loads rules/starling.rules.yaml");
    assert_eq!(
        loaded, want_alerts,
        "every alert of the rule file is loaded"
    );

    let client = ns.client("pack").await.expect("client");
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut direct = Vec::new();
    let user = ns.full_access_user("pack").await.expect("BrokerUser");
    for pod in ns.broker_pods("pack").await.expect("broker pods") {
        direct.push(direct_client(pod.ip.expect("pod IP"), &user).await);
    }
    assert_eq!(direct.len(), 2, "two broker pods");
    let traffic_task = tokio::spawn(traffic(client, direct, stop_rx));

    // The operator is scraped before its reconciles are made to fail, so the errors are rated
    // from increases this Prometheus saw.
    let operator_scraped = format!(
        "starling_operator_reconcile_total{{namespace=\"{}\"}}",
        env.operator_namespace
    );
    wait::until("operator scraped", Duration::from_secs(90), || async {
        prom.value(&operator_scraped).await
    })
    .await
    .expect("Prometheus scrapes the operator");
    let blocked = env.namespace("obs-quota").await.expect("namespace");
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": { "name": "no-services" },
        "spec": { "hard": { "services": "0" } },
    }))
    .expect("quota");
    Api::<ResourceQuota>::namespaced(env.client.clone(), &blocked.name)
        .create(&PostParams::default(), &quota)
        .await
        .expect("create quota");
    blocked
        .create_cluster("blocked", spec(serde_json::json!({ "tier": "small" })))
        .await
        .expect("create blocked");

    // Every panel query returns at least one series.
    let dashboard: serde_json::Value = serde_json::from_str(DASHBOARD).expect("dashboard JSON");
    let variables: BTreeSet<&str> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str())
        .collect();
    assert_eq!(
        variables,
        BTreeSet::from([
            "datasource",
            "namespace",
            "cluster",
            "pod",
            "operator_namespace"
        ]),
        "the dashboard's variables are the ones this test substitutes"
    );
    let vars = Vars {
        namespace: ns.name.clone(),
        cluster: "pack".into(),
        operator_namespace: env.operator_namespace.clone(),
    };
    let queries = panel_queries(&dashboard, &vars);
    eprintln!("{} panel queries", queries.len());
    // Polled until each has answered with series once: series of a fresh Prometheus appear
    // within seconds, the operator's error series once the quota has refused a Service.
    let mut pending = queries.clone();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while !pending.is_empty() && tokio::time::Instant::now() < deadline {
        let mut still = Vec::new();
        for q in pending {
            match prom.query_vector(&q.expr).await {
                Some(v) if !v.is_empty() => {}
                _ => still.push(q),
            }
        }
        pending = still;
        if !pending.is_empty() {
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }
    let empty: Vec<String> = pending
        .iter()
        .map(|q| format!("{} [{}]: {}", q.panel, q.ref_id, q.expr))
        .collect();
    assert!(
        empty.is_empty(),
        "{} of {} dashboard queries returned no series:\n{}",
        empty.len(),
        queries.len(),
        empty.join("\n")
    );

    // And they show what happened: publishes and deliveries, both peer links up, cache hits
    // and misses, the refused spec and the forbidden Service.
    let by_title = |title: &str| {
        queries
            .iter()
            .find(|q| q.panel == title)
            .unwrap_or_else(|| panic!("panel {title:?}"))
            .expr
            .clone()
    };
    let sum_of =
        |samples: &[crate::prometheus::Sample]| samples.iter().map(|s| s.value).sum::<f64>();
    wait::until(
        "publish and delivery rates above 0",
        Duration::from_secs(60),
        || async {
            let p = prom.query_vector(&by_title("Publish rate")).await?;
            let d = prom.query_vector(&by_title("Delivery rate")).await?;
            (sum_of(&p) > 0.0 && sum_of(&d) > 0.0).then_some(())
        },
    )
    .await
    .expect("the rate panels show the test's traffic");
    let peers = wait::until(
        "both brokers' peer links up",
        Duration::from_secs(60),
        || async {
            let peers = prom.query_vector(&by_title("Peers up")).await?;
            let up: BTreeSet<String> = peers
                .iter()
                .filter(|s| s.value == 1.0)
                .filter_map(|s| s.labels.get("pod").cloned())
                .collect();
            (up.len() == 2).then_some(peers)
        },
    )
    .await
    .expect("each broker has a working link to the other");
    eprintln!("peer links: {peers:?}");
    wait::until(
        "a cache hit ratio between 0 and 1",
        Duration::from_secs(60),
        || async {
            let r = prom.query_vector(&by_title("Cache hit ratio")).await?;
            let v = r.first()?.value;
            (v > 0.0 && v < 1.0).then_some(v)
        },
    )
    .await
    .expect("the hit ratio panel shows hits and misses");
    let refused = prom
        .query_vector(&by_title("Refused specs"))
        .await
        .expect("refused specs");
    assert!(
        refused
            .iter()
            .any(|s| s.labels.get("reason").map(String::as_str) == Some("InvalidResources")),
        "{refused:?}"
    );

    // The variables' label_values() queries find this test's objects.
    for (var, want) in [
        ("namespace", ns.name.clone()),
        ("cluster", "pack".to_string()),
        ("pod", "pack-1".to_string()),
        ("operator_namespace", env.operator_namespace.clone()),
    ] {
        let v = dashboard["templating"]["list"]
            .as_array()
            .expect("templating")
            .iter()
            .find(|v| v["name"] == var)
            .expect("variable");
        let q = v["query"]["query"].as_str().expect("variable query");
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|s| s.strip_suffix(')'))
            .expect("label_values(SELECTOR, LABEL)");
        let (selector, label) = inner.rsplit_once(',').expect("SELECTOR, LABEL");
        let promql = format!(
            "count by ({}) ({})",
            label.trim(),
            substitute(selector, &vars).expect("substitution")
        );
        let values: BTreeSet<String> = prom
            .query_vector(&promql)
            .await
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| s.labels.get(label.trim()).cloned())
            .collect();
        assert!(
            values.contains(&want),
            "variable {var}: {promql} gave {values:?}, want {want}"
        );
    }

    // The reconcile-errors alert goes active (pending: its `for:` is 15 minutes) for the
    // operator pod, because of the refused Service.
    let forbidden = format!(
        "sum(increase(starling_operator_reconcile_errors_total{{namespace=\"{}\", reason=\"forbidden\"}}[5m]))",
        env.operator_namespace
    );
    wait::until(
        "forbidden reconcile errors",
        Duration::from_secs(120),
        || async { prom.value(&forbidden).await.filter(|v| *v > 0.0) },
    )
    .await
    .expect("the quota makes the operator's reconciles fail with forbidden");
    let alert = wait::until(
        "StarlingOperatorReconcileErrors pending or firing",
        Duration::from_secs(120),
        || {
            active_alert(&prom, |a| {
                a["labels"]["alertname"] == "StarlingOperatorReconcileErrors"
                    && matches!(a["state"].as_str(), Some("pending" | "firing"))
            })
        },
    )
    .await
    .expect("the reconcile-errors alert goes active");
    eprintln!("alert: {alert}");
    assert_eq!(
        alert["labels"]["namespace"],
        env.operator_namespace.as_str()
    );
    assert_eq!(alert["labels"]["severity"], "warning");
    assert!(
        alert["annotations"]["runbook_url"]
            .as_str()
            .is_some_and(|u| u.ends_with("docs/operations.md#starlingoperatorreconcileerrors")),
        "{alert}"
    );

    // Every rule evaluates without error against the real series.
    let rules = prom.api("/api/v1/rules").await.expect("rules");
    for g in rules["data"]["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            assert_eq!(r["health"], "ok", "rule {} evaluates: {r}", r["name"]);
        }
    }

    // One alert fires for real: a broker lost for good. With the cluster paused the operator
    // leaves its objects alone, so scaling the StatefulSet to one pod removes pack-1 while the
    // member list still names it; pack-0's forwards to pack-1's topics (the traffic keeps
    // sending them) fail, its link gauge reads 0, and StarlingPeerDown fires after its `for:`
    // of 2 minutes.
    ns.patch_spec("pack", serde_json::json!({ "paused": true }))
        .await
        .expect("pause pack");
    wait::until("pack paused", Duration::from_secs(60), || async {
        let bc = ns.clusters().get("pack").await.ok()?;
        let status = bc.status.as_ref()?;
        let observed = status.observed_generation == bc.metadata.generation;
        let paused = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Progressing" && c.reason == "Paused");
        (observed && paused).then_some(())
    })
    .await
    .expect("the operator reports the pause");
    let scale = serde_json::json!({ "spec": { "replicas": 1 } });
    ns.api::<StatefulSet>()
        .patch_scale("pack", &PatchParams::default(), &Patch::Merge(&scale))
        .await
        .expect("scale the StatefulSet to one pod");
    let firing = wait::until("StarlingPeerDown firing", Duration::from_secs(300), || {
        active_alert(&prom, |a| {
            a["labels"]["alertname"] == "StarlingPeerDown"
                && a["state"] == "firing"
                && a["labels"]["namespace"] == ns.name.as_str()
        })
    })
    .await
    .expect("StarlingPeerDown fires once pack-1 has been gone for 2 minutes");
    eprintln!("firing: {firing}");
    assert_eq!(firing["labels"]["pod"], "pack-0", "{firing}");
    assert_eq!(firing["labels"]["severity"], "critical", "{firing}");
    assert!(
        firing["labels"]["peer"]
            .as_str()
            .is_some_and(|p| p.starts_with("pack-1")),
        "{firing}"
    );

    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(10), traffic_task).await;
    prom.stop().await;
    blocked.delete().await;
    ns.delete().await;
}
