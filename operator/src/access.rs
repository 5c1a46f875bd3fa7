//! Access control, from the operator's side: checks a BrokerUser's name and patterns with the
//! brokers' own rules (`starling_access`), and assembles the users document of a cluster from
//! its BrokerUsers. Pure.
//!
//! A user appears in the document only when it is valid; a token user also needs its token's
//! hash (read from its credentials Secret by [`crate::apply::users`]), so a user whose Secret
//! is not written yet is left out until it is.

use starling_access::{
    Authentication, DOCUMENT_VERSION, Permissions, Rules, UserEntry, Users, UsersDocument,
};

use crate::crd::user::{BrokerUserSpec, PatternRules, UserAuthType};

/// One BrokerUser as the document needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct UserRecord {
    /// `metadata.name`.
    pub name: String,
    /// Its spec.
    pub spec: BrokerUserSpec,
    /// SHA-256 (hex) of its token, for a token user whose credentials are written.
    pub token_sha256: Option<String>,
}

fn rules(r: Option<&PatternRules>) -> Rules {
    r.map(|r| Rules {
        allow: r.allow.clone(),
        deny: r.deny.clone(),
    })
    .unwrap_or_default()
}

/// The document's permissions of a spec.
pub fn permissions(spec: &BrokerUserSpec) -> Permissions {
    let p = &spec.permissions;
    Permissions {
        publish: rules(p.publish.as_ref()),
        subscribe: rules(p.subscribe.as_ref()),
        cache_read: rules(p.cache_read.as_ref()),
        cache_write: rules(p.cache_write.as_ref()),
    }
}

/// Checks a user's name and every pattern exactly as the brokers will; the error names the
/// first problem.
pub fn validate_user(name: &str, spec: &BrokerUserSpec) -> Result<(), String> {
    let entry = UserEntry {
        name: name.to_string(),
        // The hash does not matter here: only the name and patterns are checked.
        authentication: Authentication::Token {
            sha256: "0".repeat(64),
        },
        permissions: permissions(spec),
    };
    Users::from_document(&UsersDocument {
        version: DOCUMENT_VERSION,
        users: vec![entry],
    })
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// The entry of a valid user, or `None` (invalid, or a token user without its hash yet).
pub fn entry(record: &UserRecord) -> Option<UserEntry> {
    validate_user(&record.name, &record.spec).ok()?;
    let authentication = match record.spec.authentication.type_ {
        UserAuthType::Tls => Authentication::Tls,
        UserAuthType::Token => Authentication::Token {
            sha256: record.token_sha256.clone()?,
        },
    };
    Some(UserEntry {
        name: record.name.clone(),
        authentication,
        permissions: permissions(&record.spec),
    })
}

/// The users document of a cluster: every valid user of `records`, sorted by name (so the
/// text only changes when a user does).
pub fn users_document(records: &[UserRecord]) -> UsersDocument {
    let mut users: Vec<UserEntry> = records.iter().filter_map(entry).collect();
    users.sort_by(|a, b| a.name.cmp(&b.name));
    users.dedup_by(|a, b| a.name == b.name);
    UsersDocument {
        version: DOCUMENT_VERSION,
        users,
    }
}

/// The document as the YAML text of `users.yaml`.
pub fn document_yaml(doc: &UsersDocument) -> Result<String, String> {
    serde_saphyr::to_string(doc).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crd::user::{UserAuthentication, UserPermissions};

    fn spec(auth: UserAuthType, publish: &[&str], deny: &[&str]) -> BrokerUserSpec {
        BrokerUserSpec {
            cluster: "events".into(),
            authentication: UserAuthentication { type_: auth },
            permissions: UserPermissions {
                publish: Some(PatternRules {
                    allow: publish.iter().map(|s| s.to_string()).collect(),
                    deny: deny.iter().map(|s| s.to_string()).collect(),
                }),
                ..UserPermissions::default()
            },
            secret_name: None,
        }
    }

    fn record(name: &str, s: BrokerUserSpec, hash: Option<&str>) -> UserRecord {
        UserRecord {
            name: name.into(),
            spec: s,
            token_sha256: hash.map(str::to_string),
        }
    }

    #[test]
    fn patterns_and_names_are_checked_with_the_brokers_rules() {
        assert_eq!(
            validate_user("orders-app", &spec(UserAuthType::Tls, &["orders.>"], &[])),
            Ok(())
        );
        let bad = validate_user("orders-app", &spec(UserAuthType::Tls, &["ord*"], &[]))
            .err()
            .unwrap_or_default();
        assert!(bad.contains("ord*"), "{bad}");
        let bad = validate_user("a", &spec(UserAuthType::Tls, &["a"], &["x..y"]))
            .err()
            .unwrap_or_default();
        assert!(bad.contains("x..y"), "{bad}");
        assert!(validate_user("starling:peer", &spec(UserAuthType::Tls, &["a"], &[])).is_err());
    }

    #[test]
    fn the_document_holds_every_valid_user_with_only_token_hashes() {
        let token = starling_access::generate_token();
        let hash = starling_access::token_hash_hex(token.as_bytes());
        let records = vec![
            record("zeta", spec(UserAuthType::Tls, &["z.>"], &[]), None),
            record(
                "orders-app",
                spec(UserAuthType::Token, &["orders.*"], &["orders.audit"]),
                Some(&hash),
            ),
            record("bad", spec(UserAuthType::Tls, &["a.>.b"], &[]), None),
            record("pending", spec(UserAuthType::Token, &["p"], &[]), None),
        ];
        let doc = users_document(&records);
        let names: Vec<&str> = doc.users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["orders-app", "zeta"]);
        assert_eq!(doc.version, DOCUMENT_VERSION);
        let text = document_yaml(&doc).unwrap_or_default();
        assert!(
            !text.contains(&token),
            "the token itself never reaches the brokers"
        );
        assert!(text.contains(&hash));
        // The brokers parse it and enforce it.
        let users = Users::parse(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        let orders = users
            .by_token(token.as_bytes())
            .unwrap_or_else(|| panic!("token user"));
        assert_eq!(orders.name(), "orders-app");
        assert!(
            orders
                .check(starling_access::Operation::Publish, b"orders.eu")
                .is_ok()
        );
        assert!(
            orders
                .check(starling_access::Operation::Publish, b"orders.audit")
                .is_err()
        );
        assert!(
            orders
                .check(starling_access::Operation::Subscribe, b"orders.eu")
                .is_err()
        );
        assert!(users.by_certificate("zeta").is_some());
        assert!(users.get("bad").is_none() && users.get("pending").is_none());
        // Removing a user removes it from the document.
        let fewer = users_document(&records[1..]);
        assert_eq!(fewer.users.len(), 1);
    }
}
