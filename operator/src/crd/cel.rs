//! The building blocks of the CRD's CEL admission rules: appending a rule to a schema node and
//! reading an optional field with its default. Shared by [`super::rules`] and
//! [`super::config_rules`], which import it and not each other's helpers.

use serde_json::{Map, Value, json};

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
