//! The users document: what the operator writes into the `<cluster>-users` Secret (key
//! `users.yaml`) and a hand-run broker reads from `auth_users_file`. YAML; JSON is accepted
//! too, since it is YAML.
//!
//! ```yaml
//! version: 1
//! users:
//!   - name: orders-app
//!     authentication: {type: token, sha256: "<64 hex digits>"}
//!     permissions:
//!       publish: {allow: ["orders.>"]}
//!       subscribe: {allow: ["orders.*"], deny: ["orders.audit"]}
//!       cache_read: {allow: ["orders.>"]}
//!       cache_write: {allow: []}
//!   - name: billing
//!     authentication: {type: tls}     # a client certificate whose common name is "billing"
//! ```
//!
//! An operation is allowed when one of its `allow` patterns matches and none of its `deny`
//! patterns does; a user without permissions may do nothing. Unknown fields are refused, so a
//! misspelt permission can never silently grant or withhold anything.

use serde::{Deserialize, Serialize};

/// The whole document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsersDocument {
    /// Format version: [`crate::DOCUMENT_VERSION`].
    pub version: u32,
    /// The users, in any order; names are unique.
    #[serde(default)]
    pub users: Vec<UserEntry>,
}

/// One user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserEntry {
    /// The user's name: the BrokerUser's name, and the common name of its client certificate.
    pub name: String,
    /// How the user proves who it is.
    pub authentication: Authentication,
    /// What the user may do.
    #[serde(default)]
    pub permissions: Permissions,
}

/// How a user authenticates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Authentication {
    /// A bearer token in `Hello.auth_token`; the document holds only its SHA-256.
    Token {
        /// SHA-256 of the token, 64 lower- or upper-case hex digits.
        sha256: String,
    },
    /// A client certificate signed by the broker's client CA whose subject common name is the
    /// user's name.
    Tls,
}

/// The four operations' rules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Permissions {
    /// Topics the user may publish to.
    #[serde(default)]
    pub publish: Rules,
    /// Topics the user may subscribe to (including the retained replay).
    #[serde(default)]
    pub subscribe: Rules,
    /// Cache keys the user may read.
    #[serde(default)]
    pub cache_read: Rules,
    /// Cache keys the user may write or delete.
    #[serde(default)]
    pub cache_write: Rules,
}

/// Allow and deny patterns for one operation (see [`crate::pattern`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rules {
    /// Patterns that allow.
    #[serde(default)]
    pub allow: Vec<String>,
    /// Patterns that deny, winning over `allow`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deny: Vec<String>,
}
