//! BrokerUser CRD tests: the committed YAML matches the generated one, every CEL rule compiles,
//! and the rules admit and refuse as intended (evaluated offline with kube's CEL validator),
//! the pattern shape check agreeing with `starling_access::Pattern` on every sample.

use serde_json::{Value, json};

use super::*;
use crate::crd::probe;

const REGENERATE: &str =
    "cargo run -p starling-operator --bin crdgen -- --user > crds/brokeruser.yaml";

fn schema() -> Value {
    probe::schema(&crd())
}

fn object(name: &str, spec: Value) -> Value {
    probe::object("BrokerUser", name, spec)
}

fn failures(obj: &Value, old: Option<&Value>) -> Vec<String> {
    probe::failures(&schema(), obj, old)
}

fn spec_with(permissions: Value) -> Value {
    json!({"cluster": "events", "authentication": {"type": "token"}, "permissions": permissions})
}

fn admit(spec: Value) -> Vec<String> {
    failures(&object("orders-app", spec), None)
}

#[test]
fn committed_crd_matches_generated() {
    probe::assert_committed("brokeruser.yaml", &crd_yaml(), REGENERATE);
}

#[test]
fn names_columns_and_status() {
    let crd = crd();
    assert_eq!(crd.spec.group, "starling.dev");
    assert_eq!(crd.spec.names.kind, "BrokerUser");
    assert_eq!(crd.spec.scope, "Namespaced");
    let v = &crd.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert_eq!(
        probe::printer_columns(&crd),
        ["Cluster", "Auth", "Ready", "Secret", "Age"]
    );
    assert!(v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
}

#[test]
fn every_rule_compiles() {
    let (n, errors) = probe::compile_errors(&schema());
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(
        n >= 5,
        "expected the name, cluster, permissions and pattern rules, found {n}"
    );
}

#[test]
fn a_minimal_and_a_full_user_are_admitted() {
    assert_eq!(
        admit(spec_with(json!({"publish": {"allow": ["orders.>"]}}))),
        Vec::<String>::new()
    );
    let full = json!({
        "cluster": "events",
        "authentication": {"type": "tls"},
        "secretName": "billing-creds",
        "permissions": {
            "publish": {"allow": ["orders", "orders.*", "tenant-a.>"], "deny": ["orders.audit"]},
            "subscribe": {"allow": [">"]},
            "cacheRead": {"allow": ["*.prices"]},
            "cacheWrite": {"allow": ["a.*.c.>"], "deny": ["a.b.c.d"]},
        },
    });
    assert_eq!(admit(full), Vec::<String>::new());
}

fn refused(spec: Value, expected: &str) {
    let messages = admit(spec.clone());
    assert!(
        messages.iter().any(|m| m.contains(expected)),
        "{spec} should be refused with `{expected}`, got {messages:?}"
    );
}

#[test]
fn admission_refuses_empty_permissions_bad_patterns_and_a_moved_user() {
    refused(spec_with(json!({})), "at least one of publish");
    for bad in [
        "",
        "orders..x",
        ".orders",
        "orders.",
        "ord*",
        "a.>.b",
        ">.a",
        "a b",
        "a.*x",
        "tab\there",
    ] {
        refused(
            spec_with(json!({"subscribe": {"allow": ["ok", bad]}})),
            "a pattern is '.'-separated tokens",
        );
        // The operator refuses the same patterns.
        assert!(starling_access::Pattern::parse(bad).is_err(), "{bad:?}");
    }
    for good in [
        "orders",
        "orders.*",
        "tenant-a.>",
        ">",
        "*",
        "*.*",
        "a.*.c.>",
        "ünïcode.x",
    ] {
        assert!(
            admit(spec_with(json!({"publish": {"allow": [good]}}))).is_empty(),
            "{good:?}"
        );
        assert!(starling_access::Pattern::parse(good).is_ok(), "{good:?}");
    }
    let old = object(
        "orders-app",
        spec_with(json!({"publish": {"allow": ["a"]}})),
    );
    let mut moved = old.clone();
    moved["spec"]["cluster"] = json!("other");
    let messages = failures(&moved, Some(&old));
    assert!(
        messages
            .iter()
            .any(|m| m.contains("cluster cannot be changed")),
        "{messages:?}"
    );
    let long = "a".repeat(MAX_USER_NAME_LEN + 1);
    let messages = failures(
        &object(&long, spec_with(json!({"publish": {"allow": ["a"]}}))),
        None,
    );
    assert!(
        messages.iter().any(|m| m.contains("a BrokerUser name")),
        "{messages:?}"
    );
}

#[test]
fn the_credentials_secret_defaults_to_the_users_name() {
    let mut u = BrokerUser::new(
        "orders-app",
        BrokerUserSpec {
            cluster: "events".into(),
            authentication: UserAuthentication {
                type_: UserAuthType::Token,
            },
            permissions: UserPermissions::default(),
            secret_name: None,
        },
    );
    assert_eq!(u.secret_name(), "orders-app-credentials");
    u.spec.secret_name = Some("mine".into());
    assert_eq!(u.secret_name(), "mine");
}
