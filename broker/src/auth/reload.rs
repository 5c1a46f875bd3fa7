//! Re-reads the users document every `auth_reload_interval_ms` (the broker's one poller,
//! [`crate::watched`]). A changed document that compiles replaces the table
//! ([`Auth::install`]: live connections get the new permissions, those of removed users are
//! closed); one that cannot be read or does not compile is logged and reported to the table's
//! health ([`UsersHealth`]: counted by reason, the table marked stale), and the last good table
//! stays in force. A read that finds the same text confirms the table in force.

use std::sync::{Arc, Weak};
use std::time::Duration;

use starling_access::Users;
use tokio::sync::watch;

use super::Auth;
use super::health::{ReadFailure, UsersHealth};
use super::source::UsersSource;
use crate::watched::{self, Watched};

/// The users document as the poller watches it.
struct UsersDocument {
    auth: Weak<Auth>,
    source: UsersSource,
    health: Arc<UsersHealth>,
    /// The text of the table in force, and its users.
    last: Option<(String, usize)>,
}

impl Watched for UsersDocument {
    type Doc = String;

    fn alive(&self) -> bool {
        self.auth.strong_count() > 0
    }

    async fn read(&self) -> Result<String, String> {
        let read = self.source.read_text().await;
        read.map_err(|e| {
            self.health.read_failed(e.reason(), e.to_string());
            e.to_string()
        })
    }

    fn apply(&mut self, text: String) -> Result<(), String> {
        if let Some((last, users)) = &self.last
            && *last == text
        {
            self.health.read_ok(*users);
            return Ok(());
        }
        let Some(auth) = self.auth.upgrade() else {
            return Ok(());
        };
        let users = Users::parse(&text).map_err(|e| {
            self.health.read_failed(ReadFailure::Invalid, e.to_string());
            e.to_string()
        })?;
        let count = users.len();
        let revoked = auth.install(users);
        self.last = Some((text, count));
        self.health.read_ok(count);
        tracing::info!(source = %self.source.describe(), users = count, revoked, "users document reloaded");
        Ok(())
    }

    fn failure(&self) -> String {
        format!(
            "cannot reload the users document ({}); the last good one stays in force",
            self.source.describe()
        )
    }
}

/// Polls `source` every `every` until `stop` (or until the broker is gone), reporting each read
/// to `health`. `last` is the text of the table in force and its users.
pub async fn poll(
    auth: Weak<Auth>,
    source: UsersSource,
    health: Arc<UsersHealth>,
    last: Option<(String, usize)>,
    every: Duration,
    stop: watch::Receiver<bool>,
) {
    let document = UsersDocument {
        auth,
        source,
        health,
        last,
    };
    watched::poll(document, every, stop).await;
}
