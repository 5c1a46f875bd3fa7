//! CRD tests: the committed YAML matches the generated one, the schema is structural, and every
//! CEL rule compiles and behaves as intended, evaluated offline with kube's CEL validator.
//! Range and order rules are probed against `starling_config::resolve` at every bound.

use kube::core::cel::{Validator, compile_schema};
use serde_json::{Map, Value, json};
use starling_config::{ConfigError, ConfigOverrides, KNOBS, Profile, Tier, compose, resolve};

use super::config_rules::{
    KnobRange, OPERATOR_MANAGED_KNOBS, knob_one_of, knob_pairs, knob_ranges, one_of_rule,
    pair_rule, range_rule,
};
use super::probe;
use super::*;

const REGENERATE: &str = "cargo run -p starling-operator --bin crdgen > crds/brokercluster.yaml";

/// The CRD's schema exactly as installed.
fn schema() -> Value {
    probe::schema(&crd())
}

/// The schema as kube-cel needs it to evaluate the rules like the API server does.
fn cel_schema() -> Value {
    probe::cel_schema(&crd())
}

fn object(name: &str, spec: Value) -> Value {
    probe::object("BrokerCluster", name, spec)
}

/// Messages of every rule the object fails (empty: admitted).
fn failures(obj: &Value, old: Option<&Value>) -> Vec<String> {
    probe::failures(&cel_schema(), obj, old)
}

fn admit(spec: Value) -> Vec<String> {
    failures(&object("events", spec), None)
}

#[test]
fn committed_crd_matches_generated() {
    probe::assert_committed("brokercluster.yaml", &crd_yaml(), REGENERATE);
}

#[test]
fn names_columns_and_subresources() {
    let c = crd();
    assert_eq!(c.spec.group, GROUP);
    assert_eq!(c.spec.names.kind, "BrokerCluster");
    assert_eq!(
        c.spec.names.short_names,
        Some(vec!["sbc".to_string(), "bc".to_string()])
    );
    assert_eq!(c.spec.scope, "Namespaced");
    let v = &c.spec.versions[0];
    assert_eq!(v.name, "v1alpha1");
    assert_eq!(
        probe::printer_columns(&c),
        ["Tier", "Profile", "Ready", "Status", "Age"]
    );
    let sub = v.subresources.as_ref();
    assert!(sub.and_then(|s| s.status.as_ref()).is_some());
    let scale = sub.and_then(|s| s.scale.as_ref());
    assert_eq!(
        scale.map(|s| s.spec_replicas_path.as_str()),
        Some(".spec.replicas")
    );
    assert_eq!(
        scale.map(|s| s.status_replicas_path.as_str()),
        Some(".status.replicas")
    );
    assert_eq!(
        scale.and_then(|s| s.label_selector_path.as_deref()),
        Some(".status.selector")
    );
    let root = schema();
    assert!(
        root.pointer("/properties/status/properties/selector")
            .is_some()
    );
    assert!(
        root.pointer("/properties/status/properties/effectiveTier")
            .is_some()
    );
    assert!(
        root.pointer("/properties/status/properties/ready")
            .is_some()
    );
}

/// Structural-schema checks the API server applies, as far as they matter here.
fn structural_problems(path: &str, node: &Value, out: &mut Vec<String>) {
    let Some(obj) = node.as_object() else { return };
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if !obj.contains_key("type") && !int_or_string && !preserve {
        out.push(format!("{path}: no type"));
    }
    if obj.contains_key("properties") && obj.contains_key("additionalProperties") {
        out.push(format!(
            "{path}: properties together with additionalProperties"
        ));
    }
    for banned in [
        "$ref",
        "$schema",
        "definitions",
        "$defs",
        "const",
        "uniqueItems",
    ] {
        if obj.contains_key(banned) {
            out.push(format!("{path}: {banned}"));
        }
    }
    if let Some(Value::Array(types)) = obj.get("type") {
        out.push(format!("{path}: type list {types:?}"));
    }
    // The one exception the API server makes: an int-or-string node's `anyOf` may type its
    // branches, when it is exactly `[{type: integer}, {type: string}]`.
    let int_or_string_any_of = int_or_string
        && obj.get("anyOf") == Some(&json!([{"type": "integer"}, {"type": "string"}]));
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(items)) = obj.get(key) {
            for (i, item) in items.iter().enumerate() {
                if item.get("type").is_some() && !(key == "anyOf" && int_or_string_any_of) {
                    out.push(format!("{path}.{key}[{i}]: type inside {key}"));
                }
            }
        }
    }
    if int_or_string && obj.contains_key("type") {
        out.push(format!("{path}: type beside x-kubernetes-int-or-string"));
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        for (k, v) in props {
            structural_problems(&format!("{path}.{k}"), v, out);
        }
    }
    if let Some(items) = obj.get("items") {
        structural_problems(&format!("{path}[]"), items, out);
    }
    if let Some(ap @ Value::Object(_)) = obj.get("additionalProperties") {
        structural_problems(&format!("{path}{{}}"), ap, out);
    }
}

#[test]
fn schema_is_structural() {
    let mut problems = Vec::new();
    structural_problems("", &schema(), &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
    let config = schema()
        .pointer("/properties/spec/properties/config")
        .cloned()
        .unwrap_or_default();
    assert!(config.get("additionalProperties").is_none());
    let knobs = config
        .get("properties")
        .and_then(Value::as_object)
        .map(Map::len)
        .unwrap_or(0);
    assert_eq!(knobs, KNOBS.len(), "every shared knob is in spec.config");
}

fn all_rules(node: &Value, out: &mut Vec<Value>) {
    match node {
        Value::Object(obj) => {
            if let Some(Value::Array(rules)) = obj.get("x-kubernetes-validations") {
                out.extend(rules.iter().cloned());
            }
            obj.values().for_each(|v| all_rules(v, out));
        }
        Value::Array(items) => items.iter().for_each(|v| all_rules(v, out)),
        _ => {}
    }
}

#[test]
fn every_rule_compiles_and_has_a_message() {
    let mut rules = Vec::new();
    all_rules(&schema(), &mut rules);
    assert!(
        rules.len() > 25,
        "expected many rules, found {}",
        rules.len()
    );
    for r in &rules {
        let message = r.get("message").and_then(Value::as_str).unwrap_or("");
        assert!(message.len() > 10, "rule without a readable message: {r}");
    }
    let (_, errors) = probe::compile_errors(&schema());
    assert!(errors.is_empty(), "{errors:#?}");
}

fn analyze(node: &Value, problems: &mut Vec<String>) {
    use kube::core::cel::{ScopeContext, analyze_rule};
    let Some(obj) = node.as_object() else { return };
    if let Some(Value::Array(rules)) = obj.get("x-kubernetes-validations") {
        let compiled = compile_schema(node);
        for r in rules {
            let rule = r.get("rule").and_then(Value::as_str).unwrap_or("");
            for w in analyze_rule(rule, &compiled, ScopeContext::CrdValidation) {
                problems.push(format!("{rule}: {}", w.message));
            }
        }
    }
    if let Some(Value::Object(props)) = obj.get("properties") {
        props.values().for_each(|p| analyze(p, problems));
    }
}

#[test]
fn rules_stay_in_scope_and_within_the_cost_budget() {
    let mut problems = Vec::new();
    analyze(&cel_schema(), &mut problems);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn a_minimal_and_a_full_spec_are_admitted() {
    assert_eq!(admit(json!({})), Vec::<String>::new());
    let full = json!({
        "tier": "medium",
        "profile": "throughput",
        "replicas": 4,
        "config": { "pub_queue_depth": 2048, "ack_level": "committed", "slow_subscriber_policy": "block",
                    "subscriber_writer_lanes": 8, "event_stream_recv_window": 65536, "event_conn_recv_window": 131072 },
        "resources": { "requests": { "cpu": "500m", "memory": "1Gi" }, "limits": { "cpu": "2", "memory": "2Gi" } },
        "storage": { "size": "10Gi", "storageClassName": "fast",
                     "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Delete", "whenScaled": "Retain" } },
        "tls": { "secretName": "events-tls" },
        "image": "registry.example/starling-broker:1.0",
        "podTemplate": { "nodeSelector": { "pool": "brokers" }, "priorityClassName": "high",
                         "annotations": { "team": "messaging" } },
        "autoscaling": { "enabled": false, "minTier": "small", "maxTier": "large" },
        "paused": false
    });
    assert_eq!(admit(full), Vec::<String>::new());
}

fn assert_refused(spec: Value, expected: &str) {
    let messages = admit(spec.clone());
    assert!(
        messages.iter().any(|m| m.contains(expected)),
        "spec {spec} should be refused with `{expected}`, got {messages:?}"
    );
}

#[test]
fn admission_rules_refuse_with_readable_messages() {
    assert_refused(json!({"replicas": 0}), "replicas must be at least 1");
    assert_refused(json!({"replicas": 101}), "replicas must be at most 100");
    assert_refused(
        json!({"replicas": 2147483647}),
        "replicas must be at most 100",
    );
    assert!(admit(json!({"replicas": 100})).is_empty());
    assert_refused(
        json!({"autoscaling": {"minTier": "large", "maxTier": "medium"}}),
        "minTier must not be a larger tier than autoscaling.maxTier",
    );
    assert!(admit(json!({"autoscaling": {"minTier": "medium"}})).is_empty());
    assert!(
        admit(json!({"autoscaling": {"enabled": true, "scaleUpThreshold": 90, "scaleUpWindow": "1m30s",
                     "scaleDownThreshold": 40, "scaleDownWindow": "1h", "cooldown": "0s",
                     "scrapeInterval": "5s"}}))
        .is_empty()
    );
    assert_refused(
        json!({"autoscaling": {"scaleDownThreshold": 80}}),
        "scaleDownThreshold must be below autoscaling.scaleUpThreshold",
    );
    assert_refused(
        json!({"autoscaling": {"scaleUpThreshold": 40}}),
        "scaleDownThreshold must be below autoscaling.scaleUpThreshold",
    );
    assert_refused(
        json!({"autoscaling": {"scaleUpThreshold": 101}}),
        "must be a percentage above 0 and at most 100",
    );
    assert_refused(
        json!({"autoscaling": {"scaleDownThreshold": 0}}),
        "must be a percentage above 0 and at most 100",
    );
    assert_refused(
        json!({"replicas": 3, "autoscaling": {"enabled": true}}),
        "replicas cannot be set while autoscaling.enabled is true",
    );
    assert!(admit(json!({"replicas": 3, "autoscaling": {"enabled": false}})).is_empty());
    for bad in ["3 minutes", "1.5m", "", "90"] {
        assert_refused(
            json!({"autoscaling": {"scaleUpWindow": bad}}),
            "must be a duration such as 15s",
        );
    }
    assert_refused(
        json!({"config": {"quic_listen": "0.0.0.0:1"}}),
        "set by the operator",
    );
    assert_refused(
        json!({"config": {"tls_key_file": "/k"}}),
        "use spec.tls.secretName",
    );
    assert_refused(
        json!({"config": {"cluster_members_configmap": "other"}}),
        "config.cluster_members_file and config.cluster_members_configmap are set by the operator",
    );
    assert_refused(
        json!({"config": {"cluster_members_file": "/m"}}),
        "keeps the cluster's member list",
    );
    for knob in ["auth_mode", "auth_users_secret", "cluster_peer_cert_file"] {
        let value = if knob == "auth_mode" { "none" } else { "x" };
        assert_refused(
            json!({"config": {knob: value}}),
            "use spec.auth.mode and BrokerUser resources",
        );
    }
    assert!(admit(json!({"auth": {"mode": "none"}})).is_empty());
    assert!(admit(json!({"config": {"cluster_poll_interval_ms": 2000}})).is_empty());
    assert_refused(
        json!({"config": {"event_batch_max_delay_us": 5_000_000}}),
        "config.event_batch_max_delay_us must be at most 1000000",
    );
    assert_refused(
        json!({"config": {"keep_alive_interval_ms": 5000, "idle_timeout_ms": 5000}}),
        "config.keep_alive_interval_ms must be less than config.idle_timeout_ms",
    );
    assert_refused(
        json!({"resources": {"limits": {"memory": "lots"}}}),
        "must be a Kubernetes quantity",
    );
    assert_refused(
        json!({"tls": {"secretName": "Bad_Name"}}),
        "secretName must be a Secret name",
    );
    assert_refused(json!({"image": " "}), "image must not be empty");
    let bad_name = failures(&object("9lives", json!({})), None);
    assert!(
        bad_name
            .iter()
            .any(|m| m.contains("must start with a letter")),
        "{bad_name:?}"
    );
    let long = "a".repeat(MAX_NAME_LEN + 1);
    assert!(!failures(&object(&long, json!({})), None).is_empty());
    assert!(failures(&object(&"a".repeat(MAX_NAME_LEN), json!({})), None).is_empty());
}

const QUANTITY_PATHS: [&str; 5] = [
    "/properties/spec/properties/resources/properties/requests/properties/cpu",
    "/properties/spec/properties/resources/properties/requests/properties/memory",
    "/properties/spec/properties/resources/properties/limits/properties/cpu",
    "/properties/spec/properties/resources/properties/limits/properties/memory",
    "/properties/spec/properties/storage/properties/size",
];

#[test]
fn quantities_are_int_or_string_like_kubernetes_quantities() {
    let root = schema();
    for path in QUANTITY_PATHS {
        let node = root.pointer(path).cloned().unwrap_or_default();
        assert_eq!(node["x-kubernetes-int-or-string"], true, "{path}");
        assert_eq!(
            node["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}]),
            "{path}: exactly the structural int-or-string pattern"
        );
        assert!(node.get("type").is_none(), "{path}");
        assert_eq!(
            node["maxLength"], 64,
            "{path}: beside the anyOf, for strings"
        );
        assert_eq!(
            node["x-kubernetes-validations"],
            json!([{"rule": rules::QUANTITY_RULE, "message": rules::QUANTITY_MESSAGE}]),
            "{path}"
        );
    }
    let spec: BrokerClusterSpec = serde_json::from_value(json!({
        "resources": { "requests": { "cpu": 2, "memory": "1Gi" }, "limits": { "memory": 1_073_741_824 } },
        "storage": { "size": 10 }
    }))
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        serde_json::to_value(&spec).unwrap_or_default()["resources"],
        json!({ "requests": { "cpu": "2", "memory": "1Gi" }, "limits": { "memory": "1073741824" } }),
        "written back as strings"
    );
}

#[test]
fn integer_and_string_quantities_are_admitted_alike() {
    let integers = json!({
        "resources": { "requests": { "cpu": 1, "memory": 536_870_912 },
                       "limits": { "cpu": 2, "memory": 1_073_741_824 } },
        "storage": { "size": 10_737_418_240u64 }
    });
    assert_eq!(admit(integers), Vec::<String>::new());
    for ok in [
        json!(0),
        json!("0"),
        json!("500m"),
        json!("1.5Gi"),
        json!("2e3"),
        json!(i64::MAX),
    ] {
        assert_eq!(
            admit(json!({"resources": {"limits": {"cpu": ok.clone()}}})),
            Vec::<String>::new(),
            "{ok}"
        );
    }
    for bad in [
        json!(-1),
        json!("-1"),
        json!("-500m"),
        json!("lots"),
        json!("1Xi"),
        json!(""),
    ] {
        assert_refused(
            json!({"resources": {"requests": {"memory": bad}}}),
            rules::QUANTITY_MESSAGE,
        );
    }
    assert_refused(json!({"storage": {"size": -10}}), rules::QUANTITY_MESSAGE);
    // The same amount written as an integer and as a string is still a different claim
    // template text, so the transition rule keeps both spellings apart like `10Gi`/`10240Mi`.
    assert!(storage_update(json!({"size": 10}), json!({"size": 10})).is_empty());
    assert_storage_update_refused(
        json!({"size": 10}),
        json!({"size": "10"}),
        rules::STORAGE_SIZE_MESSAGE,
    );
}

/// Messages of the rules an update from `old` to `new` (both `spec.storage` or null) fails.
fn storage_update(old: Value, new: Value) -> Vec<String> {
    let spec = |storage: Value| {
        if storage.is_null() {
            json!({})
        } else {
            json!({ "storage": storage })
        }
    };
    failures(
        &object("events", spec(new)),
        Some(&object("events", spec(old))),
    )
}

fn assert_storage_update_refused(old: Value, new: Value, expected: &str) {
    let f = storage_update(old.clone(), new.clone());
    assert!(
        f.iter().any(|m| m.contains(expected)),
        "{old} -> {new} should be refused with `{expected}`, got {f:?}"
    );
}

#[test]
fn storage_cannot_be_removed_added_resized_or_moved_to_another_class() {
    let ten = json!({"size": "10Gi"});
    let fast = json!({"size": "10Gi", "storageClassName": "fast"});
    assert!(storage_update(ten.clone(), ten.clone()).is_empty());
    assert!(storage_update(fast.clone(), fast.clone()).is_empty());
    assert!(storage_update(Value::Null, Value::Null).is_empty());
    assert!(
        failures(&object("events", json!({"storage": fast.clone()})), None).is_empty(),
        "creation with storage is fine"
    );
    assert_storage_update_refused(ten.clone(), Value::Null, rules::STORAGE_REMOVED_MESSAGE);
    assert_storage_update_refused(fast.clone(), Value::Null, "storage cannot be removed");
    assert_storage_update_refused(Value::Null, ten.clone(), rules::STORAGE_ADDED_MESSAGE);
    assert_storage_update_refused(
        ten.clone(),
        json!({"size": "20Gi"}),
        rules::STORAGE_SIZE_MESSAGE,
    );
    assert_storage_update_refused(
        ten.clone(),
        json!({"size": "10240Mi"}),
        "storage.size cannot change",
    );
    for (old, new) in [
        (ten.clone(), fast.clone()),
        (fast.clone(), ten.clone()),
        (
            fast.clone(),
            json!({"size": "10Gi", "storageClassName": "slow"}),
        ),
        (ten.clone(), json!({"size": "10Gi", "storageClassName": ""})),
    ] {
        assert_storage_update_refused(old, new, rules::STORAGE_CLASS_MESSAGE);
    }
}

#[test]
fn the_claim_retention_policy_may_change_and_defaults_to_retain() {
    let policy = |deleted: &str, scaled: &str| {
        json!({"size": "10Gi", "persistentVolumeClaimRetentionPolicy":
               {"whenDeleted": deleted, "whenScaled": scaled}})
    };
    assert!(storage_update(json!({"size": "10Gi"}), policy("Delete", "Delete")).is_empty());
    assert!(storage_update(policy("Delete", "Retain"), policy("Retain", "Delete")).is_empty());
    assert!(storage_update(policy("Delete", "Delete"), json!({"size": "10Gi"})).is_empty());
    // Other values are refused by the schema's `enum` (kube-cel evaluates only the CEL rules,
    // so the enum is checked in the schema below), and by the operator's own types.
    for bad in [policy("Keep", "Retain"), policy("Retain", "delete")] {
        assert!(serde_json::from_value::<StorageSpec>(bad).is_err());
    }
    let p = schema()
        .pointer(
            "/properties/spec/properties/storage/properties/persistentVolumeClaimRetentionPolicy",
        )
        .cloned()
        .unwrap_or_default();
    for field in ["whenDeleted", "whenScaled"] {
        assert_eq!(p["properties"][field]["default"], "Retain", "{field}");
        assert_eq!(
            p["properties"][field]["enum"],
            json!(["Retain", "Delete"]),
            "{field}"
        );
    }
    let spec: BrokerClusterSpec =
        serde_json::from_value(json!({"storage": {"size": "1Gi"}})).unwrap_or_default();
    let rendered = spec
        .storage
        .map(|s| s.persistent_volume_claim_retention_policy);
    assert_eq!(
        rendered,
        Some(ClaimRetentionPolicy {
            when_deleted: ClaimRetention::Retain,
            when_scaled: ClaimRetention::Retain,
        })
    );
}

/// Field errors the shared validation reports for exactly `knob`.
fn config_errors_on(knob: &str, overrides: &ConfigOverrides) -> Vec<String> {
    match resolve(Profile::Balanced, None, overrides) {
        Err(ConfigError::Invalid(errors)) => errors
            .into_iter()
            .filter(|e| e.field == knob)
            .map(|e| e.to_string())
            .collect(),
        Err(other) => vec![other.to_string()],
        Ok(_) => Vec::new(),
    }
}

/// Overrides setting `knob = value`, with any paired knob set so the pair holds.
fn probe_values(knob: &str, value: u64) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(knob.to_string(), json!(value));
    for p in knob_pairs() {
        if p.lhs == knob {
            m.insert(
                p.rhs.to_string(),
                json!(if p.strict { value + 1 } else { value }),
            );
        } else if p.rhs == knob {
            m.insert(
                p.lhs.to_string(),
                json!(if p.strict {
                    value.saturating_sub(1)
                } else {
                    value
                }),
            );
        }
    }
    m
}

fn probe(r: &KnobRange, value: u64) -> (Vec<String>, bool) {
    let values = probe_values(r.knob, value);
    let overrides: ConfigOverrides =
        serde_json::from_value(Value::Object(values.clone())).unwrap_or_else(|e| panic!("{e}"));
    let shared = config_errors_on(r.knob, &overrides);
    let message = range_rule(r).map(|(_, m)| m).unwrap_or_default();
    let cel = admit(json!({ "config": values })).contains(&message);
    (shared, cel)
}

#[test]
fn range_rules_match_the_shared_validation_at_every_bound() {
    for r in knob_ranges() {
        assert!(
            KNOBS.iter().any(|k| k.name == r.knob),
            "{} is not a knob",
            r.knob
        );
        let mut probes = Vec::new();
        if let Some(min) = r.min {
            probes.push((min, true));
            probes.push((min - 1, false));
        }
        if let Some(max) = r.max {
            probes.push((max, true));
            probes.push((max + 1, false));
        }
        for (value, ok) in probes {
            let (shared, cel) = probe(&r, value);
            assert_eq!(
                shared.is_empty(),
                ok,
                "{} = {value}: shared validation says {shared:?}",
                r.knob
            );
            assert_eq!(!cel, ok, "{} = {value}: admission disagrees", r.knob);
        }
    }
}

/// A one-of knob (`durable_replicas`: 1, 3 or 5): the schema lists exactly the values as its
/// `enum`, and the admission rule and the shared validation agree on every value from 0 to one
/// past the largest, both naming the values.
#[test]
fn one_of_rules_match_the_shared_validation_and_the_enum() {
    let config = schema()
        .pointer("/properties/spec/properties/config/properties")
        .cloned()
        .unwrap_or_default();
    assert!(!knob_one_of().is_empty());
    for o in knob_one_of() {
        assert!(
            KNOBS.iter().any(|k| k.name == o.knob),
            "{} is not a knob",
            o.knob
        );
        assert_eq!(
            config[o.knob]["enum"],
            json!(o.values),
            "{}: the CRD's enum",
            o.knob
        );
        let message = one_of_rule(&o).1;
        assert!(message.contains(&o.words()), "{message}");
        let largest = o.values.iter().copied().max().unwrap_or(0);
        for value in 0..=largest + 1 {
            let ok = o.values.contains(&value);
            let overrides: ConfigOverrides =
                serde_json::from_value(json!({ o.knob: value })).unwrap_or_else(|e| panic!("{e}"));
            let shared = config_errors_on(o.knob, &overrides);
            assert_eq!(
                shared.is_empty(),
                ok,
                "{} = {value}: shared validation says {shared:?}",
                o.knob
            );
            if !ok {
                assert!(
                    shared.iter().all(|e| e.contains(&o.words())),
                    "{} = {value}: {shared:?}",
                    o.knob
                );
            }
            let refused = admit(json!({ "config": { o.knob: value } })).contains(&message);
            assert_eq!(refused, !ok, "{} = {value}: admission disagrees", o.knob);
        }
    }
}

#[test]
fn pair_rules_match_the_shared_validation() {
    for p in knob_pairs() {
        let rhs_value = compose(Profile::Balanced, None, &ConfigOverrides::default())
            .knob_values()
            .into_iter()
            .find(|(n, _)| *n == p.rhs)
            .and_then(|(_, v)| v.as_u64())
            .unwrap_or(0);
        let ok_lhs = if p.strict { rhs_value - 1 } else { rhs_value };
        for (lhs, ok) in [(ok_lhs, true), (ok_lhs + 1, false)] {
            let values = json!({ p.lhs: lhs, p.rhs: rhs_value });
            let overrides: ConfigOverrides =
                serde_json::from_value(values.clone()).unwrap_or_else(|e| panic!("{e}"));
            let shared = config_errors_on(p.lhs, &overrides);
            assert_eq!(shared.is_empty(), ok, "{values}: {shared:?}");
            let message = pair_rule(&p).1;
            let refused = admit(json!({ "config": values })).contains(&message);
            assert_eq!(refused, !ok, "{values}: admission disagrees");
        }
    }
}

#[test]
fn lane_rule_agrees_with_the_shared_validation_for_every_profile_and_tier() {
    let validator = Validator::new();
    let compiled = compile_schema(&cel_schema());
    let options = [
        None,
        Some(1u32),
        Some(2),
        Some(4),
        Some(8),
        Some(9),
        Some(16),
        Some(64),
    ];
    for p in Profile::ALL {
        for t in Tier::ALL {
            for lanes in options {
                for max in options {
                    let mut config = Map::new();
                    if let Some(l) = lanes {
                        config.insert("subscriber_writer_lanes".into(), json!(l));
                    }
                    if let Some(m) = max {
                        config.insert("max_subscriber_writer_lanes".into(), json!(m));
                    }
                    let overrides: ConfigOverrides =
                        serde_json::from_value(Value::Object(config.clone())).unwrap_or_default();
                    let shared_refuses = match resolve(*p, Some(*t), &overrides) {
                        Err(ConfigError::Invalid(errs)) => errs.iter().any(|e| {
                            e.field == "subscriber_writer_lanes"
                                && e.reason.contains("max_subscriber_writer_lanes")
                        }),
                        _ => false,
                    };
                    let obj = object(
                        "events",
                        json!({ "profile": p.as_str(), "tier": t.as_str(), "config": config }),
                    );
                    let cel_refuses = match validator.validate_compiled(&compiled, &obj, None) {
                        Ok(()) => false,
                        Err(errs) => errs.into_vec().iter().any(|e| {
                            e.message
                                .contains("must not exceed config.max_subscriber_writer_lanes")
                        }),
                    };
                    assert_eq!(
                        cel_refuses, shared_refuses,
                        "{p}/{t} lanes={lanes:?} max={max:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn operator_managed_knobs_are_shared_knobs() {
    for k in OPERATOR_MANAGED_KNOBS {
        assert!(KNOBS.iter().any(|d| d.name == *k), "{k}");
    }
}

#[test]
fn spec_round_trips_and_defaults_apply() {
    let spec: BrokerClusterSpec =
        serde_json::from_value(json!({})).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(spec.tier, Tier::default());
    assert_eq!(spec.profile, Profile::default());
    assert!(!spec.paused);
    let a: AutoscalingSpec = serde_json::from_value(json!({"enabled": true})).unwrap_or_default();
    assert_eq!((a.min_tier, a.max_tier), (Tier::Small, Tier::Large));
    let text = serde_json::to_value(&spec).unwrap_or_default();
    assert_eq!(
        text,
        json!({"tier": "small", "profile": "balanced", "paused": false})
    );
}

#[test]
fn kube_cel_rewrite_touches_only_property_names_and_type() {
    assert_eq!(
        probe::kube_cel_rule("!has(self.pub_queue_depth) || self.pub_queue_depth >= 1"),
        "!has(self.pub__queue__depth) || self.pub__queue__depth >= 1"
    );
    assert_eq!(
        probe::kube_cel_rule("{'a_b': 1}['a_b'] > 0"),
        "{'a_b': 1}['a_b'] > 0"
    );
    assert_eq!(
        probe::kube_cel_rule("self.metadata.name"),
        "self.metadata.name"
    );
    assert_eq!(
        probe::kube_cel_rule(rules::QUANTITY_RULE),
        "string(self) != self ? self >= 0 : isQuantity(self) && !self.startsWith('-')"
    );
}

#[test]
fn durability_needs_storage_and_no_knob_twice() {
    let storage = json!({"size": "10Gi"});
    let full = json!({
        "topics": ["orders.*"],
        "fsync": "interval",
        "fsyncIntervalMs": 250,
        "retention": {"maxBytes": "5Gi", "maxAge": "168h"}
    });
    assert!(
        admit(json!({"storage": storage, "durability": full})).is_empty(),
        "{:?}",
        admit(json!({"storage": storage, "durability": full}))
    );
    assert!(
        admit(json!({"storage": storage, "durability": {"retention": {"maxBytes": 1024}}}))
            .is_empty()
    );
    // The rules are in the generated CRD, on the spec.
    let yaml = crd_yaml();
    assert!(
        yaml.contains("!has(self.durability) || has(self.storage)"),
        "{yaml}"
    );
    assert!(yaml.contains("has(self.config.storage_fsync)"), "{yaml}");
    assert_refused(
        json!({"durability": {"topics": ["orders.*"]}}),
        rules::DURABILITY_NEEDS_STORAGE_MESSAGE,
    );
    for (field, knob, value) in [
        ("topics", "durable_topics", json!(["a"])),
        ("fsync", "storage_fsync", json!("never")),
        ("fsyncIntervalMs", "storage_fsync_interval_ms", json!(10)),
    ] {
        let mut durability = serde_json::Map::new();
        durability.insert(field.into(), value.clone());
        let mut config = serde_json::Map::new();
        config.insert(knob.into(), value);
        assert_refused(
            json!({"storage": storage, "durability": durability, "config": config}),
            "a knob is set both in durability and in config",
        );
    }
    assert_refused(
        json!({"storage": storage, "durability": {"retention": {"maxAge": "1h"}},
               "config": {"storage_retention_max_age_ms": 1000}}),
        "a knob is set both in durability and in config",
    );
    // Different knobs in the two places are fine.
    assert!(
        admit(json!({"storage": storage, "durability": {"topics": ["a"]},
                     "config": {"storage_fsync": "never", "ack_level": "persisted"}}))
        .is_empty()
    );
    assert_refused(
        json!({"storage": storage, "durability": {"fsyncIntervalMs": 0}}),
        "must be between 1 and 60000",
    );
    assert_refused(
        json!({"storage": storage, "durability": {"retention": {"maxAge": "a week"}}}),
        "must be a duration",
    );
    assert_refused(
        json!({"storage": storage, "durability": {"retention": {"maxBytes": "-1Gi"}}}),
        "quantity",
    );
}
