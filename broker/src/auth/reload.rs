//! Re-reads the users document every `auth_reload_interval_ms` (the broker's one poller,
//! [`crate::watched`]). A changed document that compiles replaces the table
//! ([`Auth::install`]: live connections get the new permissions, those of removed users are
//! closed); one that cannot be read or does not compile is logged and counted
//! (`starling_auth_reload_errors_total`), and the last good table stays in force.

use std::sync::Weak;
use std::time::Duration;

use starling_access::Users;
use tokio::sync::watch;

use super::Auth;
use super::source::UsersSource;
use crate::watched::{self, Watched};

/// The users document as the poller watches it.
struct UsersDocument {
    auth: Weak<Auth>,
    source: UsersSource,
    /// The text of the table in force.
    last: Option<String>,
}

impl UsersDocument {
    fn count_error(&self) {
        if let Some(auth) = self.auth.upgrade() {
            auth.metrics().auth_reload_errors.inc();
        }
    }
}

impl Watched for UsersDocument {
    type Doc = String;

    fn alive(&self) -> bool {
        self.auth.strong_count() > 0
    }

    async fn read(&self) -> Result<String, String> {
        let read = self.source.read_text().await;
        read.map_err(|e| {
            self.count_error();
            e.to_string()
        })
    }

    fn apply(&mut self, text: String) -> Result<(), String> {
        if self.last.as_deref() == Some(text.as_str()) {
            return Ok(());
        }
        let Some(auth) = self.auth.upgrade() else {
            return Ok(());
        };
        let users = Users::parse(&text).map_err(|e| {
            self.count_error();
            e.to_string()
        })?;
        let count = users.len();
        let revoked = auth.install(users);
        self.last = Some(text);
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

/// Polls `source` every `every` until `stop` (or until the broker is gone). `last` is the text
/// of the table in force.
pub async fn poll(
    auth: Weak<Auth>,
    source: UsersSource,
    last: Option<String>,
    every: Duration,
    stop: watch::Receiver<bool>,
) {
    let document = UsersDocument { auth, source, last };
    watched::poll(document, every, stop).await;
}
