//! Schema and admission rules of `spec.config`, the broker knob overrides.
//!
//! The schema itself is `starling_config::ConfigOverrides`'s. On top of it this module attaches:
//! - one range rule per knob whose bounds hold whatever else is set ([`knob_ranges`]);
//! - for a knob whose values are a short list ([`knob_one_of`]), that list as the property's
//!   `enum` and a rule whose message names the values ([`one_of_rule`]);
//! - order rules between two knobs when both are set ([`knob_pairs`]);
//! - a refusal of the knobs the operator owns ([`OPERATOR_MANAGED_KNOBS`]);
//! - at spec level, the lane rule `subscriber_writer_lanes ≤ max_subscriber_writer_lanes`
//!   with the defaults of the chosen profile and tier filled in ([`lanes_rule`]).
//!
//! The range, one-of and order tables are `starling_config::validate`'s own (the broker enforces the
//! same ones); tests also probe `starling_config::resolve` at every bound. Admission is a first line: the operator still resolves and validates the full
//! config and reports anything else as `Degraded`.

use schemars::{Schema, SchemaGenerator};
use serde_json::{Map, Value};
use starling_config::{ConfigOverrides, Profile, Tier, compose};

use super::cel::{or_default, push_rule};

/// Knobs that the operator sets itself; `spec.config` may not set them.
pub const OPERATOR_MANAGED_KNOBS: &[&str] = &[
    "quic_listen",
    "http_listen",
    "tls_cert_file",
    "tls_key_file",
    "cluster_members_file",
    "cluster_members_configmap",
    "auth_mode",
    "auth_users_file",
    "auth_users_secret",
    "auth_client_ca_file",
    "cluster_peer_cert_file",
    "cluster_peer_key_file",
    "cluster_peer_uri",
    "storage_dir",
    "topics_file",
];

pub use starling_config::validate::{
    KNOB_ONE_OF, KNOB_PAIRS, KNOB_RANGES, KnobOneOf, KnobPair, KnobRange,
};

/// Every single-knob range enforced at admission: the broker's own table.
pub fn knob_ranges() -> Vec<KnobRange> {
    KNOB_RANGES.to_vec()
}

/// Every knob whose values are a short list, enforced at admission: the broker's own table.
pub fn knob_one_of() -> Vec<KnobOneOf> {
    KNOB_ONE_OF.to_vec()
}

/// The CEL rule and message of one one-of knob. The property also carries the values as its
/// `enum`; the rule is there for its message, which names them in words as the broker does.
pub fn one_of_rule(o: &KnobOneOf) -> (String, String) {
    let tests: Vec<String> = o.values.iter().map(|v| format!("self == {v}")).collect();
    (
        tests.join(" || "),
        format!("config.{} must be {}", o.knob, o.words()),
    )
}

/// Every two-knob order enforced at admission when both knobs are set: the broker's own table.
pub fn knob_pairs() -> Vec<KnobPair> {
    KNOB_PAIRS.to_vec()
}

/// The CEL rule and message of one range.
pub fn range_rule(r: &KnobRange) -> Option<(String, String)> {
    let k = r.knob;
    match (r.min, r.max) {
        (Some(lo), Some(hi)) => Some((
            format!("self >= {lo} && self <= {hi}"),
            format!("config.{k} must be between {lo} and {hi}"),
        )),
        (Some(lo), None) => Some((
            format!("self >= {lo}"),
            format!("config.{k} must be at least {lo}"),
        )),
        (None, Some(hi)) => Some((
            format!("self <= {hi}"),
            format!("config.{k} must be at most {hi}"),
        )),
        (None, None) => None,
    }
}

/// The CEL rule and message of one pair.
pub fn pair_rule(p: &KnobPair) -> (String, String) {
    let (op, words) = if p.strict {
        ("<", "must be less than")
    } else {
        ("<=", "must not exceed")
    };
    (
        format!(
            "!has(self.{l}) || !has(self.{r}) || self.{l} {op} self.{r}",
            l = p.lhs,
            r = p.rhs
        ),
        format!("config.{} {words} config.{}", p.lhs, p.rhs),
    )
}

/// The spec-level lane rule: the effective `subscriber_writer_lanes` must not exceed the
/// effective `max_subscriber_writer_lanes`, where unset knobs take the value the chosen profile
/// and tier give them (tables generated from `starling_config::compose`).
pub fn lanes_rule() -> (String, String) {
    let mut lanes = Vec::new();
    let mut max = Vec::new();
    for p in Profile::ALL {
        for t in Tier::ALL {
            let cfg = compose(*p, Some(*t), &ConfigOverrides::default());
            let key = format!("'{}/{}'", p.as_str(), t.as_str());
            lanes.push(format!("{key}: {}", cfg.subscriber_writer_lanes));
            max.push(format!("{key}: {}", cfg.max_subscriber_writer_lanes));
        }
    }
    let key = format!(
        "{} + '/' + {}",
        or_default("self", "profile", Profile::default().as_str()),
        or_default("self", "tier", Tier::default().as_str())
    );
    let c = "self.config";
    let rule = format!(
        "!has(self.config) || \
         (has({c}.subscriber_writer_lanes) ? {c}.subscriber_writer_lanes : {{{lanes}}}[{key}]) <= \
         (has({c}.max_subscriber_writer_lanes) ? {c}.max_subscriber_writer_lanes : {{{max}}}[{key}])",
        lanes = lanes.join(", "),
        max = max.join(", "),
    );
    let message =
        "config.subscriber_writer_lanes must not exceed config.max_subscriber_writer_lanes \
                   (when unset, each takes the value of the chosen profile and tier; raise \
                   max_subscriber_writer_lanes, at most 64, together with the lanes)"
            .to_string();
    (rule, message)
}

/// `schema_with` for `spec.config`: the shared override schema plus the rules above.
///
/// `ConfigOverrides` denies unknown fields, so its schema carries `additionalProperties: false`;
/// Kubernetes structural schemas may not combine that with `properties`, so it is removed here
/// (kube's structural rewrite would drop it too). Unknown knobs are pruned by the API server.
pub fn config_schema(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<ConfigOverrides>();
    if let Some(obj) = schema.as_object_mut() {
        obj.remove("additionalProperties");
        decorate(obj);
    }
    schema
}

fn decorate(obj: &mut Map<String, Value>) {
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for r in knob_ranges() {
            if let (Some(Value::Object(prop)), Some((rule, message))) =
                (props.get_mut(r.knob), range_rule(&r))
            {
                push_rule(prop, &rule, &message);
            }
        }
        for o in knob_one_of() {
            if let Some(Value::Object(prop)) = props.get_mut(o.knob) {
                prop.insert("enum".into(), Value::from(o.values.to_vec()));
                let (rule, message) = one_of_rule(&o);
                push_rule(prop, &rule, &message);
            }
        }
    }
    for p in knob_pairs() {
        let (rule, message) = pair_rule(&p);
        push_rule(obj, &rule, &message);
    }
    let (tls, rest): (Vec<&str>, Vec<&str>) = OPERATOR_MANAGED_KNOBS
        .iter()
        .copied()
        .partition(|k| k.starts_with("tls_"));
    // The peer URI has a rule of its own: it came after the first released CRD, whose stored
    // objects must keep validating under the rules that release had (operator/tests/crd_compat.rs).
    let (peer_uri, rest): (Vec<&str>, Vec<&str>) =
        rest.into_iter().partition(|k| *k == "cluster_peer_uri");
    let (auth, rest): (Vec<&str>, Vec<&str>) = rest
        .into_iter()
        .partition(|k| k.starts_with("auth_") || k.starts_with("cluster_peer_"));
    let (storage, rest): (Vec<&str>, Vec<&str>) =
        rest.into_iter().partition(|k| k.starts_with("storage_"));
    let (topics, rest): (Vec<&str>, Vec<&str>) =
        rest.into_iter().partition(|k| k.starts_with("topics_"));
    let (cluster, listen): (Vec<&str>, Vec<&str>) =
        rest.into_iter().partition(|k| k.starts_with("cluster_"));
    let none_set = |knobs: &[&str]| {
        knobs
            .iter()
            .map(|k| format!("!has(self.{k})"))
            .collect::<Vec<_>>()
            .join(" && ")
    };
    push_rule(
        obj,
        &none_set(&listen),
        &format!(
            "config.{} are set by the operator (UDP port {} and TCP port {})",
            listen.join(" and config."),
            starling_config::DEFAULT_QUIC_PORT,
            starling_config::DEFAULT_HTTP_PORT
        ),
    );
    push_rule(
        obj,
        &none_set(&tls),
        &format!(
            "config.{} are set by the operator; use spec.tls.secretName",
            tls.join(" and config.")
        ),
    );
    push_rule(
        obj,
        &none_set(&cluster),
        &format!(
            "config.{} are set by the operator, which keeps the cluster's member list",
            cluster.join(" and config.")
        ),
    );
    push_rule(
        obj,
        &none_set(&storage),
        &format!(
            "config.{} is set by the operator: the volume of spec.storage, at {}",
            storage.join(" and config."),
            "/var/lib/starling"
        ),
    );
    push_rule(
        obj,
        &none_set(&topics),
        &format!(
            "config.{} is set by the operator: the topics document of the cluster's BrokerTopic resources",
            topics.join(" and config.")
        ),
    );
    push_rule(
        obj,
        &none_set(&peer_uri),
        &format!(
            "config.{} is set by the operator: the URI SAN of the cluster's peer certificate",
            peer_uri.join(" and config.")
        ),
    );
    push_rule(
        obj,
        &none_set(&auth),
        &format!(
            "config.{} are set by the operator; use spec.auth.mode and BrokerUser resources",
            auth.join(" and config.")
        ),
    );
}
