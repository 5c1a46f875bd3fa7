//! CRD compatibility: the CRDs this build generates may only add optional fields relative to
//! the last released ones (`crds/released/<version>/`, copied there by `scripts/release.sh`
//! when the version was cut). This is the CRD rule of `docs/releases.md`: a `BrokerCluster`
//! or `BrokerUser` the previous release stored (and the API server still holds) must validate
//! against the new schema, so the operator's upgrade needs no manual step and no conversion.
//!
//! Compared node by node, for every schema node the released CRD has (path from the version's
//! `openAPIV3Schema`):
//! - no removed property, no changed `type`, `format` or `x-kubernetes-int-or-string`;
//! - no new entry in `required` (a new field is optional, or it lives in a new optional
//!   object);
//! - no tightening: no removed `enum` value, no raised `minimum`/`minLength`/`minItems`/
//!   `minProperties`, no lowered `maximum`/`maxLength`/`maxItems`/`maxProperties` (nor one
//!   added where there was none), no new or changed `pattern`, `nullable` kept, no new
//!   `x-kubernetes-validations` rule unless it reads only fields the released schema did not
//!   have (`self.<new field>`), `anyOf`/`oneOf`/`allOf` unchanged;
//! - no changed `default` (an object that omits the field would change meaning).
//!
//! and for the CRD: the same group, kind, plural and scope; every released version still
//! served, and the stored version still served.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a test crate

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

fn released_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds/released")
}

/// The newest released version directory (by semver: MAJOR.MINOR.PATCH[-PRE]).
fn latest_release() -> PathBuf {
    fn key(v: &str) -> (u64, u64, u64, bool, String) {
        let (core, pre) = v.split_once('-').unwrap_or((v, ""));
        let n: Vec<u64> = core.split('.').map(|x| x.parse().unwrap()).collect();
        (n[0], n[1], n[2], pre.is_empty(), pre.to_owned())
    }
    let mut versions: Vec<String> = fs::read_dir(released_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    versions.sort_by_key(|v| key(v));
    released_dir().join(versions.last().expect("no released CRDs"))
}

fn parse(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).unwrap()
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// Why `new` (this build's schema node) refuses something `old` (the released one) accepts.
fn schema_breaks(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
    for key in [
        "type",
        "format",
        "x-kubernetes-int-or-string",
        "anyOf",
        "oneOf",
        "allOf",
        "default",
    ] {
        if old.get(key) != new.get(key) && (old.get(key).is_some() || key != "default") {
            out.push(format!(
                "{path}: {key} changed from {:?} to {:?}",
                old.get(key),
                new.get(key)
            ));
        }
    }
    if new.get("pattern").is_some() && old.get("pattern") != new.get("pattern") {
        out.push(format!(
            "{path}: pattern {:?} -> {:?}",
            old.get("pattern"),
            new.get("pattern")
        ));
    }
    if old.get("nullable") == Some(&Value::Bool(true))
        && new.get("nullable") != Some(&Value::Bool(true))
    {
        out.push(format!("{path}: no longer nullable"));
    }
    for key in ["minimum", "minLength", "minItems", "minProperties"] {
        if let Some(n) = new.get(key) {
            let o = old.get(key).map_or(f64::NEG_INFINITY, num);
            if num(n) > o || num(n).is_nan() {
                out.push(format!("{path}: {key} raised to {n}"));
            }
        }
    }
    for key in ["maximum", "maxLength", "maxItems", "maxProperties"] {
        if let Some(n) = new.get(key) {
            let o = old.get(key).map_or(f64::INFINITY, num);
            if num(n) < o || num(n).is_nan() {
                out.push(format!("{path}: {key} lowered to {n}"));
            }
        }
    }
    if let (Some(o), Some(n)) = (old.get("enum"), new.get("enum")) {
        let n = n.as_array().unwrap();
        for v in o.as_array().unwrap() {
            if !n.contains(v) {
                out.push(format!("{path}: enum value {v} removed"));
            }
        }
    } else if new.get("enum").is_some() {
        out.push(format!("{path}: enum added"));
    }
    let rules = |v: &Value| -> Vec<Value> {
        v.get("x-kubernetes-validations")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|r| r.get("rule").cloned()).collect())
            .unwrap_or_default()
    };
    let old_rules = rules(old);
    let old_props: Vec<&str> = old
        .get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default();
    for r in rules(new) {
        let only_new = r
            .as_str()
            .is_some_and(|r| reads_only_new_fields(r, &old_props));
        if !old_rules.contains(&r) && !only_new {
            out.push(format!("{path}: new validation rule {r}"));
        }
    }
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let old_required = strings(old.get("required"));
    for r in strings(new.get("required")) {
        if !old_required.contains(&r) {
            out.push(format!("{path}: {r} is newly required"));
        }
    }
    if let Some(props) = old.get("properties").and_then(Value::as_object) {
        let new_props = new.get("properties").and_then(Value::as_object);
        for (name, o) in props {
            match new_props.and_then(|p| p.get(name)) {
                Some(n) => schema_breaks(&format!("{path}.{name}"), o, n, out),
                None => out.push(format!("{path}.{name}: removed")),
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        match (old.get(key), new.get(key)) {
            (Some(o), Some(n)) if o.is_object() && n.is_object() => {
                schema_breaks(&format!("{path}.{key}"), o, n, out);
            }
            (Some(Value::Bool(false)) | None, _) => {}
            (o, n) if o == n => {}
            (o, n) => out.push(format!("{path}: {key} {o:?} -> {n:?}")),
        }
    }
}

/// Whether a CEL rule reads nothing of its object but fields the released schema did not
/// have (`self.<field>` only, each field new): such a rule cannot refuse a stored object,
/// which has none of them.
fn reads_only_new_fields(rule: &str, old_props: &[&str]) -> bool {
    let mut fields = Vec::new();
    for (at, _) in rule.match_indices("self") {
        let before = rule[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '.') {
            continue; // part of another name
        }
        let rest = &rule[at + 4..];
        let Some(field) = rest.strip_prefix('.') else {
            return false; // the object itself
        };
        let name: String = field
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        fields.push(name);
    }
    !fields.is_empty() && fields.iter().all(|f| !old_props.contains(&f.as_str()))
}

/// Every way `new` (a whole CRD) breaks objects stored under `old`.
fn crd_breaks(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    for ptr in [
        "/spec/group",
        "/spec/names/kind",
        "/spec/names/plural",
        "/spec/scope",
    ] {
        if old.pointer(ptr) != new.pointer(ptr) {
            out.push(format!(
                "{ptr} changed: {:?} -> {:?}",
                old.pointer(ptr),
                new.pointer(ptr)
            ));
        }
    }
    let versions = |v: &Value| {
        v.pointer("/spec/versions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let new_versions = versions(new);
    for o in versions(old) {
        let name = o["name"].as_str().unwrap_or_default().to_owned();
        let Some(n) = new_versions.iter().find(|n| n["name"] == o["name"]) else {
            out.push(format!("version {name} removed"));
            continue;
        };
        if o["served"] == Value::Bool(true) && n["served"] != Value::Bool(true) {
            out.push(format!("version {name} no longer served"));
        }
        match (
            o.pointer("/schema/openAPIV3Schema"),
            n.pointer("/schema/openAPIV3Schema"),
        ) {
            (Some(os), Some(ns)) => schema_breaks(&name, os, ns, &mut out),
            (os, ns) => out.push(format!(
                "version {name}: schema {:?} -> {:?}",
                os.is_some(),
                ns.is_some()
            )),
        }
    }
    out
}

fn check(file: &str, generated: &str) {
    let path = latest_release().join(file);
    let old =
        parse(&fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
    let breaks = crd_breaks(&old, &parse(generated));
    assert!(
        breaks.is_empty(),
        "the generated {file} breaks objects stored under the released {}:\n{}",
        path.display(),
        breaks.join("\n")
    );
}

#[test]
fn broker_cluster_crd_only_adds_optional_fields() {
    check("brokercluster.yaml", &starling_operator::crd::crd_yaml());
}

#[test]
fn broker_user_crd_only_adds_optional_fields() {
    check("brokeruser.yaml", &starling_operator::crd::user::crd_yaml());
}

/// The released BrokerCluster CRD and its v1alpha1 spec schema node, to mutate.
fn released_cluster() -> Value {
    parse(&fs::read_to_string(latest_release().join("brokercluster.yaml")).unwrap())
}

const SPEC: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec";

fn breaks_after(mutate: impl FnOnce(&mut Value)) -> Vec<String> {
    let old = released_cluster();
    let mut new = old.clone();
    mutate(new.pointer_mut(SPEC).unwrap());
    crd_breaks(&old, &new)
}

/// The comparison itself: an unchanged CRD passes, an added optional field passes, and each
/// kind of breaking change is caught.
#[test]
fn the_comparison_catches_each_kind_of_break() {
    assert_eq!(
        crd_breaks(&released_cluster(), &released_cluster()),
        Vec::<String>::new()
    );
    assert_eq!(
        breaks_after(|spec| {
            spec["properties"]["newOptional"] =
                serde_json::json!({"type": "string", "maxLength": 3});
        }),
        Vec::<String>::new()
    );
    let removed = breaks_after(|spec| {
        spec["properties"]
            .as_object_mut()
            .unwrap()
            .remove("replicas");
    });
    assert!(
        removed
            .iter()
            .any(|b| b.ends_with(".spec.replicas: removed")),
        "{removed:?}"
    );
    let required = breaks_after(|spec| {
        spec["properties"]["newRequired"] = serde_json::json!({"type": "string"});
        let req = spec
            .as_object_mut()
            .unwrap()
            .entry("required")
            .or_insert(serde_json::json!([]));
        req.as_array_mut().unwrap().push(Value::from("newRequired"));
    });
    assert!(
        required
            .iter()
            .any(|b| b.contains("newRequired is newly required")),
        "{required:?}"
    );
    let retyped =
        breaks_after(|spec| spec["properties"]["replicas"]["type"] = Value::from("string"));
    assert!(
        retyped
            .iter()
            .any(|b| b.contains(".spec.replicas: type changed")),
        "{retyped:?}"
    );
    let tightened = breaks_after(|spec| spec["properties"]["replicas"]["maximum"] = Value::from(2));
    assert!(
        tightened.iter().any(|b| b.contains("maximum lowered")),
        "{tightened:?}"
    );
    let rule = breaks_after(|spec| {
        spec["x-kubernetes-validations"] =
            serde_json::json!([{"rule": "self.replicas < 3", "message": "m"}]);
    });
    assert!(
        rule.iter().any(|b| b.contains("new validation rule")),
        "{rule:?}"
    );
    // A rule across new optional fields only: no stored object has them.
    let new_only = breaks_after(|spec| {
        spec["properties"]["newA"] = serde_json::json!({"type": "integer"});
        spec["properties"]["newB"] = serde_json::json!({"type": "integer"});
        spec["x-kubernetes-validations"] = serde_json::json!([{
            "rule": "!has(self.newA) || !has(self.newB) || self.newA <= self.newB", "message": "m"
        }]);
    });
    assert_eq!(new_only, Vec::<String>::new());
    let mixed = breaks_after(|spec| {
        spec["properties"]["newA"] = serde_json::json!({"type": "integer"});
        spec["x-kubernetes-validations"] = serde_json::json!([{"rule": "!has(self.newA) || self.newA <= self.replicas", "message": "m"}]);
    });
    assert!(
        mixed.iter().any(|b| b.contains("new validation rule")),
        "{mixed:?}"
    );
    let mut old = released_cluster();
    let new = old.clone();
    old.pointer_mut("/spec/versions")
        .unwrap()
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "name": "v1alpha0", "served": true, "storage": false,
            "schema": {"openAPIV3Schema": {"type": "object"}}
        }));
    assert_eq!(
        crd_breaks(&old, &new),
        vec!["version v1alpha0 removed".to_owned()]
    );
}
