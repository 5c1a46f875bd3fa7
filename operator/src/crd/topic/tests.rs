//! BrokerTopic CRD tests: the committed YAML matches the generated one, every CEL rule
//! compiles, and the rules admit and refuse as intended (evaluated offline with kube's CEL
//! validator).

use serde_json::{Value, json};

use super::*;
use crate::crd::probe;

const REGENERATE: &str =
    "cargo run -p starling-operator --bin crdgen -- --topic > crds/brokertopic.yaml";

fn schema() -> Value {
    // The quantity rule's `type(self)`, which kube's offline CEL lacks, rewritten as the
    // BrokerCluster tests do.
    probe::cel_schema(&crd())
}

fn object(spec: Value) -> Value {
    probe::object("BrokerTopic", "orders", spec)
}

fn failures(obj: &Value, old: Option<&Value>) -> Vec<String> {
    probe::failures(&schema(), obj, old)
}

fn admit(spec: Value) -> Vec<String> {
    failures(&object(spec), None)
}

fn refused(spec: Value, expected: &str) {
    let messages = admit(spec.clone());
    assert!(
        messages.iter().any(|m| m.contains(expected)),
        "{spec} should be refused with `{expected}`, got {messages:?}"
    );
}

#[test]
fn committed_crd_matches_generated() {
    probe::assert_committed("brokertopic.yaml", &crd_yaml(), REGENERATE);
}

#[test]
fn names_columns_and_status() {
    let crd = crd();
    assert_eq!(crd.spec.group, "starling.dev");
    assert_eq!(crd.spec.names.kind, "BrokerTopic");
    assert_eq!(crd.spec.scope, "Namespaced");
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert_eq!(
        probe::printer_columns(&crd),
        ["Cluster", "Topic", "Replicas", "Ready", "Age"]
    );
    assert!(v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
}

#[test]
fn every_rule_compiles() {
    let (n, errors) = probe::compile_errors(&schema());
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        n >= 6,
        "expected the clusterRef, topic, replicas, quantity and duration rules, found {n}"
    );
}

#[test]
fn a_minimal_and_a_full_topic_are_admitted() {
    assert_eq!(
        admit(json!({"clusterRef": "events", "topic": "orders.*"})),
        Vec::<String>::new()
    );
    let full = json!({
        "clusterRef": "events",
        "topic": "audit.>",
        "replicas": 3,
        "retention": {"maxBytes": "10Gi", "maxAge": "168h"},
        "fsync": "always",
        "maxMessageBytes": 65536,
    });
    assert_eq!(admit(full), Vec::<String>::new());
    for r in [1, 3, 5] {
        assert!(
            admit(json!({"clusterRef": "e", "topic": "t", "replicas": r})).is_empty(),
            "{r}"
        );
    }
}

#[test]
fn admission_refuses_bad_replicas_quantities_durations_patterns_and_a_moved_topic() {
    for r in [0, 2, 4, 7] {
        refused(
            json!({"clusterRef": "e", "topic": "t", "replicas": r}),
            "replicas must be 1, 3, 5",
        );
    }
    refused(
        json!({"clusterRef": "e", "topic": "t", "maxMessageBytes": "lots"}),
        "Kubernetes quantity",
    );
    refused(
        json!({"clusterRef": "e", "topic": "t", "retention": {"maxBytes": "-1Gi"}}),
        "Kubernetes quantity",
    );
    refused(
        json!({"clusterRef": "e", "topic": "t", "retention": {"maxAge": "a week"}}),
        "duration",
    );
    for bad in ["orders..x", "a.>.b", "a b", "ord*"] {
        refused(
            json!({"clusterRef": "e", "topic": bad}),
            "topic is a name or a pattern",
        );
        assert!(starling_access::Pattern::parse(bad).is_err(), "{bad:?}");
    }
    let old = object(json!({"clusterRef": "events", "topic": "t"}));
    let mut moved = old.clone();
    moved["spec"]["clusterRef"] = json!("other");
    let messages = failures(&moved, Some(&old));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("clusterRef cannot be changed")),
        "{messages:?}"
    );
}
