//! Re-reads the users document every `auth_reload_interval_ms`. A changed document that
//! compiles replaces the table ([`Auth::install`]: live connections get the new permissions,
//! those of removed users are closed); one that cannot be read or does not compile is logged
//! and counted (`starling_auth_reload_errors_total`), and the last good table stays in force.

use std::sync::Weak;
use std::time::Duration;

use starling_access::Users;
use tokio::sync::watch;

use super::Auth;
use super::source::UsersSource;

/// Polls `source` every `every` until `stop` (or until the broker is gone). `last` is the text
/// of the table in force.
pub async fn poll(
    auth: Weak<Auth>,
    source: UsersSource,
    mut last: Option<String>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut last_error: Option<String> = None;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            _ = stop.changed() => return,
        }
        let Some(auth) = auth.upgrade() else { return };
        let outcome = match source.read_text().await {
            Ok(text) if last.as_deref() == Some(text.as_str()) => Ok(None),
            Ok(text) => Users::parse(&text)
                .map(|users| Some((text, users)))
                .map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match outcome {
            Ok(None) => last_error = None,
            Ok(Some((text, users))) => {
                last_error = None;
                let count = users.len();
                let revoked = auth.install(users);
                last = Some(text);
                tracing::info!(source = %source.describe(), users = count, revoked, "users document reloaded");
            }
            Err(e) => {
                auth.metrics().auth_reload_errors.inc();
                if last_error.as_deref() != Some(e.as_str()) {
                    tracing::warn!(source = %source.describe(), error = %e, "cannot reload the users document; the last good one stays in force");
                }
                last_error = Some(e);
            }
        }
    }
}
