//! The `UsersTableHealthy` condition: whether the users table the brokers admit clients by is
//! the one the operator writes. Two observations feed it, both made by the controller at every
//! reconcile of a cluster with authentication on (`crate::controller`), at least every
//! [`USERS_POLL`]: the users Secret `<cluster>-users` as the API server holds it
//! ([`check_secret`]: there, with its `users.yaml` key, within the document's budget, and
//! compiling with the brokers' own parser), and each broker pod's `GET /users` (the broker's
//! `auth::health`: whether its last read of that Secret failed, and why). This module turns
//! them into the condition. Pure.
//!
//! A broker whose read fails keeps its last good table (revocations stop reaching it), and one
//! that never read a table admits no user and is not ready; the condition is where either shows
//! on the cluster, beside the `StarlingUsersTableStale` alert.

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use serde::Deserialize;

use crate::access::MAX_DOCUMENT_BYTES;
use crate::crd::conditions::Reason;

/// Longest time between two reads of the users table's health while authentication is on.
pub const USERS_POLL: Duration = Duration::from_secs(60);
/// Longest wait for one broker's `/users`.
pub const USERS_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest `/users` body read.
pub const MAX_BODY: usize = 4096;
/// The Secret key holding the users document (the broker's `auth::source::SECRET_KEY`).
pub const SECRET_KEY: &str = "users.yaml";

/// What a broker's `GET /users` says (fields the operator does not read are ignored).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct UsersReport {
    /// `current`, `stale` (the last read failed; the last good table stays) or `unread` (no
    /// good table was ever read: no user is admitted).
    pub state: String,
    /// Seconds since the table in force was last read.
    #[serde(default)]
    pub age_seconds: u64,
    /// Why the last read failed (`missing`, `unreadable`, `invalid`), when it did.
    #[serde(default)]
    pub reason: Option<String>,
    /// The last read's error, when it failed.
    #[serde(default)]
    pub error: Option<String>,
}

/// One broker pod's answer, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerUsers {
    /// The pod's name.
    pub pod: String,
    /// Its report, or why it could not be read.
    pub answer: Result<UsersReport, String>,
}

/// What the controller saw: what is wrong with the users Secret (`Ok` when nothing), and one
/// answer per broker pod (or why the pods could not be listed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observation {
    /// [`check_secret`] of the Secret read.
    pub secret: Result<(), String>,
    /// The brokers' answers.
    pub brokers: Result<Vec<BrokerUsers>, String>,
}

/// Reads a `/users` body.
pub fn parse(body: &[u8]) -> Result<UsersReport, String> {
    serde_json::from_slice(body).map_err(|e| format!("not a /users answer: {e}"))
}

/// What is wrong with the users Secret `name` as read (`None`: it does not exist), if anything:
/// missing, without its `users.yaml` key, over the document's budget
/// ([`MAX_DOCUMENT_BYTES`]), not UTF-8, or refused by the brokers' parser.
pub fn check_secret(name: &str, secret: Option<&Secret>) -> Result<(), String> {
    let Some(secret) = secret else {
        return Err(format!("the users Secret {name} does not exist"));
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(SECRET_KEY)) else {
        return Err(format!("the users Secret {name} has no {SECRET_KEY} key"));
    };
    if bytes.0.len() > MAX_DOCUMENT_BYTES {
        return Err(format!(
            "the users Secret {name} holds {} bytes, past the budget of {MAX_DOCUMENT_BYTES}",
            bytes.0.len()
        ));
    }
    let text = std::str::from_utf8(&bytes.0)
        .map_err(|_| format!("the users Secret {name}'s {SECRET_KEY} is not UTF-8"))?;
    starling_access::Users::parse(text)
        .map(|_| ())
        .map_err(|e| format!("the users Secret {name}'s {SECRET_KEY} does not parse: {e}"))
}

/// `UsersTableHealthy`'s reason and message. `auth_required`: the brokers authenticate clients
/// (else they read no users table); `observed`: what was read, `None` when nothing was.
pub fn condition(auth_required: bool, observed: Option<&Observation>) -> (Reason, String) {
    if !auth_required {
        return (
            Reason::UsersTableNotUsed,
            "spec.auth.mode is none: the brokers read no users table".into(),
        );
    }
    let Some(observed) = observed else {
        return (
            Reason::UsersTableUnknown,
            "the users table's health has not been read yet".into(),
        );
    };
    let (stale, silent, read) = match &observed.brokers {
        Ok(answers) => {
            let stale: Vec<String> = answers
                .iter()
                .filter_map(|b| match &b.answer {
                    Ok(r) if r.state != "current" => Some(describe(&b.pod, r)),
                    _ => None,
                })
                .collect();
            let silent: Vec<String> = answers
                .iter()
                .filter_map(|b| b.answer.as_ref().err().map(|e| format!("{}: {e}", b.pod)))
                .collect();
            let read = answers.len() - silent.len();
            (stale, silent, read)
        }
        Err(why) => (Vec::new(), vec![why.clone()], 0),
    };
    let unanswered = match silent.is_empty() {
        true => String::new(),
        false => format!("; not read: {}", silent.join(", ")),
    };
    if let Err(problem) = &observed.secret {
        let brokers = match stale.is_empty() {
            true => String::new(),
            false => format!("; {}", stale.join("; ")),
        };
        return (
            Reason::UsersSecretInvalid,
            format!("{problem}{brokers}{unanswered}"),
        );
    }
    if !stale.is_empty() {
        return (
            Reason::UsersTableStale,
            format!("{}{unanswered}", stale.join("; ")),
        );
    }
    if read == 0 {
        return (
            Reason::UsersTableUnknown,
            match silent.is_empty() {
                true => "no broker pod to read yet".into(),
                false => format!("no broker answered GET /users: {}", silent.join(", ")),
            },
        );
    }
    (
        Reason::UsersTableCurrent,
        format!(
            "the users Secret is valid and {read} of {} brokers hold its table{unanswered}",
            read + silent.len()
        ),
    )
}

/// `pod: <what is wrong> (<reason>: <error>)`.
fn describe(pod: &str, r: &UsersReport) -> String {
    let what = match r.state.as_str() {
        "unread" => "has read no users table and admits no user".to_string(),
        "stale" => format!("keeps a users table last read {}s ago", r.age_seconds),
        other => format!("reports its users table {other:?}"),
    };
    let why = match (&r.reason, &r.error) {
        (Some(reason), Some(error)) => format!(" ({reason}: {error})"),
        (Some(reason), None) => format!(" ({reason})"),
        (None, Some(error)) => format!(" ({error})"),
        (None, None) => String::new(),
    };
    format!("{pod} {what}{why}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn report(state: &str, reason: Option<&str>) -> UsersReport {
        UsersReport {
            state: state.into(),
            age_seconds: 90,
            reason: reason.map(str::to_string),
            error: reason.map(|_| "Secret c-users: not found".to_string()),
        }
    }

    fn broker(pod: &str, answer: Result<UsersReport, String>) -> BrokerUsers {
        BrokerUsers {
            pod: pod.into(),
            answer,
        }
    }

    fn secret(text: &[u8]) -> Secret {
        Secret {
            data: Some(BTreeMap::from([(
                SECRET_KEY.to_string(),
                ByteString(text.to_vec()),
            )])),
            ..Secret::default()
        }
    }

    #[test]
    fn the_secret_is_checked_with_the_brokers_parser_and_the_budget() {
        assert_eq!(
            check_secret("c-users", Some(&secret(b"version: 1\nusers: []\n"))),
            Ok(())
        );
        let missing = check_secret("c-users", None).unwrap_err();
        assert!(missing.contains("does not exist"), "{missing}");
        let no_key = check_secret("c-users", Some(&Secret::default())).unwrap_err();
        assert!(no_key.contains("no users.yaml key"), "{no_key}");
        let bad = check_secret(
            "c-users",
            Some(&secret(b"version: 1\nusers: [{name: x}]\n")),
        )
        .unwrap_err();
        assert!(bad.contains("does not parse"), "{bad}");
        let big = vec![b'#'; MAX_DOCUMENT_BYTES + 1];
        let big = check_secret("c-users", Some(&secret(&big))).unwrap_err();
        assert!(big.contains("past the budget"), "{big}");
        let utf8 = check_secret("c-users", Some(&secret(&[0xff, 0xfe]))).unwrap_err();
        assert!(utf8.contains("not UTF-8"), "{utf8}");
    }

    #[test]
    fn every_broker_current_and_a_valid_secret_is_healthy() {
        let o = Observation {
            secret: Ok(()),
            brokers: Ok(vec![
                broker("c-0", Ok(report("current", None))),
                broker("c-1", Err("timed out".into())),
            ]),
        };
        let (reason, msg) = condition(true, Some(&o));
        assert_eq!(reason, Reason::UsersTableCurrent);
        assert_eq!(reason.status(), "True");
        assert_eq!(
            msg,
            "the users Secret is valid and 1 of 2 brokers hold its table; not read: c-1: timed out"
        );
    }

    #[test]
    fn a_stale_or_unread_broker_makes_it_false_naming_the_pod_and_why() {
        let o = Observation {
            secret: Ok(()),
            brokers: Ok(vec![
                broker("c-0", Ok(report("current", None))),
                broker("c-1", Ok(report("stale", Some("invalid")))),
                broker("c-2", Ok(report("unread", Some("missing")))),
            ]),
        };
        let (reason, msg) = condition(true, Some(&o));
        assert_eq!(reason, Reason::UsersTableStale);
        assert_eq!(reason.status(), "False");
        assert!(
            msg.contains("c-1 keeps a users table last read 90s ago (invalid: "),
            "{msg}"
        );
        assert!(
            msg.contains("c-2 has read no users table and admits no user (missing: "),
            "{msg}"
        );
        assert!(!msg.contains("c-0"), "{msg}");
    }

    #[test]
    fn a_bad_secret_comes_first_and_no_answer_is_unknown() {
        let o = Observation {
            secret: Err("the users Secret c-users does not exist".into()),
            brokers: Ok(vec![broker("c-0", Ok(report("stale", Some("missing"))))]),
        };
        let (reason, msg) = condition(true, Some(&o));
        assert_eq!(reason, Reason::UsersSecretInvalid);
        assert_eq!(reason.status(), "False");
        assert!(
            msg.starts_with("the users Secret c-users does not exist; c-0 keeps"),
            "{msg}"
        );

        let o = Observation {
            secret: Ok(()),
            brokers: Ok(vec![broker("c-0", Err("connection refused".into()))]),
        };
        let (reason, msg) = condition(true, Some(&o));
        assert_eq!(reason, Reason::UsersTableUnknown);
        assert_eq!(
            msg,
            "no broker answered GET /users: c-0: connection refused"
        );
        assert_eq!(condition(true, None).0, Reason::UsersTableUnknown);
        let o = Observation {
            secret: Ok(()),
            brokers: Err("pods: forbidden".into()),
        };
        assert_eq!(condition(true, Some(&o)).0, Reason::UsersTableUnknown);
        assert_eq!(condition(false, None).0, Reason::UsersTableNotUsed);
        assert_eq!(condition(false, None).0.status(), "True");
    }

    #[test]
    fn the_brokers_answer_parses() {
        let r = parse(
            br#"{"state":"stale","users":3,"age_seconds":12,"reason":"invalid","error":"bad"}"#,
        )
        .unwrap();
        assert_eq!(r.state, "stale");
        assert_eq!(r.reason.as_deref(), Some("invalid"));
        assert!(parse(b"nope").is_err());
    }
}
