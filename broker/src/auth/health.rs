//! The users table's health: whether the last read of the users document put (or confirmed) the
//! table in force, why not, and how long ago the table in force was last read. The reload poller
//! ([`super::reload`]) and the first read at start report into it; it feeds the metrics
//! (`starling_auth_users_stale`, `starling_auth_users_age_seconds`,
//! `starling_auth_reload_errors_total{reason}`), `GET /users`, and readiness: a broker that has
//! never read a good table admits no user and is not ready ([`ReadinessGate`]), while one that
//! keeps its last good table after a failed read stays ready and reports the table stale.

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;

use crate::health::ReadinessGate;
use crate::metrics::{Metrics, users_read_failure};

/// Why a read of the users document did not put a table in force (the `reason` label of
/// `starling_auth_reload_errors_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReadFailure {
    /// The file, the Secret or its `users.yaml` key does not exist.
    Missing,
    /// The source could not be read (the API server or the file system failed, or timed out).
    Unreadable,
    /// The document was read but is not UTF-8 or does not compile.
    Invalid,
}

impl ReadFailure {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadFailure::Missing => users_read_failure::MISSING,
            ReadFailure::Unreadable => users_read_failure::UNREADABLE,
            ReadFailure::Invalid => users_read_failure::INVALID,
        }
    }
}

/// The table's state, as `GET /users` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TableState {
    /// The last read put, or confirmed, the table in force.
    Current,
    /// The last read failed; the last good table stays in force.
    Stale,
    /// No good table was ever read: no user is admitted (peers only).
    Unread,
}

/// What `GET /users` answers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UsersReport {
    /// The table's state.
    pub state: TableState,
    /// Users in the table in force.
    pub users: usize,
    /// Seconds since the table in force was last read (since the broker started, when none
    /// was).
    pub age_seconds: u64,
    /// Why the last read failed, when it did.
    pub reason: Option<ReadFailure>,
    /// The last read's error, when it failed (paths, a Secret's name, a parse position; never
    /// the document).
    pub error: Option<String>,
}

struct Inner {
    /// When the table in force was last read, `None` before the first good read.
    confirmed: Option<Instant>,
    users: usize,
    failure: Option<(ReadFailure, String)>,
}

/// The users table's health, shared by the poller, the HTTP listener and readiness.
pub struct UsersHealth {
    inner: parking_lot::Mutex<Inner>,
    started: Instant,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for UsersHealth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsersHealth")
            .field("report", &self.report())
            .finish()
    }
}

impl UsersHealth {
    /// The health after the first read: `Ok(users)` when it put a table in force.
    pub fn new(first: Result<usize, (ReadFailure, String)>, metrics: Arc<Metrics>) -> Self {
        let health = UsersHealth {
            inner: parking_lot::Mutex::new(Inner {
                confirmed: None,
                users: 0,
                failure: None,
            }),
            started: Instant::now(),
            metrics,
        };
        match first {
            Ok(users) => health.read_ok(users),
            Err((reason, error)) => health.read_failed(reason, error),
        }
        health
    }

    /// A read put in force, or confirmed, a table of `users`.
    pub fn read_ok(&self, users: usize) {
        let mut inner = self.inner.lock();
        inner.confirmed = Some(Instant::now());
        inner.users = users;
        inner.failure = None;
        self.publish(&inner);
    }

    /// A read failed for `reason`; the table in force stays.
    pub fn read_failed(&self, reason: ReadFailure, error: String) {
        self.metrics
            .auth_reload_errors
            .with_label_values(&[reason.as_str()])
            .inc();
        let mut inner = self.inner.lock();
        inner.failure = Some((reason, error));
        self.publish(&inner);
    }

    fn age(&self, inner: &Inner) -> u64 {
        inner.confirmed.unwrap_or(self.started).elapsed().as_secs()
    }

    fn publish(&self, inner: &Inner) {
        self.metrics
            .auth_users_stale
            .set(i64::from(inner.failure.is_some()));
        self.metrics
            .auth_users_age
            .set(i64::try_from(self.age(inner)).unwrap_or(i64::MAX));
    }

    /// The table's state now.
    pub fn report(&self) -> UsersReport {
        let inner = self.inner.lock();
        let state = match (&inner.failure, inner.confirmed) {
            (None, _) => TableState::Current,
            (Some(_), Some(_)) => TableState::Stale,
            (Some(_), None) => TableState::Unread,
        };
        UsersReport {
            state,
            users: inner.users,
            age_seconds: self.age(&inner),
            reason: inner.failure.as_ref().map(|(r, _)| *r),
            error: inner.failure.as_ref().map(|(_, e)| e.clone()),
        }
    }
}

impl ReadinessGate for UsersHealth {
    /// Holds while no good table was ever read (the broker admits no user); a stale table
    /// does not hold it (the broker serves its users with the last good one).
    fn blocker(&self) -> Option<String> {
        let inner = self.inner.lock();
        match (&inner.failure, inner.confirmed) {
            (Some((_, error)), None) => Some(format!(
                "no users table read yet, no user is admitted ({error})"
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new().unwrap())
    }

    #[test]
    fn a_failed_read_marks_the_table_stale_and_a_good_one_clears_it() {
        let m = metrics();
        let h = UsersHealth::new(Ok(2), Arc::clone(&m));
        assert_eq!(h.report().state, TableState::Current);
        assert_eq!(h.blocker(), None);
        h.read_failed(ReadFailure::Invalid, "line 3: unknown field".into());
        let r = h.report();
        assert_eq!(r.state, TableState::Stale);
        assert_eq!(r.users, 2, "the last good table stays");
        assert_eq!(r.reason, Some(ReadFailure::Invalid));
        assert_eq!(h.blocker(), None, "a stale table keeps the broker ready");
        assert_eq!(m.auth_users_stale.get(), 1);
        assert_eq!(
            m.auth_reload_errors.with_label_values(&["invalid"]).get(),
            1
        );
        h.read_ok(3);
        assert_eq!(h.report().state, TableState::Current);
        assert_eq!(h.report().error, None);
        assert_eq!(m.auth_users_stale.get(), 0);
    }

    #[test]
    fn a_broker_that_never_read_a_table_is_not_ready_until_it_does() {
        let m = metrics();
        let h = UsersHealth::new(
            Err((ReadFailure::Missing, "Secret c-users: not found".into())),
            Arc::clone(&m),
        );
        assert_eq!(h.report().state, TableState::Unread);
        let why = h.blocker().unwrap();
        assert!(why.contains("Secret c-users: not found"), "{why}");
        assert_eq!(m.auth_users_stale.get(), 1);
        assert_eq!(
            m.auth_reload_errors.with_label_values(&["missing"]).get(),
            1
        );
        h.read_failed(ReadFailure::Unreadable, "timed out".into());
        assert_eq!(h.report().state, TableState::Unread);
        h.read_ok(1);
        assert_eq!(h.blocker(), None);
        assert_eq!(h.report().state, TableState::Current);
    }
}
