//! The building blocks of the CRD's CEL admission rules: a rule with its message for kube's
//! derive attributes, appending a rule to a schema node (for the rules generated from tables,
//! which the derive cannot attach) and reading an optional field with its default. Shared by
//! [`super::rules`], [`super::config_rules`] and [`super::user`], which import it and not each
//! other's helpers.

use kube::core::{Message, Rule};
use serde_json::{Map, Value, json};

/// A rule and its message, for kube's derive attributes (`#[x_kube(validation = ...)]` and
/// `#[kube(validation = ...)]`), which take any expression convertible into a [`Rule`]: the
/// text of either may be built at run time from the shared tables.
pub fn rule(rule: impl Into<String>, message: impl Into<String>) -> Rule {
    Rule::new(rule).message(Message::Message(message.into()))
}

/// Appends one rule to a schema node.
pub fn push_rule(schema: &mut Map<String, Value>, rule: &str, message: &str) {
    let entry = json!({ "rule": rule, "message": message });
    match schema.get_mut("x-kubernetes-validations") {
        Some(Value::Array(list)) => list.push(entry),
        _ => {
            schema.insert("x-kubernetes-validations".into(), Value::Array(vec![entry]));
        }
    }
}

/// A CEL expression that reads an optional string field with its default.
pub fn or_default(path: &str, field: &str, default: &str) -> String {
    format!("(has({path}.{field}) ? {path}.{field} : '{default}')")
}
