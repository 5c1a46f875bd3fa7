//! The compiled user table ([`Users`]) and the permission check ([`User::check`]).
//!
//! A table is built once from a [`UsersDocument`] and never changes; the broker swaps in a new
//! one when the document changes. Token lookups hash the presented token and compare it with
//! every token user's hash in constant time (`subtle`), so the time taken says nothing about
//! which hash, or how much of it, matched.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use subtle::ConstantTimeEq;

use crate::document::{Authentication, Rules, UsersDocument};
use crate::pattern::{Pattern, PatternError};
use crate::relation;
use crate::token::{hash_token, parse_hash};
use crate::{DOCUMENT_VERSION, PEER_IDENTITY};

/// Longest user name (a Kubernetes object name).
pub const MAX_NAME_BYTES: usize = 253;

/// Why a users document was refused.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The text is not a users document.
    #[error("users document does not parse: {0}")]
    Parse(String),
    /// A version this broker does not read.
    #[error(
        "users document version {0} is not supported (this broker reads version {DOCUMENT_VERSION})"
    )]
    Version(u32),
    /// A name is empty, too long or holds a character outside `[a-z0-9.-]`.
    #[error("user name {0:?} must be 1..=253 characters of a-z, 0-9, '.' and '-'")]
    BadName(String),
    /// Two users share a name.
    #[error("user {0:?} appears twice")]
    Duplicate(String),
    /// A token hash is not 64 hex digits.
    #[error("user {0:?}: authentication.sha256 must be 64 hex digits")]
    BadHash(String),
    /// A pattern does not parse.
    #[error("user {user:?}, {operation} rules: {source}")]
    Pattern {
        /// The user.
        user: String,
        /// The operation whose rules hold the pattern.
        operation: Operation,
        /// Why.
        #[source]
        source: PatternError,
    },
}

/// An operation a permission governs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// Publishing to a topic.
    Publish,
    /// Subscribing to a topic (including its retained replay).
    Subscribe,
    /// Reading a cache key.
    CacheRead,
    /// Writing or deleting a cache key.
    CacheWrite,
}

impl Operation {
    /// The operation's name in the users document and in refusals.
    pub const fn name(self) -> &'static str {
        match self {
            Operation::Publish => "publish",
            Operation::Subscribe => "subscribe",
            Operation::CacheRead => "cache_read",
            Operation::CacheWrite => "cache_write",
        }
    }

    /// What the operation acts on: `topic` or `key`.
    pub const fn object(self) -> &'static str {
        match self {
            Operation::Publish | Operation::Subscribe => "topic",
            Operation::CacheRead | Operation::CacheWrite => "key",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A refused operation: what, on which topic or key, by whom. Its `Display` is the message of
/// the `Forbidden` error frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    /// The operation.
    pub operation: Operation,
    /// The topic or key (lossy UTF-8 for binary keys).
    pub name: String,
    /// The user.
    pub user: String,
}

impl fmt::Display for Denied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "user {:?} may not {} {} {:?}",
            self.user,
            self.operation,
            self.operation.object(),
            self.name
        )
    }
}

impl std::error::Error for Denied {}

#[derive(Debug, Clone, Default)]
struct CompiledRules {
    allow: Vec<Pattern>,
    deny: Vec<Pattern>,
}

impl CompiledRules {
    fn compile(rules: &Rules, user: &str, operation: Operation) -> Result<Self, AccessError> {
        let parse = |texts: &[String]| {
            texts
                .iter()
                .map(|t| Pattern::parse(t))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|source| AccessError::Pattern {
                    user: user.to_string(),
                    operation,
                    source,
                })
        };
        Ok(CompiledRules {
            allow: parse(&rules.allow)?,
            deny: parse(&rules.deny)?,
        })
    }

    fn allows(&self, name: &[u8]) -> bool {
        self.allow.iter().any(|p| p.matches(name)) && !self.deny.iter().any(|p| p.matches(name))
    }

    /// Every name `pattern` matches is allowed: the allow patterns together cover it and no
    /// deny pattern shares a name with it.
    fn allows_pattern(&self, pattern: &Pattern) -> bool {
        relation::covers(&self.allow, pattern)
            && !self.deny.iter().any(|d| relation::overlaps(d, pattern))
    }
}

/// How a user authenticates, once compiled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// A token whose SHA-256 the table holds.
    Token,
    /// A client certificate with the user's name as its common name.
    Tls,
}

/// One user with compiled permissions.
#[derive(Debug)]
pub struct User {
    name: String,
    method: Method,
    publish: CompiledRules,
    subscribe: CompiledRules,
    cache_read: CompiledRules,
    cache_write: CompiledRules,
}

impl User {
    /// The user's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How the user authenticates.
    pub fn method(&self) -> Method {
        self.method
    }

    fn rules(&self, operation: Operation) -> &CompiledRules {
        match operation {
            Operation::Publish => &self.publish,
            Operation::Subscribe => &self.subscribe,
            Operation::CacheRead => &self.cache_read,
            Operation::CacheWrite => &self.cache_write,
        }
    }

    /// Whether the user may perform `operation` on `name` (a topic's bytes or a cache key).
    pub fn allows(&self, operation: Operation, name: &[u8]) -> bool {
        self.rules(operation).allows(name)
    }

    /// Whether the user may perform `operation` on every name `pattern` matches (a wildcard
    /// subscription): the same answer as [`User::allows`] for each of them, decided without
    /// listing them.
    pub fn allows_pattern(&self, operation: Operation, pattern: &Pattern) -> bool {
        self.rules(operation).allows_pattern(pattern)
    }

    /// [`User::allows_pattern`], as a typed refusal naming the operation, the pattern and the
    /// user.
    pub fn check_pattern(&self, operation: Operation, pattern: &Pattern) -> Result<(), Denied> {
        if self.allows_pattern(operation, pattern) {
            Ok(())
        } else {
            Err(Denied {
                operation,
                name: pattern.as_str().to_string(),
                user: self.name.clone(),
            })
        }
    }

    /// [`User::allows`], as a typed refusal naming the operation, the object and the user.
    pub fn check(&self, operation: Operation, name: &[u8]) -> Result<(), Denied> {
        if self.allows(operation, name) {
            Ok(())
        } else {
            Err(Denied {
                operation,
                name: String::from_utf8_lossy(name).into_owned(),
                user: self.name.clone(),
            })
        }
    }
}

/// The user table.
#[derive(Debug, Default)]
pub struct Users {
    by_name: HashMap<String, Arc<User>>,
    tokens: Vec<([u8; 32], Arc<User>)>,
}

impl Users {
    /// Parses and compiles a users document (YAML or JSON).
    pub fn parse(text: &str) -> Result<Users, AccessError> {
        let doc: UsersDocument =
            serde_saphyr::from_str(text).map_err(|e| AccessError::Parse(e.to_string()))?;
        Users::from_document(&doc)
    }

    /// Compiles a document, checking every name, hash and pattern.
    pub fn from_document(doc: &UsersDocument) -> Result<Users, AccessError> {
        if doc.version != DOCUMENT_VERSION {
            return Err(AccessError::Version(doc.version));
        }
        let mut users = Users::default();
        for entry in &doc.users {
            let name = entry.name.as_str();
            if !valid_name(name) {
                return Err(AccessError::BadName(name.to_string()));
            }
            if users.by_name.contains_key(name) {
                return Err(AccessError::Duplicate(name.to_string()));
            }
            let p = &entry.permissions;
            let compile = |rules, op| CompiledRules::compile(rules, name, op);
            let (method, hash) = match &entry.authentication {
                Authentication::Token { sha256 } => (
                    Method::Token,
                    Some(parse_hash(sha256).ok_or_else(|| AccessError::BadHash(name.to_string()))?),
                ),
                Authentication::Tls => (Method::Tls, None),
            };
            let user = Arc::new(User {
                name: name.to_string(),
                method,
                publish: compile(&p.publish, Operation::Publish)?,
                subscribe: compile(&p.subscribe, Operation::Subscribe)?,
                cache_read: compile(&p.cache_read, Operation::CacheRead)?,
                cache_write: compile(&p.cache_write, Operation::CacheWrite)?,
            });
            if let Some(hash) = hash {
                users.tokens.push((hash, user.clone()));
            }
            users.by_name.insert(name.to_string(), user);
        }
        Ok(users)
    }

    /// The token user whose hash matches SHA-256 of `token`. Every stored hash is compared, in
    /// constant time.
    pub fn by_token(&self, token: &[u8]) -> Option<Arc<User>> {
        self.by_token_hash(&hash_token(token))
    }

    /// The token user whose stored hash is `hash`, compared in constant time with every stored
    /// hash: after a reload, whether a connection opened with a token of that hash is still
    /// someone's (a replaced token is not).
    pub fn by_token_hash(&self, hash: &[u8; 32]) -> Option<Arc<User>> {
        let mut found = None;
        for (stored, user) in &self.tokens {
            if bool::from(stored.ct_eq(hash)) {
                found = Some(user.clone());
            }
        }
        found
    }

    /// The certificate user named `common_name`. Never a token user, and never the peer
    /// identity.
    pub fn by_certificate(&self, common_name: &str) -> Option<Arc<User>> {
        if common_name == PEER_IDENTITY {
            return None;
        }
        self.by_name
            .get(common_name)
            .filter(|u| u.method == Method::Tls)
            .cloned()
    }

    /// The user named `name`, however it authenticates.
    pub fn get(&self, name: &str) -> Option<Arc<User>> {
        self.by_name.get(name).cloned()
    }

    /// Whether a user of this name (and this authentication method) is still in the table:
    /// what the broker asks of each live connection after a reload.
    pub fn still_has(&self, user: &User) -> bool {
        self.by_name
            .get(&user.name)
            .is_some_and(|u| u.method == user.method)
    }

    /// How many users.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::token_hash_hex;

    fn doc() -> String {
        format!(
            r#"
version: 1
users:
  - name: orders-app
    authentication: {{type: token, sha256: "{}"}}
    permissions:
      publish: {{allow: ["orders.>"]}}
      subscribe: {{allow: ["orders.*"], deny: ["orders.audit"]}}
      cache_read: {{allow: ["orders.>"]}}
  - name: billing
    authentication: {{type: tls}}
    permissions:
      cache_write: {{allow: ["billing.*"]}}
"#,
            token_hash_hex(b"s3cret")
        )
    }

    #[test]
    fn tokens_and_certificates_find_their_users_only() {
        let users = Users::parse(&doc()).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users.by_token(b"s3cret").unwrap().name(), "orders-app");
        assert!(users.by_token(b"wrong").is_none());
        assert_eq!(users.by_certificate("billing").unwrap().name(), "billing");
        assert!(
            users.by_certificate("orders-app").is_none(),
            "a token user has no certificate"
        );
        assert!(users.by_certificate(PEER_IDENTITY).is_none());
    }

    #[test]
    fn permissions_allow_then_deny() {
        let users = Users::parse(&doc()).unwrap();
        let app = users.get("orders-app").unwrap();
        assert!(app.allows(Operation::Publish, b"orders.eu.1"));
        assert!(!app.allows(Operation::Publish, b"billing.x"));
        assert!(app.allows(Operation::Subscribe, b"orders.eu"));
        assert!(!app.allows(Operation::Subscribe, b"orders.audit"));
        assert!(
            !app.allows(Operation::CacheWrite, b"orders.x"),
            "no rules: nothing allowed"
        );
        let denied = app
            .check(Operation::Subscribe, b"orders.audit")
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            r#"user "orders-app" may not subscribe topic "orders.audit""#
        );
    }

    #[test]
    fn a_subscription_pattern_must_stay_inside_allow_and_outside_deny() {
        let users = Users::parse(&doc()).unwrap();
        let app = users.get("orders-app").unwrap();
        let pat = |t: &str| Pattern::parse(t).unwrap();
        assert!(app.allows_pattern(Operation::Subscribe, &pat("orders.eu")));
        assert!(app.allows_pattern(Operation::Publish, &pat("orders.>")));
        // `orders.*` matches the denied `orders.audit`.
        let denied = app
            .check_pattern(Operation::Subscribe, &pat("orders.*"))
            .unwrap_err();
        assert_eq!(
            denied.to_string(),
            r#"user "orders-app" may not subscribe topic "orders.*""#
        );
        // `orders.>` reaches past the one token `orders.*` allows.
        assert!(!app.allows_pattern(Operation::Publish, &pat(">")));
        assert!(!app.allows_pattern(Operation::CacheRead, &pat("*.x")));
    }

    #[test]
    fn json_documents_parse_too() {
        let json = r#"{"version":1,"users":[{"name":"a","authentication":{"type":"tls"}}]}"#;
        assert_eq!(Users::parse(json).unwrap().len(), 1);
    }

    #[test]
    fn bad_documents_are_refused_with_the_reason() {
        let cases = [
            ("version: 2\nusers: []", "version 2"),
            (
                "version: 1\nusers: [{name: A, authentication: {type: tls}}]",
                "user name",
            ),
            (
                "version: 1\nusers: [{name: a, authentication: {type: tls}}, {name: a, authentication: {type: tls}}]",
                "twice",
            ),
            (
                "version: 1\nusers: [{name: a, authentication: {type: token, sha256: xyz}}]",
                "64 hex",
            ),
            (
                "version: 1\nusers: [{name: a, authentication: {type: tls}, permissions: {publish: {allow: ['a*']}}}]",
                "publish rules",
            ),
            (
                "version: 1\nusers: [{name: a, authentication: {type: tls}, permissions: {publsh: {}}}]",
                "parse",
            ),
        ];
        for (text, want) in cases {
            let err = Users::parse(text).unwrap_err().to_string();
            assert!(err.contains(want), "{text}: {err}");
        }
    }

    #[test]
    fn a_reload_keeps_a_user_only_with_the_same_method() {
        let old = Users::parse(&doc()).unwrap();
        let billing = old.get("billing").unwrap();
        let new = Users::parse("version: 1\nusers: [{name: billing, authentication: {type: token, sha256: '0000000000000000000000000000000000000000000000000000000000000000'}}]").unwrap();
        assert!(!new.still_has(&billing));
        assert!(old.still_has(&billing));
    }
}
