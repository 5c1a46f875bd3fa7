//! The `BrokerUser` custom resource (`starling.dev/v1alpha1`): one client identity of one
//! BrokerCluster, its authentication method and its permissions, and the admission rules
//! attached to it.
//!
//! The pattern language is `starling_access::Pattern`'s; admission checks only what CEL can
//! (each pattern's shape, at least one permission list), and the operator parses every
//! pattern and reports a refused one in the `Ready` condition ([`user_reasons`]).
//!
//! The rules are attached by kube's derive attributes (`#[kube(validation)]` on the root,
//! `#[x_kube(validation)]` on fields and structs), except each pattern's shape: that rule is on
//! the items of the `allow` and `deny` lists, which an attribute on the field cannot reach, so
//! [`pattern_list_rules`] adds it as a schemars transform.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Rule;
use kube::{CustomResource, CustomResourceExt, KubeSchema};
use schemars::{JsonSchema, Schema};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::cel::{push_rule, rule};

/// Longest BrokerUser name: its default credentials Secret, `<name>-credentials`, must stay a
/// valid Secret name (253 characters).
pub const MAX_USER_NAME_LEN: usize = 241;
/// Most patterns in one allow or deny list.
pub const MAX_PATTERNS: u64 = 128;
/// The CEL shape check of one pattern: `.`-separated non-empty tokens, each a literal without
/// `*`, `>`, whitespace or control characters, or a whole `*`; `>` only as the last token.
pub const PATTERN_REGEX: &str =
    "^(>|([^.*>[:space:][:cntrl:]]+|[*])([.]([^.*>[:space:][:cntrl:]]+|[*]))*([.]>)?)$";
/// Suffix of the default credentials Secret name.
pub const CREDENTIALS_SUFFIX: &str = "-credentials";

/// A client identity of one BrokerCluster, with the topics and cache keys it may use.
// clippy mistakes the repeated `type_ = ...` of the printcolumn arguments for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "starling.dev",
    version = "v1alpha1",
    kind = "BrokerUser",
    validation = user_name_rule(),
    namespaced,
    shortname = "sbu",
    category = "starling",
    status = "BrokerUserStatus",
    derive = "PartialEq",
    doc = "A client identity of a Starling BrokerCluster: how it authenticates (a client certificate or a token, written by the operator into a Secret) and which topics and cache keys it may use.",
    printcolumn(
        name = "Cluster",
        type_ = "string",
        json_path = ".spec.cluster",
        description = "The BrokerCluster this user belongs to"
    ),
    printcolumn(
        name = "Auth",
        type_ = "string",
        json_path = ".spec.authentication.type",
        description = "tls or token"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status",
        description = "Whether the credentials are issued and the user is in the cluster's users document"
    ),
    printcolumn(
        name = "Secret",
        type_ = "string",
        json_path = ".status.secretName",
        description = "The Secret holding the credentials"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct BrokerUserSpec {
    /// Name of the BrokerCluster, in the same namespace, this user may connect to. Cannot be
    /// changed.
    #[schemars(length(min = 1, max = super::MAX_NAME_LEN))]
    #[x_kube(validation = cluster_rule())]
    pub cluster: String,
    /// How the user authenticates.
    pub authentication: UserAuthentication,
    /// What the user may do. An operation is allowed when one of its `allow` patterns matches
    /// the topic or key and none of its `deny` patterns does.
    pub permissions: UserPermissions,
    /// Name of the credentials Secret the operator writes. Unset: `<name>-credentials`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    #[x_kube(validation = super::rules::secret_name_rule())]
    pub secret_name: Option<String>,
}

/// How a user proves who it is.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserAuthentication {
    /// `tls`: a client certificate signed by the cluster CA, common name = the user's name
    /// (`tls.crt`, `tls.key` in the Secret). `token`: a random bearer token (`token` in the
    /// Secret); the brokers hold only its SHA-256.
    #[serde(rename = "type")]
    pub type_: UserAuthType,
}

/// The authentication methods.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum UserAuthType {
    /// A client certificate issued by the operator.
    Tls,
    /// A bearer token generated by the operator.
    Token,
}

impl UserAuthType {
    /// As written in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            UserAuthType::Tls => "tls",
            UserAuthType::Token => "token",
        }
    }
}

/// The four operations' patterns. Patterns are `.`-separated tokens: a literal, `*` (exactly
/// one token) or, last, `>` (one or more tokens): `orders`, `orders.*`, `tenant-a.>`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = permissions_rule())]
pub struct UserPermissions {
    /// Topics the user may publish to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publish: Option<PatternRules>,
    /// Topics the user may subscribe to (including the retained replay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<PatternRules>,
    /// Cache keys the user may read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_read: Option<PatternRules>,
    /// Cache keys the user may write or delete.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<PatternRules>,
}

/// Allow and deny patterns of one operation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatternRules {
    /// Patterns that allow.
    #[serde(default)]
    #[schemars(transform = pattern_list_rules)]
    pub allow: Vec<String>,
    /// Patterns that deny; a match wins over `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(transform = pattern_list_rules)]
    pub deny: Vec<String>,
}

/// Observed state of a BrokerUser.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BrokerUserStatus {
    /// The `metadata.generation` this status was computed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, with a reason and a message.
    #[serde(default)]
    pub conditions: Vec<Condition>,
    /// The Secret holding the credentials (`tls.crt`, `tls.key`, `ca.crt` or `token`,
    /// `ca.crt`, plus `address`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_name: Option<String>,
}

/// The `Ready` condition's reasons, with their status and meaning (for the docs).
pub const USER_REASONS: &[(&str, &str, &str)] = &[
    (
        "CredentialsIssued",
        "True",
        "The credentials Secret is written and the user is in the cluster's users document.",
    ),
    (
        "ClusterNotFound",
        "False",
        "spec.cluster names no BrokerCluster in this namespace; retried every 30 s.",
    ),
    (
        "WaitingForCluster",
        "False",
        "The cluster's CA or server certificate does not exist yet; retried shortly.",
    ),
    (
        "InvalidPermissions",
        "False",
        "A pattern or the user's name was refused by the access-control rules; the message names it. No credentials are issued.",
    ),
    (
        "TooLarge",
        "False",
        "The user's permissions would take more than 32 KiB of the cluster's users document (the message gives the size); it is left out of the document and no credentials are issued.",
    ),
    (
        "ReconcileFailed",
        "False",
        "An API call failed; retried with backoff.",
    ),
];

/// Every reason of [`USER_REASONS`], by name.
pub mod user_reasons {
    /// Credentials written.
    pub const CREDENTIALS_ISSUED: &str = "CredentialsIssued";
    /// No such cluster.
    pub const CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
    /// The cluster's CA or server certificate is not there yet.
    pub const WAITING_FOR_CLUSTER: &str = "WaitingForCluster";
    /// A refused pattern or name.
    pub const INVALID_PERMISSIONS: &str = "InvalidPermissions";
    /// The user's entry would not fit in the users document.
    pub const TOO_LARGE: &str = "TooLarge";
    /// An API call failed.
    pub const RECONCILE_FAILED: &str = "ReconcileFailed";
}

impl BrokerUser {
    /// The credentials Secret's name: `spec.secretName`, else `<name>-credentials`.
    pub fn secret_name(&self) -> String {
        self.spec.secret_name.clone().unwrap_or_else(|| {
            format!(
                "{}{CREDENTIALS_SUFFIX}",
                self.metadata.name.as_deref().unwrap_or_default()
            )
        })
    }
}

fn object(schema: &mut Schema) -> Option<&mut serde_json::Map<String, Value>> {
    schema.as_object_mut()
}

/// `spec.cluster`: a BrokerCluster name (its length on the field), immutable.
pub fn cluster_rule() -> Rule {
    rule(
        "self == oldSelf",
        "cluster cannot be changed; create another BrokerUser",
    )
}

/// `spec.permissions`: at least one list.
pub fn permissions_rule() -> Rule {
    rule(
        "has(self.publish) || has(self.subscribe) || has(self.cacheRead) || has(self.cacheWrite)",
        "permissions must set at least one of publish, subscribe, cacheRead and cacheWrite",
    )
}

/// The rule on the root object: a name its credentials Secret can be derived from.
pub fn user_name_rule() -> Rule {
    rule(
        format!(
            "size(self.metadata.name) <= {MAX_USER_NAME_LEN} && self.metadata.name.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')"
        ),
        format!(
            "a BrokerUser name must be lowercase letters, digits, '-' and '.', at most {MAX_USER_NAME_LEN} characters"
        ),
    )
}

/// Every `allow` and `deny` list: bounded, and each pattern well formed as far as a regular
/// expression can tell. A schemars transform, not a derive attribute: the rule is on the list's
/// items, and `#[x_kube(validation)]` attaches only to the field's own node.
pub fn pattern_list_rules(schema: &mut Schema) {
    let Some(o) = object(schema) else {
        return;
    };
    o.insert("maxItems".into(), json!(MAX_PATTERNS));
    if let Some(Value::Object(items)) = o.get_mut("items") {
        items.insert(
            "maxLength".into(),
            json!(starling_access::pattern::MAX_PATTERN_BYTES),
        );
        items.insert("minLength".into(), json!(1));
        push_rule(
            items,
            &format!("self.matches('{PATTERN_REGEX}')"),
            "a pattern is '.'-separated tokens, each a name, '*' (one token) or, last, '>' (one or more tokens), without spaces: e.g. orders.*, tenant-a.>",
        );
    }
}

/// The CRD as installed: every rule, the one on `metadata.name` included, comes from the derive.
pub fn crd() -> CustomResourceDefinition {
    BrokerUser::crd()
}

/// The CRD as YAML, exactly what `crdgen --user` prints and `crds/brokeruser.yaml` holds.
pub fn crd_yaml() -> String {
    super::generated_yaml(&crd(), " -- --user")
}

#[cfg(test)]
mod tests;
