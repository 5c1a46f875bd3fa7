//! The BrokerCluster's CEL admission rules (`x-kubernetes-validations`), one function per rule.
//!
//! Each function builds a kube [`Rule`] that a derive attribute of the type it guards attaches
//! (`#[x_kube(validation = rules::replicas_max_rule())]` on a field or a struct,
//! `#[kube(validation = rules::name_rule())]` on the root object): kube's `KubeSchema` derive
//! evaluates the expression when the schema is generated, so a rule whose text comes from the
//! shared tables (the replica cap, the tier ladder, the duration grammar, the profile and tier
//! defaults of the lane rule) is still generated from `starling-config`, never typed in by hand.
//! Each rule carries a message written for the person who typed the object.
//!
//! What stays outside the derive:
//! - `spec.config`'s rules ([`super::config_rules`]): one per row of the shared range and pair
//!   tables, on the properties of `starling_config::ConfigOverrides`, a type of another crate
//!   that cannot carry `x_kube` attributes, and a table's length is no fixed list of attributes;
//! - `maxLength` of a quantity ([`quantity_max_length`], a schemars transform: schemars'
//!   `length` attribute only applies to a schema typed `string`) and the quantities'
//!   int-or-string `anyOf` ([`super::quantity::add_int_or_string_any_of`], a post-pass in
//!   [`super::crd`], because kube's structural rewrite strips types from `anyOf` branches);
//! - a BrokerUser's pattern rule, which is on a list's items (see [`super::user`]).

use kube::core::Rule;
use schemars::Schema;
use serde_json::{Value, json};
use starling_config::Tier;

use super::MAX_NAME_LEN;

use super::cel::{or_default, rule};

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

/// `spec.replicas`: at least one broker.
pub fn replicas_min_rule() -> Rule {
    rule("self >= 1", "replicas must be at least 1")
}

/// `spec.replicas`: at most `starling_config::MAX_REPLICAS`.
pub fn replicas_max_rule() -> Rule {
    let max = starling_config::MAX_REPLICAS;
    rule(
        format!("self <= {max}"),
        format!("replicas must be at most {max}"),
    )
}

/// `spec.image`.
pub fn image_rule() -> Rule {
    rule("size(self.trim()) > 0", "image must not be empty")
}

/// Every CPU, memory and volume size: an int-or-string [`super::QuantityValue`], at most 64
/// characters when a string.
///
/// `maxLength` sits beside the int-or-string `anyOf`, where the API server applies it to string
/// values only (an integer is not checked against it); the structural-schema rules forbid it
/// inside the `anyOf`, which must be exactly `[{type: integer}, {type: string}]`. The CEL value
/// is an `int` or a `string` (the API server refuses a fractional number before CEL runs).
/// (A schemars transform: schemars' own `length` attribute adds `maxLength` only to a schema
/// typed `string`.)
pub fn quantity_max_length(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("maxLength".into(), json!(64));
    }
}

/// The rule of every quantity ([`QUANTITY_RULE`]).
pub fn quantity_rule() -> Rule {
    rule(QUANTITY_RULE, QUANTITY_MESSAGE)
}

/// The CEL rule of every quantity: a whole number of at least 0, or a string `isQuantity`
/// accepts that is not negative. Kubernetes types an int-or-string value as `dyn`, so the rule
/// asks `type(self)` first, as the Kubernetes documentation does; `isQuantity(self)` is then
/// costed on the field's largest possible string, well within the rule budget. The sign of a
/// string is read from its text (`quantity(self).sign()` does not compile on the API server
/// e2e runs: the CRD was refused with "no matching overload for 'sign'").
pub const QUANTITY_RULE: &str =
    "type(self) == int ? self >= 0 : isQuantity(self) && !self.startsWith('-')";
/// Why a quantity is refused.
pub const QUANTITY_MESSAGE: &str =
    "must be a Kubernetes quantity of at least 0, such as 500m, 2, 512Mi or 4Gi";

/// `spec.tls.secretName` (and a BrokerUser's `secretName`): a Secret name.
pub fn secret_name_rule() -> Rule {
    rule(
        "self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",
        "secretName must be a Secret name: lowercase letters, digits, '-' and '.'",
    )
}

/// `spec.autoscaling`: the tier bounds must be in order (ranks generated from the tier ladder).
pub fn autoscaling_tier_order_rule() -> Rule {
    let ranks = tier_rank_map();
    let lo = or_default("self", "minTier", smallest_tier().as_str());
    let hi = or_default("self", "maxTier", largest_tier().as_str());
    rule(
        format!("{ranks}[{lo}] <= {ranks}[{hi}]"),
        "autoscaling.minTier must not be a larger tier than autoscaling.maxTier",
    )
}

/// `spec.autoscaling`: the scale-down threshold below the scale-up threshold, each with its
/// default when unset.
pub fn autoscaling_threshold_rule() -> Rule {
    let up = format!(
        "(has(self.scaleUpThreshold) ? self.scaleUpThreshold : {})",
        default_scale_up_threshold()
    );
    let down = format!(
        "(has(self.scaleDownThreshold) ? self.scaleDownThreshold : {})",
        default_scale_down_threshold()
    );
    rule(
        format!("{down} < {up}"),
        "autoscaling.scaleDownThreshold must be below autoscaling.scaleUpThreshold (0 < down < up <= 100)",
    )
}

/// A percentage threshold: 1 to 100.
pub fn percent_rule() -> Rule {
    rule(
        "self > 0 && self <= 100",
        "must be a percentage above 0 and at most 100",
    )
}

/// The duration strings of `spec.autoscaling` (the syntax [`super::duration`] parses).
pub fn duration_rule() -> Rule {
    rule(
        format!("self.matches('{}')", DURATION_PATTERN),
        "must be a duration such as 15s, 3m, 1h, 1m30s or 500ms (units h, m, s, ms, us)",
    )
}

/// The duration syntax accepted by `spec.autoscaling`: the workspace's one grammar, one or
/// more `<digits><unit>` with unit `h`, `m`, `s`, `ms` or `us`.
pub const DURATION_PATTERN: &str = starling_config::duration::PATTERN;

/// The broker knobs `spec.durability` sets: (its field, below `durability`, dotted; the knob).
/// The admission rule [`durability_conflict_rule`] and the operator's own check
/// (`crate::validate::durability`) both come from it.
pub const DURABILITY_KNOBS: &[(&str, &str)] = &[
    ("topics", "durable_topics"),
    ("fsync", "storage_fsync"),
    ("fsyncIntervalMs", "storage_fsync_interval_ms"),
    ("retention.maxBytes", "storage_retention_max_bytes"),
    ("retention.maxAge", "storage_retention_max_age_ms"),
];

/// On the whole spec: `durability` keeps its logs on the brokers' volumes.
pub fn durability_needs_storage_rule() -> Rule {
    rule(
        "!has(self.durability) || has(self.storage)",
        DURABILITY_NEEDS_STORAGE_MESSAGE,
    )
}

/// Why `spec.durability` is refused without `spec.storage`.
pub const DURABILITY_NEEDS_STORAGE_MESSAGE: &str = "durability needs storage: the durable topics keep their logs on the brokers' volumes (spec.storage)";

/// A CEL test that the dotted `path` below `root` is set (each level checked with `has`).
fn has_path(root: &str, path: &str) -> String {
    let mut prefix = root.to_string();
    let mut tests = Vec::new();
    for part in path.split('.') {
        prefix = format!("{prefix}.{part}");
        tests.push(format!("has({prefix})"));
    }
    tests.join(" && ")
}

/// On the whole spec: no knob is set both in `durability` and in `config` (generated from
/// [`DURABILITY_KNOBS`]).
pub fn durability_conflict_rule() -> Rule {
    let pairs: Vec<String> = DURABILITY_KNOBS
        .iter()
        .map(|(field, knob)| {
            format!(
                "!({} && has(self.config.{knob}))",
                has_path("self.durability", field)
            )
        })
        .collect();
    let list: Vec<String> = DURABILITY_KNOBS
        .iter()
        .map(|(field, knob)| format!("durability.{field} (config.{knob})"))
        .collect();
    rule(
        format!(
            "!has(self.durability) || !has(self.config) || ({})",
            pairs.join(" && ")
        ),
        format!(
            "a knob is set both in durability and in config; set each in one place: {}",
            list.join(", ")
        ),
    )
}

/// `spec.durability.fsyncIntervalMs`: the range of `storage_fsync_interval_ms` in the shared
/// knob table.
pub fn fsync_interval_rule() -> Rule {
    let knob = "storage_fsync_interval_ms";
    let r = starling_config::validate::KNOB_RANGES
        .iter()
        .find(|r| r.knob == knob);
    let min = r.and_then(|r| r.min).unwrap_or(0);
    match r.and_then(|r| r.max) {
        Some(max) => rule(
            format!("self >= {min} && self <= {max}"),
            format!("must be between {min} and {max} (ms)"),
        ),
        None => rule(
            format!("self >= {min}"),
            format!("must be at least {min} (ms)"),
        ),
    }
}

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

/// `spec.storage`: a transition rule keeping what the StatefulSet's volume claim template holds
/// (immutable in Kubernetes), the size. The retention policy may change.
pub fn storage_size_rule() -> Rule {
    rule("self.size == oldSelf.size", STORAGE_SIZE_MESSAGE)
}

/// `spec.storage`: the StorageClass cannot change either. Unset (the default class) and `''`
/// (no class) are different claims.
pub fn storage_class_rule() -> Rule {
    rule(
        "has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)",
        STORAGE_CLASS_MESSAGE,
    )
}

/// Why `spec.storage.size` cannot change.
pub const STORAGE_SIZE_MESSAGE: &str = "storage.size cannot change after creation: it is the StatefulSet's volume claim template, which Kubernetes does not let change (to grow the existing volumes, expand their PersistentVolumeClaims where the StorageClass allows it)";
/// Why `spec.storage.storageClassName` cannot change.
pub const STORAGE_CLASS_MESSAGE: &str = "storage.storageClassName cannot be set, changed or unset after creation: it is the StatefulSet's volume claim template, which Kubernetes does not let change";
/// Why `spec.storage` cannot be removed.
pub const STORAGE_REMOVED_MESSAGE: &str = "storage cannot be removed: the brokers' volumes hold the durable topics' logs and a StatefulSet's volume claim templates cannot change; create a new BrokerCluster instead (storage.persistentVolumeClaimRetentionPolicy.whenDeleted says whether deleting this one keeps the volumes)";
/// Why `spec.storage` cannot be added to an existing cluster.
pub const STORAGE_ADDED_MESSAGE: &str = "storage cannot be added to an existing BrokerCluster: a StatefulSet's volume claim templates cannot change; create a new BrokerCluster with spec.storage instead";

/// On the whole spec: `storage` cannot be removed after creation (its size and class are
/// [`storage_size_rule`] and [`storage_class_rule`]).
pub fn storage_removed_rule() -> Rule {
    rule(
        "!has(oldSelf.storage) || has(self.storage)",
        STORAGE_REMOVED_MESSAGE,
    )
}

/// On the whole spec: `storage` cannot be added after creation.
pub fn storage_added_rule() -> Rule {
    rule(
        "has(oldSelf.storage) || !has(self.storage)",
        STORAGE_ADDED_MESSAGE,
    )
}

/// On the whole spec: the profile/tier-aware lane rule ([`super::config_rules::lanes_rule`]).
pub fn lanes_rule() -> Rule {
    let (text, message) = super::config_rules::lanes_rule();
    rule(text, message)
}

/// On the whole spec: no `replicas` while the tier autoscaler is enabled.
pub fn autoscaling_replicas_rule() -> Rule {
    rule(
        "!has(self.replicas) || !has(self.autoscaling) || !has(self.autoscaling.enabled) || !self.autoscaling.enabled",
        AUTOSCALING_REPLICAS_MESSAGE,
    )
}

/// Why `spec.replicas` (and so `/scale` and an HPA) is refused while the tier autoscaler runs.
pub const AUTOSCALING_REPLICAS_MESSAGE: &str = "replicas cannot be set while autoscaling.enabled is true: the tier autoscaler sizes the cluster by tier (unset replicas, or disable autoscaling to use replicas, kubectl scale or an HPA)";

/// The rule on the root object: the name must fit every object name derived from it.
pub fn name_rule() -> Rule {
    rule(
        format!(
            "size(self.metadata.name) <= {MAX_NAME_LEN} && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')"
        ),
        format!(
            "a BrokerCluster name must start with a letter, contain only lowercase letters, digits and '-', and be at most {MAX_NAME_LEN} characters"
        ),
    )
}

/// The smallest tier of the ladder (the default of `autoscaling.minTier`).
pub fn smallest_tier() -> Tier {
    Tier::ALL.iter().copied().min().unwrap_or_default()
}

/// The largest tier of the ladder (the default of `autoscaling.maxTier`).
pub fn largest_tier() -> Tier {
    Tier::ALL.iter().copied().max().unwrap_or_default()
}
