//! `helm test` of the chart on the real cluster: the chart's test hook (templates/tests/) run by
//! helm itself, against the suite's operator and broker image.
//!
//! The test installs its own release of the chart into its namespace (no operator pod of its
//! own: `replicas=0`, so the suite's operator, which watches every namespace, reconciles the
//! hook's objects; `watchNamespaces` is the test's namespace, so every object of the release is
//! namespaced and goes with the namespace), then runs `helm test` three times:
//!
//! 1. default values: the hook creates a throwaway BrokerCluster, a least-privilege BrokerUser
//!    and the `starling check` pod; it passes, and the cluster and user are gone afterwards
//!    (hook-succeeded) while the pod stays for its logs;
//! 2. after a `helm upgrade` naming an existing cluster (`tests.brokerCluster`): it passes again
//!    against that cluster (before-hook-creation replaced the first run's pod), and creates no
//!    cluster of its own;
//! 3. with that cluster's brokers stopped (paused, StatefulSet scaled to 0) and a short retry
//!    bound: `helm test` fails within its bound, and the pod's log says why.

use std::process::Output;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{LogParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use starling_e2e::{Env, TestNamespace, wait};
use starling_operator::crd::{BrokerCluster, BrokerClusterSpec};

/// The chart in this checkout.
const CHART: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../charts/starling-operator");
/// Bound of one `helm` command (`helm test`'s own --timeout is below it).
const HELM_WITHIN: Duration = Duration::from_secs(420);

/// Runs `helm ARGS` (`HELM`, else `helm` on PATH, which `make e2e` puts first) to completion.
async fn helm(args: &[String]) -> Output {
    let helm = std::env::var_os("HELM").unwrap_or_else(|| "helm".into());
    let run = tokio::process::Command::new(&helm)
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(HELM_WITHIN, run)
        .await
        .unwrap_or_else(|_| panic!("helm {args:?} did not finish within {HELM_WITHIN:?}"))
        .unwrap_or_else(|e| panic!("cannot run {helm:?}: {e}"))
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `helm test RELEASE`, with its time.
async fn helm_test(ns: &TestNamespace, release: &str) -> (Output, Duration) {
    let started = Instant::now();
    let out = helm(&args(&[
        "test",
        release,
        "--namespace",
        &ns.name,
        "--timeout",
        "6m",
    ]))
    .await;
    (out, started.elapsed())
}

/// The test pod (`<release>-starling-operator-test`) and its log.
async fn test_pod(ns: &TestNamespace, name: &str) -> (Pod, String) {
    let pods = ns.api::<Pod>();
    let pod = pods
        .get(name)
        .await
        .expect("the test pod is kept after its run");
    let log = pods
        .logs(name, &LogParams::default())
        .await
        .unwrap_or_else(|e| format!("(no log: {e})"));
    (pod, log)
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn helm_test_checks_a_throwaway_then_a_named_cluster_and_fails_clearly_when_unreachable() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("helmtest").await.expect("namespace");
    // The existing cluster of the second run comes up while the first runs.
    ns.create_cluster("events", BrokerClusterSpec::default())
        .await
        .expect("create BrokerCluster events");
    let release = ns.name.clone();
    let hook = format!("{release}-starling-operator-test");
    let install = helm(&args(&[
        "install",
        &release,
        CHART,
        "--namespace",
        &ns.name,
        "--skip-crds",
        "--set",
        "replicas=0",
        "--set",
        &format!("watchNamespaces={{{}}}", ns.name),
        "--set",
        &format!("brokerImage={}", env.broker_image),
        "--wait",
        "--timeout",
        "2m",
    ]))
    .await;
    assert!(install.status.success(), "helm install: {}", text(&install));

    // 1. Default values: a throwaway cluster.
    let (out, took) = helm_test(&ns, &release).await;
    let (pod, log) = test_pod(&ns, &hook).await;
    assert!(
        out.status.success(),
        "helm test (throwaway cluster) after {took:?}: {}\npod log:\n{log}",
        text(&out)
    );
    eprintln!("helm test with a throwaway cluster: {took:?}");
    assert_eq!(phase(&pod), "Succeeded", "{log}");
    assert!(
        log.lines().any(|l| l.starts_with(
            "ok: published 3 message(s) to starling-helm-test and received them back in "
        )),
        "{log}"
    );
    let first_uid = pod.uid();
    // hook-succeeded: the throwaway cluster and the user (with its credentials) are gone.
    let clusters = ns.clusters();
    wait::until(
        "the throwaway BrokerCluster deleted",
        Duration::from_secs(60),
        || {
            let clusters = clusters.clone();
            let hook = hook.clone();
            async move { clusters.get_opt(&hook).await.ok()?.is_none().then_some(()) }
        },
    )
    .await
    .expect("hook-succeeded deletes the throwaway cluster");
    assert!(
        ns.users().get_opt(&hook).await.expect("get user").is_none(),
        "hook-succeeded deletes the test user"
    );

    // 2. An existing cluster, after an upgrade; the second run replaces the first run's pod.
    ns.wait_ready("events").await.expect("events Ready");
    let upgrade = helm(&args(&[
        "upgrade",
        &release,
        CHART,
        "--namespace",
        &ns.name,
        "--reuse-values",
        "--set",
        "tests.brokerCluster=events",
    ]))
    .await;
    assert!(upgrade.status.success(), "helm upgrade: {}", text(&upgrade));
    let (out, took) = helm_test(&ns, &release).await;
    let (pod, log) = test_pod(&ns, &hook).await;
    assert!(
        out.status.success(),
        "helm test (events) after {took:?}: {}\npod log:\n{log}",
        text(&out)
    );
    eprintln!("helm test with an existing cluster: {took:?}");
    assert_ne!(
        pod.uid(),
        first_uid,
        "before-hook-creation replaced the pod"
    );
    assert!(
        log.lines()
            .any(|l| l.starts_with("ok: published 3 message(s)")),
        "{log}"
    );
    let names: Vec<String> = clusters
        .list(&Default::default())
        .await
        .expect("list clusters")
        .items
        .iter()
        .map(|c: &BrokerCluster| c.name_any())
        .collect();
    assert_eq!(
        names,
        ["events"],
        "no throwaway cluster with tests.brokerCluster"
    );

    // 3. Unreachable brokers: the operator paused, the StatefulSet scaled to zero.
    ns.patch_spec("events", serde_json::json!({ "paused": true }))
        .await
        .expect("pause events");
    let sts: Api<StatefulSet> = ns.api();
    wait::until(
        "the paused events observed",
        Duration::from_secs(60),
        || {
            let clusters = clusters.clone();
            async move {
                let bc = clusters.get("events").await.ok()?;
                let status = bc.status.as_ref()?;
                let paused = status
                    .conditions
                    .iter()
                    .any(|c| c.type_ == "Progressing" && c.reason == "Paused");
                (paused && status.observed_generation == bc.metadata.generation).then_some(())
            }
        },
    )
    .await
    .expect("events paused");
    sts.patch(
        "events",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "spec": { "replicas": 0 } })),
    )
    .await
    .expect("scale the StatefulSet to 0");
    wait::until(
        "the events brokers gone",
        Duration::from_secs(120),
        || async {
            ns.broker_pods("events")
                .await
                .ok()?
                .is_empty()
                .then_some(())
        },
    )
    .await
    .expect("brokers stopped");
    let upgrade = helm(&args(&[
        "upgrade",
        &release,
        CHART,
        "--namespace",
        &ns.name,
        "--reuse-values",
        "--set",
        "tests.timeoutSeconds=20",
        "--set",
        "tests.stepTimeoutSeconds=5",
    ]))
    .await;
    assert!(upgrade.status.success(), "helm upgrade: {}", text(&upgrade));
    let (out, took) = helm_test(&ns, &release).await;
    let (pod, log) = test_pod(&ns, &hook).await;
    eprintln!(
        "helm test with unreachable brokers: {took:?}\n{}",
        text(&out)
    );
    assert!(
        !out.status.success(),
        "helm test passes without brokers: {}",
        text(&out)
    );
    assert!(
        took < Duration::from_secs(120),
        "the failure comes within the pod's bound, not helm's timeout: {took:?}"
    );
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&hook),
        "helm names the failed pod: {}",
        text(&out)
    );
    assert_eq!(phase(&pod), "Failed", "{log}");
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines
            .first()
            .is_some_and(|l| l.starts_with("check: attempt 1 failed: ")),
        "{log}"
    );
    assert!(
        lines.len() >= 2
            && lines[lines.len() - 2].starts_with("check: giving up after ")
            && lines[lines.len() - 1].starts_with("error: "),
        "the log ends with the reason: {log}"
    );
    eprintln!("the failed check's log:\n{log}");
    ns.delete().await;
}
