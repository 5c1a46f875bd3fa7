//! Controller tests. With no API server on this machine, `reconcile` runs against the
//! in-process fake of [`crate::fake_api`]. The real-apiserver test comes with the e2e
//! environment.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use starling_config::Tier;

use super::*;
use crate::crd::BrokerClusterSpec;
use crate::fake_api::{Fake, NS, fake_context};
use crate::validate::fixtures::broker_cluster;
use crate::validate::validate;

struct Harness {
    fake: Arc<Mutex<Fake>>,
    ctx: Arc<Context>,
}

impl Harness {
    fn new(bc: &BrokerCluster) -> Self {
        let (fake, ctx) = fake_context(bc);
        Harness { fake, ctx }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Fake) -> R) -> R {
        f(&mut self.fake.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn reconcile(&self, bc: &BrokerCluster) -> Result<Action> {
        reconcile(Arc::new(bc.clone()), self.ctx.clone()).await
    }
}

fn cluster(spec: BrokerClusterSpec) -> BrokerCluster {
    broker_cluster(spec)
}

fn condition(status: &Value, t: &str) -> (String, String) {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| {
            (
                c["status"].as_str().unwrap_or("").to_string(),
                c["reason"].as_str().unwrap_or("").to_string(),
            )
        })
        .unwrap_or_default()
}

fn pair(a: &str, b: &str) -> (String, String) {
    (a.to_string(), b.to_string())
}

#[tokio::test]
async fn first_reconcile_applies_every_child_then_writes_status_and_an_event() {
    let bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    let action = h.reconcile(&bc).await;
    assert!(action.is_ok(), "{action:?}");
    h.with(|f| {
        assert_eq!(
            f.paths("PATCH"),
            vec![
                "secrets/events-peer",
                "secrets/events-users",
                "configmaps/events-config",
                "configmaps/events-members",
                "serviceaccounts/events-broker",
                "roles/events-broker",
                "rolebindings/events-broker",
                "services/events-headless",
                "services/events",
                "networkpolicies/events",
                "poddisruptionbudgets/events",
                "statefulsets/events",
                "brokerclusters/events/status",
            ]
        );
        for c in f
            .calls
            .iter()
            .filter(|c| c.method == "PATCH" && !c.path.ends_with("/status"))
        {
            assert!(
                c.query.contains("fieldManager=starling-operator"),
                "{}",
                c.query
            );
            assert!(c.query.contains("force=true"), "{}", c.query);
            assert_eq!(c.body["metadata"]["ownerReferences"][0]["uid"], "0000-uid");
        }
        assert_eq!(
            f.paths("GET"),
            vec![
                "statefulsets/events",
                "brokertopics",
                "secrets/events-tls",
                "secrets/events-ca",
                "secrets/events-peer",
                "brokerusers"
            ]
        );
        assert_eq!(f.paths("POST").first().map(String::as_str), Some("secrets"));
        let secret = f
            .objects
            .get(&format!("/api/v1{NS}secrets/events-tls"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(secret["type"], "kubernetes.io/tls");
        assert_eq!(secret["metadata"]["ownerReferences"][0]["uid"], "0000-uid");
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(condition(&status, "Degraded"), pair("False", "AsExpected"));
        assert_eq!(condition(&status, "Progressing"), pair("True", "Creating"));
        assert_eq!(status["tier"], "medium");
        assert_eq!(status["members"], 3);
        let members = f
            .objects
            .get(&format!("/api/v1{NS}configmaps/events-members"))
            .map(|cm| cm["data"]["members"].clone())
            .unwrap_or_default();
        assert_eq!(
            members.as_str().map(|m| m.lines().count()),
            Some(3),
            "{members}"
        );
        assert_eq!(
            status["selector"],
            "app.kubernetes.io/instance=events,app.kubernetes.io/name=starling-broker"
        );
        assert_eq!(f.event_reasons(), vec!["Created"]);
    });
}

#[tokio::test]
async fn an_unchanged_cluster_writes_nothing_new() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let status = h.with(|f| f.status_writes().pop().unwrap_or_default());
    let mut again = bc.clone();
    again.status = serde_json::from_value(status).ok();
    h.with(|f| f.calls.clear());
    assert!(h.reconcile(&again).await.is_ok());
    h.with(|f| {
        assert!(
            f.status_writes().is_empty(),
            "an identical status is not written again"
        );
        assert!(
            f.event_reasons().is_empty(),
            "nothing changed, nothing to announce"
        );
    });
}

/// Fills the context's watch caches with every object the fake holds in the namespace, as
/// the controller's watches would.
fn watch_caches_see_the_fake(h: &Harness) {
    let objects: Vec<Value> = h.with(|f| f.objects.values().cloned().collect());
    h.ctx
        .live
        .set(Some("messaging".into()), crate::live::stores_of(&objects));
}

/// The children (not Secrets, not status) patched since the calls were cleared.
fn child_patches(f: &Fake) -> Vec<String> {
    f.paths("PATCH")
        .into_iter()
        .filter(|p| !p.starts_with("secrets/") && !p.ends_with("/status"))
        .collect()
}

#[tokio::test]
async fn a_reconcile_of_an_unchanged_cluster_applies_no_child() {
    let bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let status = h.with(|f| f.status_writes().pop().unwrap_or_default());
    let mut again = bc.clone();
    again.status = serde_json::from_value(status).ok();
    watch_caches_see_the_fake(&h);
    h.with(|f| f.calls.clear());
    let action = h.reconcile(&again).await;
    assert_eq!(
        action.ok(),
        Some(Action::requeue(STEADY_REQUEUE)),
        "not ready, but nothing waits on the clock"
    );
    h.with(|f| {
        assert_eq!(child_patches(f), Vec::<String>::new());
        assert!(f.status_writes().is_empty());
        assert!(
            !f.paths("GET")
                .iter()
                .any(|p| p.starts_with("poddisruptionbudgets")),
            "the cache answers for the children"
        );
    });
}

#[tokio::test]
async fn an_edited_or_deleted_child_is_applied_again() {
    let bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let status = h.with(|f| f.status_writes().pop().unwrap_or_default());
    let mut again = bc.clone();
    again.status = serde_json::from_value(status).ok();
    h.with(|f| {
        // `kubectl edit` of the broker config: its writer shows in managedFields.
        let cm = format!("/api/v1{NS}configmaps/events-config");
        if let Some(obj) = f.objects.get_mut(&cm) {
            obj["data"]["broker.yaml"] = json!("edited: true\n");
            obj["metadata"]["managedFields"] = json!([
                {"manager": "starling-operator", "operation": "Apply"},
                {"manager": "kubectl-edit", "operation": "Update"}
            ]);
        }
        // The client Service deleted.
        f.objects.remove(&format!("/api/v1{NS}services/events"));
        // The StatefulSet patched (read by the reconcile's own GET, not the cache).
        let sts = format!("/apis/apps/v1{NS}statefulsets/events");
        if let Some(obj) = f.objects.get_mut(&sts) {
            obj["spec"]["minReadySeconds"] = json!(0);
            obj["metadata"]["managedFields"] = json!([
                {"manager": "starling-operator", "operation": "Apply"},
                {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status"},
                {"manager": "kubectl-patch", "operation": "Update"}
            ]);
        }
    });
    watch_caches_see_the_fake(&h);
    h.with(|f| f.calls.clear());
    assert!(h.reconcile(&again).await.is_ok());
    h.with(|f| {
        assert_eq!(
            child_patches(f),
            vec![
                "configmaps/events-config",
                "services/events",
                "statefulsets/events"
            ]
        );
        assert_ne!(
            f.objects
                .get(&format!("/api/v1{NS}configmaps/events-config"))
                .map(|cm| cm["data"]["broker.yaml"].clone()),
            Some(json!("edited: true\n")),
            "the render is back"
        );
        let min_ready = f
            .objects
            .get(&format!("/apis/apps/v1{NS}statefulsets/events"))
            .map(|s| s["spec"]["minReadySeconds"].clone());
        assert_ne!(min_ready, Some(json!(0)));
    });
}

#[test]
fn only_timers_bring_the_next_reconcile_forward() {
    assert_eq!(requeue_after(Timers::default()), STEADY_REQUEUE);
    let grace = Timers {
        members_wait: Some(Duration::from_secs(9)),
        staged: false,
        volumes: false,
        users: false,
        roll: false,
    };
    assert_eq!(requeue_after(grace), Duration::from_secs(9));
    let staged = Timers {
        members_wait: None,
        staged: true,
        volumes: false,
        users: false,
        roll: false,
    };
    assert_eq!(requeue_after(staged), tier_change::STAGE_POLL);
    let both = Timers {
        members_wait: Some(Duration::from_secs(2)),
        staged: true,
        volumes: false,
        users: false,
        roll: false,
    };
    assert_eq!(requeue_after(both), Duration::from_secs(2));
    let durable = Timers {
        members_wait: None,
        staged: false,
        volumes: true,
        users: false,
        roll: false,
    };
    assert_eq!(requeue_after(durable), crate::status::volumes::VOLUME_POLL);
    let held = Timers {
        volumes: true,
        users: false,
        roll: true,
        ..Timers::default()
    };
    assert_eq!(requeue_after(held), crate::roll::ROLL_POLL);
}

#[tokio::test]
async fn scaling_to_one_deletes_the_owned_pdb() {
    let bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    let pdb = format!("/apis/policy/v1{NS}poddisruptionbudgets/events");
    h.with(|f| {
        f.objects.insert(
            pdb.clone(),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "events", "namespace": "messaging",
                                "ownerReferences": [{"apiVersion": "starling.dev/v1alpha1",
                                    "kind": "BrokerCluster", "name": "events", "uid": "0000-uid",
                                    "controller": true}]}}),
        );
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert!(
            !f.paths("PATCH")
                .contains(&"poddisruptionbudgets/events".to_string())
        );
        assert_eq!(f.paths("DELETE"), vec!["poddisruptionbudgets/events"]);
        assert!(!f.objects.contains_key(&pdb));
    });
}

#[tokio::test]
async fn a_pdb_owned_by_someone_else_is_left_alone() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    h.with(|f| {
        f.objects.insert(
            format!("/apis/policy/v1{NS}poddisruptionbudgets/events"),
            json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                   "metadata": {"name": "events", "namespace": "messaging"}}),
        );
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| assert!(f.paths("DELETE").is_empty()));
}

#[tokio::test]
async fn paused_clusters_only_get_status_and_their_credentials() {
    let bc = cluster(BrokerClusterSpec {
        paused: true,
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert_eq!(
            f.paths("PATCH"),
            vec![
                "secrets/events-peer",
                "secrets/events-users",
                "brokerclusters/events/status"
            ]
        );
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(condition(&status, "Progressing"), pair("False", "Paused"));
    });
}

#[tokio::test]
async fn a_refused_spec_is_reported_not_retried() {
    let bc = cluster(BrokerClusterSpec {
        replicas: Some(0),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    let action = h.reconcile(&bc).await;
    assert_eq!(action.ok(), Some(Action::requeue(STEADY_REQUEUE)));
    h.with(|f| {
        assert_eq!(f.paths("PATCH"), vec!["brokerclusters/events/status"]);
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(condition(&status, "Degraded"), pair("True", "InvalidSpec"));
        assert_eq!(f.event_reasons(), vec!["SpecRejected"]);
    });
    assert!(
        h.ctx
            .metrics
            .render()
            .contains("starling_operator_spec_rejected_total{reason=\"InvalidSpec\"} 1")
    );
}

#[tokio::test]
async fn an_apply_failure_is_degraded_counted_and_retried() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    h.with(|f| f.fail = Some(("PATCH", "statefulsets/events", 403)));
    let result = h.reconcile(&bc).await;
    let label = result.as_ref().err().map(Error::metric_label);
    assert_eq!(label, Some("forbidden"));
    h.with(|f| {
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(condition(&status, "Degraded"), pair("True", "ApplyFailed"));
        assert_eq!(f.event_reasons(), vec!["ReconcileFailed"]);
    });
    let metrics = h.ctx.metrics.render();
    assert!(metrics.contains("starling_operator_reconcile_errors_total{reason=\"forbidden\"} 1"));
    let bc = Arc::new(bc);
    let first = error_policy(bc.clone(), &Error::MissingObjectField("x"), h.ctx.clone());
    let second = error_policy(bc, &Error::MissingObjectField("x"), h.ctx.clone());
    assert_eq!(first, Action::requeue(backoff_delay(1)));
    assert_eq!(second, Action::requeue(backoff_delay(2)));
}

#[test]
fn backoff_doubles_to_a_cap() {
    let secs: Vec<u64> = (1..=9).map(|n| backoff_delay(n).as_secs()).collect();
    assert_eq!(secs, vec![5, 10, 20, 40, 80, 160, 300, 300, 300]);
    assert_eq!(backoff_delay(0).as_secs(), 5);
}

fn stored_sts_replicas(f: &Fake) -> Option<i64> {
    f.objects
        .get(&format!("/apis/apps/v1{NS}statefulsets/events"))
        .and_then(|s| s["spec"]["replicas"].as_i64())
}

fn stored_members(f: &Fake) -> usize {
    f.objects
        .get(&format!("/api/v1{NS}configmaps/events-members"))
        .and_then(|cm| cm["data"]["members"].as_str().map(|m| m.lines().count()))
        .unwrap_or(usize::MAX)
}

/// A cluster whose StatefulSet runs `replicas` ready brokers, all of them members since
/// `changed_secs_ago`.
fn running(h: &Harness, bc: &mut BrokerCluster, replicas: i32, changed_secs_ago: i64) {
    h.with(|f| {
        f.objects.insert(
            format!("/apis/apps/v1{NS}statefulsets/events"),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
                   "metadata": {"name": "events", "namespace": "messaging", "generation": 1},
                   "spec": {"replicas": replicas, "serviceName": "events-headless",
                            "selector": {}, "template": {}},
                   "status": {"replicas": replicas, "readyReplicas": replicas,
                              "observedGeneration": 1}}),
        );
    });
    let changed = Timestamp::now()
        .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(
            changed_secs_ago,
        ))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    bc.status = Some(BrokerClusterStatus {
        members: Some(replicas),
        members_changed_at: Some(Time(changed)),
        ..BrokerClusterStatus::default()
    });
}

#[tokio::test]
async fn scaling_down_lowers_members_first_and_the_statefulset_after_the_grace() {
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    let action = h.reconcile(&bc).await;
    assert_eq!(
        action.ok(),
        Some(Action::requeue(crate::members::DEFAULT_HANDOFF_GRACE))
    );
    let status: BrokerClusterStatus = h.with(|f| {
        assert_eq!(stored_members(f), 1, "members drop at once");
        assert_eq!(
            stored_sts_replicas(f),
            Some(3),
            "the brokers stay for the hand-off"
        );
        assert!(
            f.paths("DELETE").is_empty(),
            "the PDB stays while 3 pods run"
        );
        serde_json::from_value(f.status_writes().pop().unwrap_or_default()).unwrap_or_default()
    });
    assert_eq!(status.members, Some(1));

    // Within the grace nothing more happens.
    let mut within = bc.clone();
    within.status = Some(status.clone());
    h.with(|f| f.calls.clear());
    assert!(h.reconcile(&within).await.is_ok());
    h.with(|f| assert_eq!(stored_sts_replicas(f), Some(3)));

    // After the grace the StatefulSet follows.
    let mut after = bc.clone();
    after.status = Some(BrokerClusterStatus {
        members_changed_at: Some(Time(
            Timestamp::now()
                .checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(16))
                .unwrap_or(Timestamp::UNIX_EPOCH),
        )),
        ..status
    });
    assert!(h.reconcile(&after).await.is_ok());
    h.with(|f| {
        assert_eq!(stored_sts_replicas(f), Some(1));
        assert_eq!(stored_members(f), 1);
        assert_eq!(f.paths("DELETE"), vec!["poddisruptionbudgets/events"]);
    });
}

#[tokio::test]
async fn scaling_up_adds_pods_first_and_members_once_they_are_ready() {
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(5),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    let action = h.reconcile(&bc).await;
    assert_eq!(
        action.ok(),
        Some(Action::requeue(STEADY_REQUEUE)),
        "the pods becoming ready trigger the next step, not a timer"
    );
    h.with(|f| {
        assert_eq!(stored_sts_replicas(f), Some(5));
        assert_eq!(stored_members(f), 3, "new brokers join once ready");
    });
    // The StatefulSet reports 5 ready: members follow.
    running(&h, &mut bc, 5, 600);
    bc.status = bc.status.map(|s| BrokerClusterStatus {
        members: Some(3),
        ..s
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| assert_eq!(stored_members(f), 5));
}

#[tokio::test]
async fn an_existing_tls_secret_is_never_replaced() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    let path = format!("/api/v1{NS}secrets/events-tls");
    let existing = json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                          "metadata": {"name": "events-tls", "namespace": "messaging"},
                          "data": {"tls.crt": "Q0VSVA==", "tls.key": "S0VZ"}});
    h.with(|f| f.objects.insert(path.clone(), existing.clone()));
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert!(!posted_secrets(f).contains(&"events-tls".to_string()));
        assert_eq!(f.objects.get(&path), Some(&existing));
    });
}

#[tokio::test]
async fn a_user_tls_secret_means_no_generated_one() {
    let bc = cluster(BrokerClusterSpec {
        tls: Some(crate::crd::TlsSpec {
            secret_name: "mine".into(),
        }),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert!(!f.paths("GET").iter().any(|p| p == "secrets/events-tls"));
        assert_eq!(posted_secrets(f), vec!["events-ca".to_string()]);
    });
}

fn posted_secrets(f: &crate::fake_api::Fake) -> Vec<String> {
    f.calls
        .iter()
        .filter(|c| c.method == "POST" && c.path.ends_with("/secrets"))
        .map(|c| {
            c.body["metadata"]["name"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn the_ca_is_created_once_and_the_peer_certificate_kept_while_valid() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let ca_path = format!("/api/v1{NS}secrets/events-ca");
    let peer_path = format!("/api/v1{NS}secrets/events-peer");
    let (ca, peer) = h.with(|f| {
        (
            f.objects.get(&ca_path).cloned(),
            f.objects.get(&peer_path).cloned(),
        )
    });
    let ca = ca.unwrap_or_else(|| panic!("no CA secret"));
    let peer = peer.unwrap_or_else(|| panic!("no peer secret"));
    assert_eq!(ca["metadata"]["ownerReferences"][0]["uid"], "0000-uid");
    assert_eq!(peer["data"]["ca.crt"], ca["data"]["ca.crt"]);
    h.with(|f| f.calls.clear());
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert!(posted_secrets(f).is_empty(), "the CA is never regenerated");
        assert!(
            !f.paths("PATCH")
                .iter()
                .any(|p| p == "secrets/events-ca" || p == "secrets/events-peer")
        );
        assert_eq!(f.objects.get(&ca_path), Some(&ca));
        assert_eq!(f.objects.get(&peer_path), Some(&peer));
    });
    // A peer Secret from another CA is reissued; the CA stays.
    let mut stale = peer.clone();
    stale["data"]["ca.crt"] = json!("b3RoZXI=");
    h.with(|f| f.objects.insert(peer_path.clone(), stale));
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        let now = f.objects.get(&peer_path).cloned().unwrap_or_default();
        assert_eq!(now["data"]["ca.crt"], ca["data"]["ca.crt"]);
        assert_ne!(now["data"]["tls.crt"], peer["data"]["tls.crt"]);
        assert_eq!(f.objects.get(&ca_path), Some(&ca));
    });
}

#[test]
fn reconcile_status_writes_leave_the_autoscaler_fields_alone_or_clear_them() {
    use crate::crd::AutoscalingStatus;
    let new = BrokerClusterStatus {
        replicas: 3,
        effective_tier: Some(Tier::Small),
        autoscaling: Some(AutoscalingStatus::default()),
        ..BrokerClusterStatus::default()
    };
    let body = status_apply_body(&new).unwrap_or_default();
    assert_eq!(body["status"]["replicas"], 3);
    assert!(body["status"].get("effectiveTier").is_none(), "{body}");
    assert!(body["status"].get("autoscaling").is_none(), "{body}");
    assert_eq!(body["apiVersion"], "starling.dev/v1alpha1");
    assert_eq!(body["kind"], "BrokerCluster");
    // Clearing them is the autoscaler's own job (its field manager), see
    // `turning_autoscaling_off_renders_spec_tier_and_clears_the_choice`.
}

#[test]
fn the_watch_passes_spec_changes_and_autoscaler_choices_only() {
    let mut bc = cluster(BrokerClusterSpec::default());
    bc.metadata.generation = Some(1);
    let base = generation_or_effective_tier(&bc);
    bc.status = Some(BrokerClusterStatus {
        replicas: 5,
        ..BrokerClusterStatus::default()
    });
    assert_eq!(
        generation_or_effective_tier(&bc),
        base,
        "other status fields"
    );
    if let Some(s) = bc.status.as_mut() {
        s.effective_tier = Some(Tier::Medium);
    }
    let chosen = generation_or_effective_tier(&bc);
    assert_ne!(chosen, base);
    bc.metadata.generation = Some(2);
    assert_ne!(generation_or_effective_tier(&bc), chosen);
}

#[tokio::test]
async fn turning_autoscaling_off_renders_spec_tier_and_clears_the_choice() {
    use crate::crd::{AutoscalingSpec, AutoscalingStatus};
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Small,
        autoscaling: Some(AutoscalingSpec {
            enabled: true,
            ..AutoscalingSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    bc.status = Some(BrokerClusterStatus {
        effective_tier: Some(Tier::Medium),
        autoscaling: Some(AutoscalingStatus::default()),
        ..BrokerClusterStatus::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let sts_path = format!("/apis/apps/v1{NS}statefulsets/events");
    let replicas = |h: &Harness| {
        h.with(|f| {
            f.objects
                .get(&sts_path)
                .map(|s| s["spec"]["replicas"].clone())
        })
    };
    assert_eq!(
        replicas(&h),
        Some(json!(3)),
        "medium, the autoscaler's choice"
    );
    let writes = h.with(|f| f.status_writes());
    assert!(writes.iter().all(|w| w.get("effectiveTier").is_none()));

    if let Some(a) = bc.spec.autoscaling.as_mut() {
        a.enabled = false;
    }
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    assert_eq!(replicas(&h), Some(json!(1)), "back to spec.tier small");
    let writes = h.with(|f| f.status_writes());
    assert!(
        writes.iter().all(|w| w.get("effectiveTier").is_none()),
        "the reconciler never writes the autoscaler's fields"
    );

    // The autoscaler removes its own fields (first by releasing them as their field manager,
    // then, as these were written by no manager, with a merge patch of its two fields).
    let path = format!("/apis/starling.dev/v1alpha1{NS}brokerclusters/events");
    let stored: BrokerClusterStatus =
        serde_json::from_value(h.with(|f| f.stored_status(&path))).unwrap_or_default();
    let mut seen = bc.clone();
    seen.status = Some(BrokerClusterStatus {
        effective_tier: Some(Tier::Medium),
        autoscaling: Some(AutoscalingStatus::default()),
        ..stored.clone()
    });
    assert!(crate::autoscale::report::holds_autoscaler_fields(
        seen.status.as_ref()
    ));
    let autoscaler = autoscale_context(&h);
    assert!(
        crate::autoscale::runner::release(&autoscaler, &seen)
            .await
            .is_ok()
    );
    let after = h.with(|f| f.stored_status(&path));
    assert!(after.get("effectiveTier").is_none(), "{after}");
    assert!(after.get("autoscaling").is_none(), "{after}");
    assert_eq!(
        after["replicas"],
        json!(stored.replicas),
        "the reconciler's fields stay"
    );
    assert!(after.get("conditions").is_some_and(Value::is_array));
    let writes = h.with(|f| f.status_writes());
    assert!(
        writes
            .iter()
            .any(|w| w.get("effectiveTier").is_some_and(Value::is_null))
    );
}

fn autoscale_context(h: &Harness) -> crate::autoscale::runner::AutoscaleContext {
    crate::autoscale::runner::AutoscaleContext {
        client: h.ctx.client.clone(),
        recorder: h.ctx.recorder.clone(),
        decisions: h.ctx.metrics.autoscale_decisions(),
        tiers: h.ctx.defaults.tiers.clone(),
        prometheus: None,
        fence: crate::fence::Fence::never(),
    }
}

#[tokio::test]
async fn the_two_status_writers_never_remove_each_others_fields() {
    use crate::autoscale::report::autoscaler_status_body;
    use crate::crd::AutoscalingStatus;
    use crate::names::AUTOSCALER_FIELD_MANAGER;
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    let path = format!("/apis/starling.dev/v1alpha1{NS}brokerclusters/events");
    assert!(h.reconcile(&bc).await.is_ok());
    // The autoscaler chooses a tier, then writes a round without a change.
    let block = AutoscalingStatus {
        recommendation: "ScaleUp".into(),
        ..AutoscalingStatus::default()
    };
    let body = autoscaler_status_body(&block, Some(Tier::Medium), None);
    let client = h.ctx.client.clone();
    let applied = crate::apply::apply_status(
        &client,
        "messaging",
        "events",
        AUTOSCALER_FIELD_MANAGER,
        &body,
    )
    .await;
    assert!(applied.is_ok(), "{applied:?}");
    let stored: BrokerClusterStatus =
        serde_json::from_value(h.with(|f| f.stored_status(&path))).unwrap_or_default();
    let body = autoscaler_status_body(&block, None, Some(&stored));
    assert_eq!(
        body["status"]["effectiveTier"], "medium",
        "an unchanged tier is sent again"
    );
    assert!(
        crate::apply::apply_status(
            &client,
            "messaging",
            "events",
            AUTOSCALER_FIELD_MANAGER,
            &body
        )
        .await
        .is_ok()
    );
    // A reconcile with a new generation rewrites its own fields only.
    let mut again = bc.clone();
    again.metadata.generation = Some(2);
    again.status = Some(stored);
    assert!(h.reconcile(&again).await.is_ok());
    let after = h.with(|f| f.stored_status(&path));
    assert_eq!(after["effectiveTier"], "medium", "{after}");
    assert_eq!(after["autoscaling"]["recommendation"], "ScaleUp");
    assert_eq!(after["observedGeneration"], 2);
}

#[tokio::test]
async fn a_lost_lease_stops_reconciles_before_any_write() {
    let bc = cluster(BrokerClusterSpec::default());
    let mut h = Harness::new(&bc);
    let (fencer, fenced) = crate::fence::fence();
    let ctx = Context::new(
        h.ctx.client.clone(),
        h.ctx.recorder.clone(),
        h.ctx.metrics.clone(),
        h.ctx.defaults.clone(),
    )
    .with_fence(fenced);
    h.ctx = Arc::new(ctx);
    fencer.trip();
    let r = h.reconcile(&bc).await;
    assert!(matches!(r, Err(Error::Leadership(_))), "{r:?}");
    h.with(|f| {
        assert!(
            f.calls.is_empty(),
            "no request at all: {:?}",
            f.paths("PATCH")
        )
    });
}

fn stored_config(f: &Fake) -> String {
    f.objects
        .get(&format!("/api/v1{NS}configmaps/events-config"))
        .and_then(|cm| cm["data"]["broker.yaml"].as_str().map(str::to_string))
        .unwrap_or_default()
}

#[tokio::test]
async fn an_autoscaled_growth_adds_brokers_with_the_old_config_first() {
    use crate::crd::AutoscalingSpec;
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Small,
        autoscaling: Some(AutoscalingSpec {
            enabled: true,
            ..AutoscalingSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    running(&h, &mut bc, 1, 600);
    if let Some(s) = bc.status.as_mut() {
        s.tier = Some(Tier::Small);
        s.effective_tier = Some(Tier::Medium);
    }
    let action = h.reconcile(&bc).await;
    assert!(action.is_ok(), "{action:?}");
    h.with(|f| {
        assert_eq!(stored_sts_replicas(f), Some(3), "medium's broker count");
        assert_eq!(
            stored_members(f),
            1,
            "members follow once the new brokers are ready"
        );
        let config = stored_config(f);
        assert!(
            config.contains("tier: small"),
            "small's config kept:\n{config}"
        );
    });
    let status: BrokerClusterStatus = h.with(|f| {
        serde_json::from_value(f.status_writes().pop().unwrap_or_default()).unwrap_or_default()
    });
    assert_eq!(
        status.tier,
        Some(Tier::Small),
        "the rendered tier is still small"
    );

    // Three members that settled long ago: now medium's config is rendered.
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    if let Some(s) = bc.status.as_mut() {
        s.tier = Some(Tier::Small);
        s.effective_tier = Some(Tier::Medium);
    }
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert_eq!(stored_sts_replicas(f), Some(3));
        assert!(stored_config(f).contains("tier: medium"));
    });
}

#[tokio::test]
async fn a_scale_down_of_pods_that_never_got_ready_is_not_held() {
    // The chart test's case: brokers Pending on a small node, the spec lowers replicas. The
    // StatefulSet runs the current config (no rollout), so members drop at once.
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    let hash = {
        let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("{e}"));
        validate(&bc, id, &h.ctx.defaults)
            .map(|v| v.config_hash)
            .unwrap_or_default()
    };
    h.with(|f| {
        let sts = f
            .objects
            .get_mut(&format!("/apis/apps/v1{NS}statefulsets/events"))
            .unwrap_or_else(|| panic!("sts"));
        sts["spec"]["template"] =
            json!({"metadata": {"annotations": {"starling.dev/config-hash": hash}}});
        sts["status"] = json!({"replicas": 3, "readyReplicas": 0, "updatedReplicas": 3,
                               "currentRevision": "r1", "updateRevision": "r1",
                               "observedGeneration": 1});
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| assert_eq!(stored_members(f), 1, "members drop at once"));
}

#[tokio::test]
async fn a_shrink_waits_until_the_last_rolled_broker_is_ready_again() {
    // medium → small rolled small's config on 3 brokers; the StatefulSet reports every pod
    // updated (revisions equal) but the last one recreated is not ready yet: members stay 3.
    let mut bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(1),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    let hash = {
        let id = ObjectIdentity::of(&bc).unwrap_or_else(|e| panic!("{e}"));
        validate(&bc, id, &h.ctx.defaults)
            .map(|v| v.config_hash)
            .unwrap_or_default()
    };
    let set_ready = |h: &Harness, ready: i32| {
        let hash = hash.clone();
        h.with(|f| {
            let sts = f
                .objects
                .get_mut(&format!("/apis/apps/v1{NS}statefulsets/events"))
                .unwrap_or_else(|| panic!("sts"));
            sts["spec"]["template"] =
                json!({"metadata": {"annotations": {"starling.dev/config-hash": hash}}});
            sts["status"] = json!({"replicas": 3, "readyReplicas": ready, "updatedReplicas": 3,
                                   "currentRevision": "r2", "updateRevision": "r2",
                                   "observedGeneration": 1});
        });
    };
    set_ready(&h, 2);
    if let Some(s) = bc.status.as_mut() {
        s.tier = Some(Tier::Medium);
    }
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| assert_eq!(stored_members(f), 3, "held while auto-0 is not ready"));
    let h = Harness::new(&bc);
    running(&h, &mut bc, 3, 600);
    set_ready(&h, 3);
    if let Some(s) = bc.status.as_mut() {
        s.tier = Some(Tier::Medium);
    }
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| assert_eq!(stored_members(f), 1, "then the members drop"));
}

#[tokio::test]
async fn a_reconcile_in_flight_is_dropped_when_the_lease_is_lost() {
    let bc = cluster(BrokerClusterSpec::default());
    let mut h = Harness::new(&bc);
    let (fencer, fenced) = crate::fence::fence();
    let ctx = Context::new(
        h.ctx.client.clone(),
        h.ctx.recorder.clone(),
        h.ctx.metrics.clone(),
        h.ctx.defaults.clone(),
    )
    .with_fence(fenced);
    h.ctx = Arc::new(ctx);
    // The API server stops answering: the reconcile hangs on its first read.
    h.with(|f| f.hang = true);
    let running = tokio::spawn(reconcile(Arc::new(bc.clone()), h.ctx.clone()));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(h.with(|f| f.paths("GET")), vec!["statefulsets/events"]);
    fencer.trip();
    let r = tokio::time::timeout(Duration::from_secs(5), running).await;
    assert!(
        matches!(r, Ok(Ok(Err(Error::Leadership(_))))),
        "the reconcile ended at once: {r:?}"
    );
    h.with(|f| {
        f.hang = false;
        assert!(f.paths("PATCH").is_empty(), "nothing applied");
        assert!(f.paths("POST").is_empty(), "no event either");
    });
}

fn ca_secret_json(name: &str, ca: &crate::tls::CertificatePem, metadata: Value) -> Value {
    let mut m = metadata;
    m["name"] = json!(name);
    m["namespace"] = json!("messaging");
    json!({"apiVersion": "v1", "kind": "Secret", "metadata": m,
           "data": {"ca.crt": k8s_openapi::ByteString(ca.cert.clone().into_bytes()),
                    "ca.key": k8s_openapi::ByteString(ca.key.clone().into_bytes())}})
}

#[tokio::test]
async fn a_planted_ca_secret_is_refused_never_used_nor_overwritten() {
    let bc = cluster(BrokerClusterSpec::default());
    let h = Harness::new(&bc);
    let path = format!("/api/v1{NS}secrets/events-ca");
    let peer_path = format!("/api/v1{NS}secrets/events-peer");
    let planted_ca = crate::pki::generate_ca("events", "messaging", Timestamp::now().as_second())
        .unwrap_or_else(|e| panic!("{e}"));
    // A usable CA planted under the operator's name, with the operator's ordinary labels, with
    // the label alone, or with the owner reference alone: each is refused.
    let plantings = [
        json!({"labels": {"app.kubernetes.io/managed-by": "starling-operator"}}),
        json!({"labels": {"starling.dev/cluster-ca": "events"}}),
        json!({"ownerReferences": [{"apiVersion": "starling.dev/v1alpha1", "kind": "BrokerCluster",
                                    "name": "events", "uid": "0000-uid", "controller": true}]}),
    ];
    for (i, meta) in plantings.into_iter().enumerate() {
        let planted = ca_secret_json("events-ca", &planted_ca, meta.clone());
        h.with(|f| {
            f.calls.clear();
            f.objects.insert(path.clone(), planted.clone());
        });
        let r = h.reconcile(&bc).await;
        assert!(matches!(r, Err(Error::UntrustedCa(_))), "{meta}: {r:?}");
        assert_eq!(
            r.as_ref().err().map(Error::metric_label),
            Some("untrusted_ca")
        );
        h.with(|f| {
            assert_eq!(f.objects.get(&path), Some(&planted), "left alone");
            assert!(
                !f.objects.contains_key(&peer_path),
                "no peer certificate from a planted CA"
            );
            let status = f.status_writes().pop().unwrap_or_default();
            assert_eq!(condition(&status, "Degraded"), pair("True", "UntrustedCa"));
            let message = status["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Degraded"))
                .map(|c| c["message"].as_str().unwrap_or("").to_string())
                .unwrap_or_default();
            assert!(
                message.contains("events-ca") && message.contains("refused"),
                "{message}"
            );
            if i == 0 {
                // Later ones are the same event's series (a PATCH).
                assert_eq!(f.event_reasons(), vec!["UntrustedCa"]);
            }
        });
    }
    // Not a CA and not ours: refused the same way, not replaced.
    let junk = json!({"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "events-ca", "namespace": "messaging"},
                      "data": {"ca.crt": "Q0VSVA==", "ca.key": "S0VZ"}});
    h.with(|f| f.objects.insert(path.clone(), junk.clone()));
    let r = h.reconcile(&bc).await;
    assert!(matches!(r, Err(Error::UntrustedCa(_))), "{r:?}");
    h.with(|f| assert_eq!(f.objects.get(&path), Some(&junk)));
    // Deleted: the operator creates its own, marked, and uses it.
    h.with(|f| f.objects.remove(&path));
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        let ours = f.objects.get(&path).cloned().unwrap_or_default();
        assert_eq!(
            ours["metadata"]["labels"]["starling.dev/cluster-ca"],
            "events"
        );
        assert_ne!(ours["data"]["ca.crt"], planted_ca_b64(&planted_ca));
        let peer = f.objects.get(&peer_path).cloned().unwrap_or_default();
        assert_eq!(peer["data"]["ca.crt"], ours["data"]["ca.crt"]);
    });
}

fn planted_ca_b64(ca: &crate::tls::CertificatePem) -> Value {
    serde_json::to_value(k8s_openapi::ByteString(ca.cert.clone().into_bytes())).unwrap_or_default()
}

#[tokio::test]
async fn a_ca_named_in_the_spec_is_used_as_it_is_and_never_written() {
    let bc = cluster(BrokerClusterSpec {
        ca: Some(crate::crd::CaSpec {
            secret_name: "corp-ca".into(),
        }),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    // Named but missing: the reconcile fails naming it, and creates nothing in its place.
    let r = h.reconcile(&bc).await;
    assert!(
        matches!(&r, Err(Error::ForeignSecret { name, .. }) if name == "corp-ca"),
        "{r:?}"
    );
    h.with(|f| assert!(!posted_secrets(f).iter().any(|s| s.ends_with("-ca"))));
    let ca = crate::pki::generate_ca("events", "messaging", Timestamp::now().as_second())
        .unwrap_or_else(|e| panic!("{e}"));
    let theirs = ca_secret_json("corp-ca", &ca, json!({}));
    let path = format!("/api/v1{NS}secrets/corp-ca");
    h.with(|f| f.objects.insert(path.clone(), theirs.clone()));
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert_eq!(f.objects.get(&path), Some(&theirs));
        assert!(
            !f.objects
                .contains_key(&format!("/api/v1{NS}secrets/events-ca"))
        );
        let peer = f
            .objects
            .get(&format!("/api/v1{NS}secrets/events-peer"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(peer["data"]["ca.crt"], theirs["data"]["ca.crt"]);
    });
}

fn stored_sts(f: &Fake) -> Value {
    f.objects
        .get(&format!("/apis/apps/v1{NS}statefulsets/events"))
        .cloned()
        .unwrap_or_default()
}

#[tokio::test]
async fn storage_is_rendered_reported_and_never_changed_under_the_statefulset() {
    use crate::crd::{ClaimRetention, StorageSpec};
    let mut bc = cluster(BrokerClusterSpec {
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    let retain = json!({"whenDeleted": "Retain", "whenScaled": "Retain"});
    h.with(|f| {
        let sts = stored_sts(f);
        assert_eq!(sts["spec"]["persistentVolumeClaimRetentionPolicy"], retain);
        assert_eq!(
            sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"],
            "10Gi"
        );
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(
            status["storage"],
            json!({"size": "10Gi", "claimTemplate": "data",
                   "persistentVolumeClaimRetentionPolicy": retain})
        );
    });

    // A resize that got past admission (a CRD without its rules) is refused before any apply.
    let mut resized = bc.clone();
    if let Some(s) = resized.spec.storage.as_mut() {
        s.size = "20Gi".into();
    }
    h.with(|f| f.calls.clear());
    let action = h.reconcile(&resized).await;
    assert_eq!(action.ok(), Some(Action::requeue(STEADY_REQUEUE)));
    h.with(|f| {
        assert_eq!(f.paths("PATCH"), vec!["brokerclusters/events/status"]);
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(
            condition(&status, "Degraded"),
            pair("True", "StorageImmutable")
        );
        assert_eq!(status["storage"]["size"], "10Gi", "what the StatefulSet has");
        assert_eq!(f.event_reasons(), vec!["SpecRejected"]);
        assert_eq!(
            stored_sts(f)["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]
                ["storage"],
            "10Gi"
        );
    });

    // The retention policy may change: applied, and reported.
    if let Some(s) = bc.spec.storage.as_mut() {
        s.persistent_volume_claim_retention_policy.when_scaled = ClaimRetention::Delete;
    }
    h.with(|f| f.calls.clear());
    assert!(h.reconcile(&bc).await.is_ok());
    let changed = json!({"whenDeleted": "Retain", "whenScaled": "Delete"});
    h.with(|f| {
        assert!(
            f.paths("PATCH")
                .contains(&"statefulsets/events".to_string())
        );
        assert_eq!(
            stored_sts(f)["spec"]["persistentVolumeClaimRetentionPolicy"],
            changed
        );
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(condition(&status, "Degraded"), pair("False", "AsExpected"));
        assert_eq!(
            status["storage"]["persistentVolumeClaimRetentionPolicy"],
            changed
        );
    });
}

/// A broker pod of the StatefulSet `sts-uid` on `node`, as the API server lists it.
fn broker_pod(name: &str, owner_uid: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "messaging",
                        "labels": {"app.kubernetes.io/instance": "events"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                             "name": "events", "uid": owner_uid,
                                             "controller": true}]},
           "spec": {"nodeName": node, "containers": []}})
}

#[tokio::test]
async fn replicated_clusters_report_brokers_that_share_a_node() {
    use crate::crd::{DurabilitySpec, StorageSpec};
    let bc = cluster(BrokerClusterSpec {
        tier: Tier::Medium,
        replicas: Some(3),
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        }),
        durability: Some(DurabilitySpec {
            topics: Some(vec!["orders.*".into()]),
            ..DurabilitySpec::default()
        }),
        config: Some(starling_config::ConfigOverrides {
            durable_replicas: Some(3),
            ..starling_config::ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    });
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        assert!(
            f.paths("GET").contains(&"pods".to_string()),
            "{:?}",
            f.paths("GET")
        );
        let sts = stored_sts(f);
        let anti = &sts["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"];
        assert_eq!(
            anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
                ["topologyKey"],
            "kubernetes.io/hostname"
        );
        // The StatefulSet as the API server holds it: with a UID, which its pods reference.
        let path = format!("/apis/apps/v1{NS}statefulsets/events");
        if let Some(s) = f.objects.get_mut(&path) {
            s["metadata"]["uid"] = json!("sts-uid");
        }
        for (name, uid, node) in [
            ("events-0", "sts-uid", "n1"),
            ("events-1", "sts-uid", "n1"),
            ("events-2", "sts-uid", "n2"),
            // A pod with the broker labels that the StatefulSet does not control.
            ("impostor", "other-uid", "n2"),
        ] {
            f.objects.insert(
                format!("/api/v1{NS}pods/{name}"),
                broker_pod(name, uid, node),
            );
        }
        f.calls.clear();
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(
            condition(&status, "ReplicationDegraded"),
            pair("True", "BrokersShareNode")
        );
        let message = status["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "ReplicationDegraded"))
            .and_then(|c| c["message"].as_str())
            .unwrap_or_default()
            .to_string();
        assert!(message.contains("n1: events-0, events-1"), "{message}");
        assert!(!message.contains("impostor"), "{message}");
    });

    // One broker moves to a node of its own.
    h.with(|f| {
        f.objects.insert(
            format!("/api/v1{NS}pods/events-1"),
            broker_pod("events-1", "sts-uid", "n3"),
        );
    });
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(
            condition(&status, "ReplicationDegraded"),
            pair("False", "ReplicasApart")
        );
    });

    // Pods that cannot be listed: Unknown, and the reconcile still succeeds.
    h.with(|f| f.fail = Some(("GET", "/pods", 403)));
    assert!(h.reconcile(&bc).await.is_ok());
    h.with(|f| {
        let status = f.status_writes().pop().unwrap_or_default();
        assert_eq!(
            condition(&status, "ReplicationDegraded"),
            pair("Unknown", "PlacementUnknown")
        );
    });
}

#[tokio::test]
async fn a_replicated_clusters_template_change_is_applied_with_every_pod_held() {
    use crate::crd::{DurabilitySpec, StorageSpec};
    use starling_config::Profile;
    let spec = |profile: Profile| BrokerClusterSpec {
        tier: Tier::Medium,
        profile,
        replicas: Some(3),
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        }),
        durability: Some(DurabilitySpec {
            topics: Some(vec!["orders.*".into()]),
            ..DurabilitySpec::default()
        }),
        config: Some(starling_config::ConfigOverrides {
            durable_replicas: Some(3),
            ..starling_config::ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    };
    let partition =
        |f: &Fake| stored_sts(f)["spec"]["updateStrategy"]["rollingUpdate"]["partition"].clone();
    let bc = cluster(spec(Profile::Balanced));
    let h = Harness::new(&bc);
    assert!(h.reconcile(&bc).await.is_ok());
    // Created at partition 0: nothing to roll.
    h.with(|f| assert_eq!(partition(f), json!(0)));
    // A profile change renders a new pod template: applied with the partition at the replica
    // count, so the StatefulSet controller restarts no pod until the operator lets it.
    let changed = cluster(spec(Profile::Latency));
    let action = h.reconcile(&changed).await;
    h.with(|f| assert_eq!(partition(f), json!(3)));
    assert_eq!(
        action.ok(),
        Some(Action::requeue(crate::roll::ROLL_POLL)),
        "a held roll is looked at again soon"
    );
}
