//! CEL admission rules (`x-kubernetes-validations`) attached to the generated CRD schema.
//!
//! Each rule carries a message written for the person who typed the object. Rules that depend
//! on the shared tables (tier order, profile and tier defaults) are generated from
//! `starling-config`, never typed in by hand.

use schemars::Schema;
use serde_json::{Value, json};
use starling_config::Tier;

use super::MAX_NAME_LEN;
use super::cel::{or_default, push_rule};

fn max_length(schema: &mut Schema, n: u64) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("maxLength".into(), json!(n));
    }
}

fn push(schema: &mut Schema, rule: &str, message: &str) {
    if let Some(obj) = schema.as_object_mut() {
        push_rule(obj, rule, message);
    }
}

/// A CEL map literal from tier name to its rank in the tier ladder (generated from `Tier::ALL`).
pub fn tier_rank_map() -> String {
    let mut tiers: Vec<Tier> = Tier::ALL.to_vec();
    tiers.sort();
    let entries: Vec<String> = tiers
        .iter()
        .enumerate()
        .map(|(i, t)| format!("'{}': {i}", t.as_str()))
        .collect();
    format!("{{{}}}", entries.join(", "))
}

/// For an `Option<enum>` field: drops the enum type's own description so the field's doc
/// comment survives kube's optional-enum rewrite (which would otherwise overwrite it).
pub fn keep_field_description(schema: &mut Schema) {
    if let Some(Value::Array(variants)) = schema.as_object_mut().and_then(|o| o.get_mut("anyOf")) {
        for v in variants.iter_mut().filter_map(Value::as_object_mut) {
            v.remove("description");
        }
    }
}

/// `spec.replicas`.
pub fn replicas_rules(schema: &mut Schema) {
    push(schema, "self >= 1", "replicas must be at least 1");
    let max = starling_config::MAX_REPLICAS;
    push(
        schema,
        &format!("self <= {max}"),
        &format!("replicas must be at most {max}"),
    );
}

/// `spec.image`.
pub fn image_rules(schema: &mut Schema) {
    max_length(schema, 512);
    push(schema, "size(self.trim()) > 0", "image must not be empty");
}

/// Every CPU, memory and volume size: an int-or-string [`super::QuantityValue`].
///
/// `maxLength` sits beside the int-or-string `anyOf`, where the API server applies it to string
/// values only (an integer is not checked against it); the structural-schema rules forbid it
/// inside the `anyOf`, which must be exactly `[{type: integer}, {type: string}]`. The CEL value
/// is an `int` or a `string` (the API server refuses a fractional number before CEL runs).
pub fn quantity_rules(schema: &mut Schema) {
    max_length(schema, 64);
    push(schema, QUANTITY_RULE, QUANTITY_MESSAGE);
}

/// The CEL rule of every quantity: a whole number of at least 0, or a string `isQuantity`
/// accepts that is not negative. Kubernetes types an int-or-string value as `dyn`, so the rule
/// asks `type(self)` first, as the Kubernetes documentation does; `isQuantity(self)` is then
/// costed on the field's largest possible string, well within the rule budget.
pub const QUANTITY_RULE: &str =
    "type(self) == int ? self >= 0 : isQuantity(self) && quantity(self).sign() >= 0";
/// Why a quantity is refused.
pub const QUANTITY_MESSAGE: &str =
    "must be a Kubernetes quantity of at least 0, such as 500m, 2, 512Mi or 4Gi";

/// `spec.tls.secretName`.
pub fn secret_name_rules(schema: &mut Schema) {
    max_length(schema, 253);
    push(
        schema,
        "self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",
        "secretName must be a Secret name: lowercase letters, digits, '-' and '.'",
    );
}

/// `spec.autoscaling`: the tier bounds must be in order and the scale-down threshold below
/// the scale-up threshold.
pub fn autoscaling_rules(schema: &mut Schema) {
    let ranks = tier_rank_map();
    let lo = or_default("self", "minTier", smallest_tier().as_str());
    let hi = or_default("self", "maxTier", largest_tier().as_str());
    push(
        schema,
        &format!("{ranks}[{lo}] <= {ranks}[{hi}]"),
        "autoscaling.minTier must not be a larger tier than autoscaling.maxTier",
    );
    let up = format!(
        "(has(self.scaleUpThreshold) ? self.scaleUpThreshold : {})",
        default_scale_up_threshold()
    );
    let down = format!(
        "(has(self.scaleDownThreshold) ? self.scaleDownThreshold : {})",
        default_scale_down_threshold()
    );
    push(
        schema,
        &format!("{down} < {up}"),
        "autoscaling.scaleDownThreshold must be below autoscaling.scaleUpThreshold (0 < down < up <= 100)",
    );
}

/// A percentage threshold: 1 to 100.
pub fn percent_rules(schema: &mut Schema) {
    push(
        schema,
        "self > 0 && self <= 100",
        "must be a percentage above 0 and at most 100",
    );
}

/// The duration strings of `spec.autoscaling` (the syntax [`super::duration`] parses).
pub fn duration_rules(schema: &mut Schema) {
    max_length(schema, 32);
    push(
        schema,
        &format!("self.matches('{}')", DURATION_PATTERN),
        "must be a duration such as 15s, 3m, 1h, 1m30s or 500ms (units h, m, s, ms, us)",
    );
}

/// The duration syntax accepted by `spec.autoscaling`: the workspace's one grammar, one or
/// more `<digits><unit>` with unit `h`, `m`, `s`, `ms` or `us`.
pub const DURATION_PATTERN: &str = starling_config::duration::PATTERN;

/// Default `autoscaling.scaleUpThreshold` (percent).
pub fn default_scale_up_threshold() -> i32 {
    80
}

/// Default `autoscaling.scaleDownThreshold` (percent).
pub fn default_scale_down_threshold() -> i32 {
    50
}

/// Default `autoscaling.scaleUpWindow`.
pub fn default_scale_up_window() -> String {
    "3m".to_string()
}

/// Default `autoscaling.scaleDownWindow`.
pub fn default_scale_down_window() -> String {
    "15m".to_string()
}

/// Default `autoscaling.cooldown`.
pub fn default_cooldown() -> String {
    "5m".to_string()
}

/// Default `autoscaling.scrapeInterval`.
pub fn default_scrape_interval() -> String {
    "15s".to_string()
}

/// `spec.storage`: transition rules keeping what the StatefulSet's volume claim template holds
/// (immutable in Kubernetes): the size and the StorageClass. The retention policy may change.
pub fn storage_rules(schema: &mut Schema) {
    push(schema, "self.size == oldSelf.size", STORAGE_SIZE_MESSAGE);
    // Unset (the default class) and `''` (no class) are different claims.
    push(
        schema,
        "has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
        STORAGE_CLASS_MESSAGE,
    );
}

/// Why `spec.storage.size` cannot change.
pub const STORAGE_SIZE_MESSAGE: &str = "storage.size cannot change after creation: it is the StatefulSet's volume claim template, which Kubernetes does not let change (to grow the existing volumes, expand their PersistentVolumeClaims where the StorageClass allows it)";
/// Why `spec.storage.storageClassName` cannot change.
pub const STORAGE_CLASS_MESSAGE: &str = "storage.storageClassName cannot be set, changed or unset after creation: it is the StatefulSet's volume claim template, which Kubernetes does not let change";
/// Why `spec.storage` cannot be removed.
pub const STORAGE_REMOVED_MESSAGE: &str = "storage cannot be removed: the brokers' volumes hold the durable topics' logs and a StatefulSet's volume claim templates cannot change; create a new BrokerCluster instead (storage.persistentVolumeClaimRetentionPolicy.whenDeleted says whether deleting this one keeps the volumes)";
/// Why `spec.storage` cannot be added to an existing cluster.
pub const STORAGE_ADDED_MESSAGE: &str = "storage cannot be added to an existing BrokerCluster: a StatefulSet's volume claim templates cannot change; create a new BrokerCluster with spec.storage instead";

/// Rules on the whole spec: `storage` neither removed nor added after creation (its size and
/// class are [`storage_rules`]), the profile/tier-aware lane rule, and no `replicas` while the
/// tier autoscaler is enabled.
pub fn spec_rules(schema: &mut Schema) {
    push(
        schema,
        "!has(oldSelf.storage) || has(self.storage)",
        STORAGE_REMOVED_MESSAGE,
    );
    push(
        schema,
        "has(oldSelf.storage) || !has(self.storage)",
        STORAGE_ADDED_MESSAGE,
    );
    let (rule, message) = super::config_rules::lanes_rule();
    push(schema, &rule, &message);
    push(
        schema,
        "!has(self.replicas) || !has(self.autoscaling) || !has(self.autoscaling.enabled) || !self.autoscaling.enabled",
        AUTOSCALING_REPLICAS_MESSAGE,
    );
}

/// Why `spec.replicas` (and so `/scale` and an HPA) is refused while the tier autoscaler runs.
pub const AUTOSCALING_REPLICAS_MESSAGE: &str = "replicas cannot be set while autoscaling.enabled is true: the tier autoscaler sizes the cluster by tier (unset replicas, or disable autoscaling to use replicas, kubectl scale or an HPA)";

/// Rules on the root object: the name must fit every object name derived from it.
pub fn add_root_rules(
    schema: &mut k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaProps,
) {
    let rule = format!(
        "size(self.metadata.name) <= {MAX_NAME_LEN} && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
    );
    let message = format!(
        "a BrokerCluster name must start with a letter, contain only lowercase letters, digits and '-', and be at most {MAX_NAME_LEN} characters"
    );
    let entry =
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::ValidationRule {
            rule,
            message: Some(message),
            ..Default::default()
        };
    schema
        .x_kubernetes_validations
        .get_or_insert_with(Vec::new)
        .push(entry);
}

/// The smallest tier of the ladder (the default of `autoscaling.minTier`).
pub fn smallest_tier() -> Tier {
    Tier::ALL.iter().copied().min().unwrap_or_default()
}

/// The largest tier of the ladder (the default of `autoscaling.maxTier`).
pub fn largest_tier() -> Tier {
    Tier::ALL.iter().copied().max().unwrap_or_default()
}
