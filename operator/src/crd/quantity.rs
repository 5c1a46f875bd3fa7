//! [`QuantityValue`]: a Kubernetes quantity as written in a spec, an integer or a string.
//!
//! Kubernetes' own resource fields take `cpu: 2` as well as `cpu: "2"` and `memory: 4Gi`, so
//! `spec.resources.{requests,limits}.{cpu,memory}` and `spec.storage.size` do too. The schema is
//! the int-or-string form Kubernetes' CRDs use for `resource.Quantity`
//! (`x-kubernetes-int-or-string: true` with `anyOf: [{type: integer}, {type: string}]`, the
//! latter added by [`add_int_or_string_any_of`]); the CRD's admission rules ([`super::rules`])
//! check the value, and the operator parses it with `starling_config::quantity`.
//!
//! Numbers: the API server types an int-or-string field as integer or string, so it refuses a
//! fractional number such as `cpu: 0.5` (write `"500m"` or `"0.5"`). Deserializing still accepts
//! any JSON number, as Kubernetes' `resource.Quantity` does, and keeps its decimal text
//! (`0.5` becomes `"0.5"`), so an object that reached the operator some other way is judged by
//! the quantity parser rather than failing to decode. Serializing always writes the string.

use std::borrow::Cow;
use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A quantity as written: the text of a string, or the decimal digits of a number.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct QuantityValue(String);

impl QuantityValue {
    /// The quantity's text, e.g. `"2"`, `"500m"` or `"4Gi"`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The quantity's text, owned.
    pub fn into_string(self) -> String {
        self.0
    }
}

impl fmt::Display for QuantityValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for QuantityValue {
    fn from(text: String) -> Self {
        QuantityValue(text)
    }
}

impl From<&str> for QuantityValue {
    fn from(text: &str) -> Self {
        QuantityValue(text.to_string())
    }
}

impl From<QuantityValue> for String {
    fn from(q: QuantityValue) -> Self {
        q.0
    }
}

impl AsRef<str> for QuantityValue {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for QuantityValue {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = QuantityValue;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes quantity: an integer or a string such as \"500m\" or \"4Gi\"")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(QuantityValue(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(QuantityValue(v.to_string()))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Self::Value, E> {
        Ok(QuantityValue(v.to_string()))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Self::Value, E> {
        Ok(QuantityValue(v.to_string()))
    }

    /// Rust prints a finite `f64` as its shortest exact decimal, never with an exponent
    /// (`0.5`, `2`, `1000000000000000000000`): a text the quantity parser reads as written.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        if v.is_finite() {
            Ok(QuantityValue(v.to_string()))
        } else {
            Err(E::invalid_value(de::Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(QuantityValue(v.to_string()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(QuantityValue(v))
    }
}

impl<'de> Deserialize<'de> for QuantityValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

/// The int-or-string marker alone, as k8s-openapi renders `Quantity`; [`add_int_or_string_any_of`]
/// adds the `anyOf` once the CRD is generated.
impl JsonSchema for QuantityValue {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        "QuantityValue".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

/// `crd` with [`add_int_or_string_any_of`] applied to every version's schema: the CRD as
/// installed, for each of the three kinds whose quantities kube's derive cannot emit.
pub fn with_int_or_string_quantities(
    mut crd: CustomResourceDefinition,
) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        if let Some(schema) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        {
            add_int_or_string_any_of(schema);
        }
    }
    crd
}

/// Gives every `x-kubernetes-int-or-string` node of a generated schema the
/// `anyOf: [{type: integer}, {type: string}]` that Kubernetes' own CRDs carry for a quantity
/// (what `kubectl explain` and schema-aware editors read).
///
/// A post-pass because kube's structural rewrite, which runs after every schemars hook, strips
/// `type` from each `anyOf` branch: emitted by [`QuantityValue`]'s schema it would come out as
/// `anyOf: [{}, {}]`. The API server accepts the pattern only exactly so (nothing else in either
/// branch), which is why the quantity rules put `maxLength` beside it, where it applies to
/// strings alone, and not in the string branch. Both forms admit the same values: the API
/// server types an int-or-string node as integer or string either way.
pub fn add_int_or_string_any_of(schema: &mut JSONSchemaProps) {
    if schema.x_kubernetes_int_or_string == Some(true) && schema.any_of.is_none() {
        let branch = |t: &str| JSONSchemaProps {
            type_: Some(t.to_string()),
            ..JSONSchemaProps::default()
        };
        schema.any_of = Some(vec![branch("integer"), branch("string")]);
    }
    for p in schema.properties.iter_mut().flat_map(|m| m.values_mut()) {
        add_int_or_string_any_of(p);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(s)) => add_int_or_string_any_of(s),
        Some(JSONSchemaPropsOrArray::Schemas(list)) => {
            list.iter_mut().for_each(add_int_or_string_any_of)
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(s)) = &mut schema.additional_properties {
        add_int_or_string_any_of(s);
    }
}

#[cfg(test)]
mod tests {
    use super::QuantityValue;
    use serde_json::json;

    fn from(v: serde_json::Value) -> Option<QuantityValue> {
        serde_json::from_value(v).ok()
    }

    #[test]
    fn numbers_and_strings_decode_to_the_same_text() {
        assert_eq!(from(json!(2)), Some("2".into()));
        assert_eq!(from(json!("2")), Some("2".into()));
        assert_eq!(from(json!(1_073_741_824u64)), Some("1073741824".into()));
        assert_eq!(from(json!(-1)), Some("-1".into()));
        assert_eq!(from(json!(u64::MAX)), Some(u64::MAX.to_string().into()));
        assert_eq!(from(json!("500m")), Some("500m".into()));
        assert_eq!(from(json!(0.5)), Some("0.5".into()));
        assert_eq!(from(json!(2.0)), Some("2".into()));
        assert_eq!(from(json!(1e21)), Some("1000000000000000000000".into()));
        for bad in [json!(null), json!(true), json!([1]), json!({"cpu": 1})] {
            assert_eq!(from(bad.clone()), None, "{bad}");
        }
    }

    #[test]
    fn serializes_as_the_string() {
        let q = from(json!(2)).unwrap_or_default();
        assert_eq!(serde_json::to_value(&q).ok(), Some(json!("2")));
        assert_eq!(q.as_str(), "2");
        assert_eq!(q.to_string(), "2");
    }
}
