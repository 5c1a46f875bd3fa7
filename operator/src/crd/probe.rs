//! Test-only probes shared by the three CRDs' tests (`BrokerCluster`, `BrokerUser`,
//! `BrokerTopic`): the installed schema as kube's offline CEL validator needs it, an object of a
//! kind, the messages of every rule an object fails, the compile check of every rule, the
//! printer columns, and the drift check of a committed CRD file.
//!
//! Hand-written because kube-cel differs from the API server in two ways (see
//! [`kube_cel_rule`]); the rewrite lives here once so that every CRD's tests evaluate the rules
//! the same way.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::core::cel::{CompiledSchema, Validator, compile_schema};
use serde_json::{Value, json};

/// The CRD's schema exactly as installed.
pub fn schema(crd: &CustomResourceDefinition) -> Value {
    let crd = serde_json::to_value(crd).unwrap_or_default();
    crd.pointer("/spec/versions/0/schema/openAPIV3Schema")
        .cloned()
        .unwrap_or_default()
}

/// The CRD's schema rewritten (by [`kube_cel_compat`]) so that kube-cel evaluates its rules as
/// the API server does.
pub fn cel_schema(crd: &CustomResourceDefinition) -> Value {
    let mut s = schema(crd);
    kube_cel_compat(&mut s);
    s
}

/// Rewrites a rule for kube-cel 0.8, which differs from the API server in two ways:
/// - it escapes every `_` of a property name to `__` while the API server
///   (`k8s.io/apiserver/pkg/cel/escaping.go`) escapes only `__`. The rules are written for the
///   API server (`self.pub_queue_depth`); offline they must read `self.pub__queue__depth`. Only
///   identifiers right after a `.` are property accesses;
/// - it has no `type()`. The one use, `type(self) == int` on an int-or-string quantity, becomes
///   `string(self) != self`, which says the same of an int-or-string value (an integer differs
///   from its digits, a string equals itself).
pub fn kube_cel_rule(rule: &str) -> String {
    let rule = rule.replace("type(self) == int", "string(self) != self");
    let mut out = String::with_capacity(rule.len() * 2);
    let mut after_dot = false;
    for c in rule.chars() {
        if c == '_' && after_dot {
            out.push_str("__");
            continue;
        }
        after_dot = if c == '.' {
            true
        } else {
            after_dot && (c.is_ascii_alphanumeric())
        };
        out.push(c);
    }
    out
}

/// Applies [`kube_cel_rule`] to every rule of a schema tree.
pub fn kube_cel_compat(node: &mut Value) {
    match node {
        Value::Object(obj) => {
            if let Some(Value::Array(rules)) = obj.get_mut("x-kubernetes-validations") {
                for r in rules.iter_mut() {
                    if let Some(Value::String(rule)) = r.get_mut("rule") {
                        *rule = kube_cel_rule(rule);
                    }
                }
            }
            obj.values_mut().for_each(kube_cel_compat);
        }
        Value::Array(items) => items.iter_mut().for_each(kube_cel_compat),
        _ => {}
    }
}

/// A `starling.dev/v1alpha1` object of `kind` named `name` in namespace `messaging`.
pub fn object(kind: &str, name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "starling.dev/v1alpha1",
        "kind": kind,
        "metadata": { "name": name, "namespace": "messaging" },
        "spec": spec,
    })
}

/// Messages of every rule `obj` fails under `schema` (empty: admitted); `old` makes it an update.
pub fn failures(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<String> {
    match Validator::new().validate(schema, obj, old) {
        Ok(()) => Vec::new(),
        Err(errors) => errors.into_vec().into_iter().map(|e| e.message).collect(),
    }
}

/// How many rules `schema` has, and the compile error of each that does not compile.
pub fn compile_errors(schema: &Value) -> (usize, Vec<String>) {
    fn walk(c: &CompiledSchema, n: &mut usize, errors: &mut Vec<String>) {
        for v in &c.validations {
            *n += 1;
            if let Err(e) = v {
                errors.push(e.to_string());
            }
        }
        c.properties.values().for_each(|p| walk(p, n, errors));
        if let Some(items) = &c.items {
            walk(items, n, errors);
        }
    }
    let mut errors = Vec::new();
    let mut n = 0;
    walk(&compile_schema(schema), &mut n, &mut errors);
    (n, errors)
}

/// The names of the CRD's printer columns, in order.
pub fn printer_columns(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| c.name.clone())
        .collect()
}

/// Fails unless `crds/<file>` holds exactly `generated`, naming the command that regenerates it.
pub fn assert_committed(file: &str, generated: &str, regenerate: &str) {
    let path = format!("{}/../crds/{file}", env!("CARGO_MANIFEST_DIR"));
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "crds/{file} is out of date; regenerate it with `{regenerate}`"
    );
}
