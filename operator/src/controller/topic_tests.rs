//! BrokerTopic tests against the in-process fake API server: the cluster reconcile writes the
//! topics document ConfigMap and each BrokerTopic's status ([`crate::apply::topics`]), the pod
//! template does not depend on the document, and the BrokerTopic controller
//! ([`crate::topics`]) reports a missing cluster.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use starling_config::topics::TopicsDocument;

use crate::context::Context;
use crate::crd::topic::{BrokerTopic, BrokerTopicSpec};
use crate::crd::{BrokerCluster, BrokerClusterSpec, StorageSpec};
use crate::fake_api::{Fake, NS, fake_context};
use crate::names::TOPIC_FIELD_MANAGER;
use crate::validate::fixtures::broker_cluster;

const TOPICS: &str = "/apis/starling.dev/v1alpha1/namespaces/messaging/brokertopics";

struct Harness {
    fake: Arc<Mutex<Fake>>,
    ctx: Arc<Context>,
    bc: BrokerCluster,
}

fn with_storage() -> BrokerClusterSpec {
    BrokerClusterSpec {
        replicas: Some(3),
        storage: Some(StorageSpec {
            size: "1Gi".into(),
            ..StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    }
}

impl Harness {
    fn new(spec: BrokerClusterSpec) -> Self {
        let bc = broker_cluster(spec);
        let (fake, ctx) = fake_context(&bc);
        Harness { fake, ctx, bc }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Fake) -> R) -> R {
        f(&mut self.fake.lock().unwrap_or_else(|p| p.into_inner()))
    }

    async fn reconcile_cluster(&self) {
        let r = super::reconcile(Arc::new(self.bc.clone()), self.ctx.clone()).await;
        assert!(r.is_ok(), "{r:?}");
    }

    fn add(&self, name: &str, created: &str, spec: Value) {
        let mut spec = spec;
        spec["clusterRef"] = json!("events");
        let obj = json!({
            "apiVersion": "starling.dev/v1alpha1",
            "kind": "BrokerTopic",
            "metadata": {"name": name, "namespace": "messaging", "uid": format!("uid-{name}"),
                         "generation": 1, "creationTimestamp": created},
            "spec": spec,
        });
        self.with(|f| f.objects.insert(format!("{TOPICS}/{name}"), obj));
    }

    fn stored(&self, name: &str) -> BrokerTopic {
        self.with(|f| {
            serde_json::from_value(
                f.objects
                    .get(&format!("{TOPICS}/{name}"))
                    .cloned()
                    .unwrap_or_default(),
            )
            .unwrap_or_else(|e| panic!("{e}"))
        })
    }

    fn ready(&self, name: &str) -> (String, String, String) {
        let t = self.stored(name);
        t.status
            .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "Ready"))
            .map(|c| (c.status, c.reason, c.message))
            .unwrap_or_default()
    }

    fn document(&self) -> Option<TopicsDocument> {
        let text = self.with(|f| {
            f.objects
                .get(&format!("/api/v1{NS}configmaps/events-topics"))
                .and_then(|cm| cm["data"]["topics.json"].as_str().map(str::to_string))
        })?;
        Some(TopicsDocument::parse(&text, 1 << 30).unwrap_or_else(|e| panic!("{e}")))
    }

    fn template(&self) -> Value {
        self.with(|f| {
            f.objects
                .get(&format!("/apis/apps/v1{NS}statefulsets/events"))
                .map(|s| s["spec"]["template"].clone())
                .unwrap_or_default()
        })
    }
}

#[tokio::test]
async fn the_document_holds_the_accepted_topics_and_each_status_says_why() {
    let h = Harness::new(with_storage());
    h.add(
        "orders",
        "2026-01-01T00:00:00Z",
        json!({"topic": "orders.*", "replicas": 3, "fsync": "always",
               "retention": {"maxBytes": "1Gi", "maxAge": "1h"}, "maxMessageBytes": "64Ki"}),
    );
    h.add(
        "orders-again",
        "2026-01-02T00:00:00Z",
        json!({"topic": "orders.*"}),
    );
    h.add(
        "huge",
        "2026-01-03T00:00:00Z",
        json!({"topic": "huge", "maxMessageBytes": "8Gi"}),
    );
    h.add("audit", "2026-01-04T00:00:00Z", json!({"topic": "audit.>"}));
    h.reconcile_cluster().await;

    let doc = h
        .document()
        .unwrap_or_else(|| panic!("no topics ConfigMap"));
    let names: Vec<&str> = doc.topics.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["audit", "orders"], "sorted by BrokerTopic name");
    let orders = &doc.topics[1];
    assert_eq!(
        (
            orders.replicas,
            orders.retention_max_bytes,
            orders.retention_max_age_ms
        ),
        (Some(3), Some(1 << 30), Some(3_600_000))
    );
    assert_eq!(orders.max_message_bytes, Some(64 * 1024));

    let (status, reason, _) = h.ready("orders");
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Accepted"));
    let (status, reason, message) = h.ready("orders-again");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Conflict"));
    assert!(message.contains("orders"), "{message}");
    let (_, reason, message) = h.ready("huge");
    assert_eq!(reason, "Invalid");
    assert!(message.contains("maxMessageBytes"), "{message}");
    assert_eq!(h.ready("audit").1, "Accepted");
    assert_eq!(
        h.stored("orders")
            .status
            .and_then(|s| s.observed_generation),
        Some(1)
    );

    h.with(|f| {
        // Every status write is a server-side apply under the topics' own field manager.
        let writes: Vec<_> = f
            .calls
            .iter()
            .filter(|c| c.method == "PATCH" && c.path.contains("/brokertopics/"))
            .collect();
        assert_eq!(writes.len(), 4);
        for c in writes {
            assert!(c.path.ends_with("/status"), "{}", c.path);
            assert!(
                c.query
                    .contains(&format!("fieldManager={TOPIC_FIELD_MANAGER}")),
                "{}",
                c.query
            );
            assert_eq!(c.body["kind"], "BrokerTopic");
        }
        // The pods mount the document and the broker reads it from there.
        let cm = f
            .objects
            .get(&format!("/api/v1{NS}configmaps/events-topics"))
            .cloned()
            .unwrap_or_default();
        assert_eq!(cm["metadata"]["ownerReferences"][0]["uid"], "0000-uid");
        f.calls.clear();
    });
    let template = h.template();
    let mounts = template["spec"]["containers"][0]["volumeMounts"].clone();
    assert!(
        mounts
            .as_array()
            .into_iter()
            .flatten()
            .any(|m| m["name"] == "topics" && m["mountPath"] == "/etc/starling/topics"),
        "{mounts}"
    );

    // Nothing changed: no status is written again.
    h.reconcile_cluster().await;
    h.with(|f| {
        let patched = f.paths("PATCH");
        assert!(
            !patched.iter().any(|p| p.contains("brokertopics")),
            "{patched:?}"
        );
    });
}

#[tokio::test]
async fn a_new_or_deleted_topic_changes_the_document_but_not_the_pod_template() {
    let h = Harness::new(with_storage());
    h.reconcile_cluster().await;
    // No BrokerTopic yet: the document is there, empty, and mounted.
    assert_eq!(h.document(), Some(TopicsDocument::new(Vec::new())));
    let before = h.template();
    assert!(before.is_object());

    h.add(
        "orders",
        "2026-01-01T00:00:00Z",
        json!({"topic": "orders.*", "replicas": 3}),
    );
    h.reconcile_cluster().await;
    assert_eq!(h.document().map(|d| d.topics.len()), Some(1));
    assert_eq!(h.template(), before, "a BrokerTopic restarts no broker");

    h.with(|f| f.objects.remove(&format!("{TOPICS}/orders")));
    h.reconcile_cluster().await;
    assert_eq!(h.document(), Some(TopicsDocument::new(Vec::new())));
    assert_eq!(h.template(), before);
}

#[tokio::test]
async fn a_cluster_without_storage_refuses_its_topics_and_mounts_nothing() {
    let h = Harness::new(BrokerClusterSpec::default());
    h.add("orders", "2026-01-01T00:00:00Z", json!({"topic": "orders"}));
    h.reconcile_cluster().await;
    let (status, reason, _) = h.ready("orders");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoStorage"));
    assert_eq!(h.document(), None, "no ConfigMap without volumes");
    let volumes = h.template()["spec"]["volumes"].clone();
    assert!(
        !volumes
            .as_array()
            .into_iter()
            .flatten()
            .any(|v| v["name"] == "topics"),
        "{volumes}"
    );
}

#[tokio::test]
async fn a_paused_cluster_reports_its_topics_paused_and_writes_no_document() {
    let mut spec = with_storage();
    spec.paused = true;
    let h = Harness::new(spec);
    h.add("orders", "2026-01-01T00:00:00Z", json!({"topic": "orders"}));
    h.reconcile_cluster().await;
    assert_eq!(h.ready("orders").1, "ClusterPaused");
    assert_eq!(h.document(), None);
}

#[tokio::test]
async fn a_topic_of_a_missing_cluster_is_reported_by_its_own_controller() {
    let h = Harness::new(with_storage());
    h.add("orders", "2026-01-01T00:00:00Z", json!({"topic": "orders"}));
    let mut t = h.stored("orders");
    t.spec = BrokerTopicSpec {
        cluster_ref: "nowhere".into(),
        ..t.spec
    };
    let r = crate::topics::reconcile(Arc::new(t), h.ctx.clone()).await;
    assert_eq!(
        r.ok(),
        Some(kube::runtime::controller::Action::requeue(
            crate::topics::WAIT_REQUEUE
        ))
    );
    let (status, reason, message) = h.ready("orders");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "ClusterNotFound")
    );
    assert!(message.contains("nowhere"), "{message}");
    // The cluster exists: the controller leaves the status to the cluster's reconcile.
    h.with(|f| f.calls.clear());
    let r = crate::topics::reconcile(Arc::new(h.stored("orders")), h.ctx.clone()).await;
    assert_eq!(
        r.ok(),
        Some(kube::runtime::controller::Action::requeue(
            crate::topics::STEADY_REQUEUE
        ))
    );
    h.with(|f| assert!(f.status_writes().is_empty()));
}

#[test]
fn only_the_operators_own_status_write_is_filtered_from_the_watch() {
    let writes = crate::apply::topics::TopicWrites::default();
    let mut t = BrokerTopic::new(
        "orders",
        BrokerTopicSpec {
            cluster_ref: "events".into(),
            topic: "orders".into(),
            replicas: None,
            retention: None,
            fsync: None,
            max_message_bytes: None,
        },
    );
    t.metadata.namespace = Some("messaging".into());
    t.metadata.resource_version = Some("41".into());
    assert!(!writes.is_own_write(&t), "nothing recorded yet");
    writes.record("messaging", "orders", Some("41".into()));
    assert!(writes.is_own_write(&t));
    // A user's edit (or the deletion) comes with another version, and forgets the record.
    t.metadata.resource_version = Some("42".into());
    assert!(!writes.is_own_write(&t));
    t.metadata.resource_version = Some("41".into());
    assert!(!writes.is_own_write(&t));
}
