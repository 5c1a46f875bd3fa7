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

/// Largest entry of one user in the users document (its YAML, as a one-user document). The
/// CRD lets a user hold 8 lists of 128 patterns of up to 1 KiB, about 1 MiB: alone the whole
/// Secret the document lives in. A user past this is refused (`TooLarge`) and left out.
pub const MAX_USER_ENTRY_BYTES: usize = 32 * 1024;

/// Largest users document: the API server refuses a Secret whose data passes 1 MiB; this leaves
/// room for the rest of the object. Users that would pass it are left out, newest first, so
/// the document is still written (deleted users still leave it) and the cluster reports them.
pub const MAX_DOCUMENT_BYTES: usize = 960 * 1024;

fn one_user_bytes(entry: &UserEntry) -> usize {
    document_yaml(&UsersDocument {
        version: DOCUMENT_VERSION,
        users: vec![entry.clone()],
    })
    .map_or(usize::MAX, |t| t.len())
}

/// `Err(message)` when the user's entry would pass [`MAX_USER_ENTRY_BYTES`] (counted with a
/// token hash, the larger authentication).
pub fn check_size(name: &str, spec: &BrokerUserSpec) -> Result<(), String> {
    let bytes = one_user_bytes(&UserEntry {
        name: name.to_string(),
        authentication: Authentication::Token {
            sha256: "0".repeat(64),
        },
        permissions: permissions(spec),
    });
    if bytes > MAX_USER_ENTRY_BYTES {
        return Err(format!(
            "the user's permissions take {bytes} bytes in the users document, more than the {MAX_USER_ENTRY_BYTES} one user may; use fewer or broader patterns"
        ));
    }
    Ok(())
}

/// The entry of a valid user, or `None` (invalid, too large, or a token user without its hash
/// yet).
pub fn entry(record: &UserRecord) -> Option<UserEntry> {
    validate_user(&record.name, &record.spec).ok()?;
    check_size(&record.name, &record.spec).ok()?;
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
/// text only changes when a user does), within [`MAX_DOCUMENT_BYTES`].
pub fn users_document(records: &[UserRecord]) -> UsersDocument {
    users_document_within(records, MAX_DOCUMENT_BYTES).0
}

/// The users document of the valid users of `records` that fit in `budget` bytes, taken in the
/// order of `records` (oldest user first: a new user never pushes out one already admitted),
/// and the names of the valid users left out because they did not fit.
pub fn users_document_within(
    records: &[UserRecord],
    budget: usize,
) -> (UsersDocument, Vec<String>) {
    let header = document_yaml(&UsersDocument {
        version: DOCUMENT_VERSION,
        users: Vec::new(),
    })
    .map_or(0, |t| t.len());
    let mut used = header;
    let mut users: Vec<UserEntry> = Vec::new();
    let mut left_out = Vec::new();
    for e in records.iter().filter_map(entry) {
        if users.iter().any(|u| u.name == e.name) {
            continue;
        }
        // A one-user document's size less the header: what the entry adds.
        let bytes = one_user_bytes(&e).saturating_sub(header);
        if used.saturating_add(bytes) > budget {
            left_out.push(e.name);
            continue;
        }
        used += bytes;
        users.push(e);
    }
    users.sort_by(|a, b| a.name.cmp(&b.name));
    (
        UsersDocument {
            version: DOCUMENT_VERSION,
            users,
        },
        left_out,
    )
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

    fn big_spec(patterns: usize) -> BrokerUserSpec {
        let long: Vec<String> = (0..patterns)
            .map(|i| format!("tenant-{i:04}.{}", "x".repeat(200)))
            .collect();
        let refs: Vec<&str> = long.iter().map(String::as_str).collect();
        spec(UserAuthType::Tls, &refs, &refs)
    }

    #[test]
    fn a_user_too_large_for_the_document_is_refused_and_left_out() {
        // 2 lists of 128 patterns of about 210 bytes: over 50 KiB, within the CRD's limits.
        let huge = big_spec(128);
        assert!(
            validate_user("huge", &huge).is_ok(),
            "the patterns are valid"
        );
        let e = check_size("huge", &huge).err().unwrap_or_default();
        assert!(e.contains("more than the 32768"), "{e}");
        assert!(check_size("small", &spec(UserAuthType::Tls, &["a"], &[])).is_ok());
        let doc = users_document(&[
            record("huge", huge, None),
            record("small", spec(UserAuthType::Tls, &["a"], &[]), None),
        ]);
        let names: Vec<&str> = doc.users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names, ["small"]);
    }

    #[test]
    fn the_documented_budgets_are_the_constants() {
        let kib = |b: usize| format!("{} KiB", b / 1024);
        let too_large = crate::crd::user::USER_REASONS
            .iter()
            .find(|r| r.0 == "TooLarge")
            .map(|r| r.2)
            .unwrap_or_default();
        assert!(
            too_large.contains(&kib(MAX_USER_ENTRY_BYTES)),
            "{too_large}"
        );
        let full = crate::crd::conditions::Reason::UsersDocumentFull.doc();
        assert!(full.contains(&kib(MAX_DOCUMENT_BYTES)), "{full}");
    }

    #[test]
    fn the_document_keeps_within_its_budget_oldest_users_first() {
        // Users of about 12 KiB each, oldest first.
        let records: Vec<UserRecord> = (0..8)
            .map(|i| record(&format!("u{i}"), big_spec(28), None))
            .collect();
        let one = document_yaml(&users_document(&records[..1]))
            .unwrap_or_default()
            .len();
        let budget = one * 5;
        let (doc, left_out) = users_document_within(&records, budget);
        let text = document_yaml(&doc).unwrap_or_default();
        assert!(text.len() <= budget, "{} > {budget}", text.len());
        let names: Vec<&str> = doc.users.iter().map(|u| u.name.as_str()).collect();
        assert_eq!(names.len() + left_out.len(), 8);
        assert!(names.len() >= 4, "{names:?}");
        // The newest are the ones left out, and the document still parses.
        assert_eq!(left_out.last().map(String::as_str), Some("u7"));
        assert!(names.contains(&"u0"));
        assert!(Users::parse(&text).is_ok());
        // Without a budget problem, nothing is left out.
        assert!(
            users_document_within(&records, MAX_DOCUMENT_BYTES)
                .1
                .is_empty()
        );
    }
}
