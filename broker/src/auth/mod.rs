//! Client identity and access control, enforced at the broker where a client arrives (peers and
//! the requests they forward are trusted: they were checked where they entered the cluster).
//!
//! - [`source`]: where the users document comes from (`auth_users_file`, or the
//!   `auth_users_secret` Secret's `users.yaml` read through the Kubernetes API);
//! - [`reload`]: re-reading it every `auth_reload_interval_ms`, keeping the last good table
//!   when a read or a parse fails, and closing the live connections of removed users and of
//!   replaced tokens;
//! - [`health`]: whether the last read succeeded, why not, and the age of the table in force
//!   (metrics, `GET /users`, readiness);
//! - [`identity`]: the verified client certificate's subject common name;
//! - [`decide`]: who a connection is ([`Principal`]) from its certificate, its `Hello` token and
//!   the feature bits it asked for, or why it is refused;
//! - this module: [`Auth`], the table in force and the registry of live users' connections,
//!   and [`Access`], what a connection's stream handlers check each request against.
//!
//! The hot path: a connection's [`Access`] holds a snapshot of its user (an `Arc<User>` behind
//! a `RwLock` that only a reload writes), so a check is one uncontended read lock and the
//! user's pattern match; there is no table lookup per request. A reload replaces every live
//! connection's snapshot with the user of the new table (or closes the connection), so
//! permissions of live connections follow the document.

pub mod decide;
pub mod health;
pub mod identity;
pub mod reload;
pub mod source;

use std::collections::HashMap;
use std::sync::{Arc, Weak};

pub use starling_access::PEER_IDENTITY;
use starling_access::{Denied, Operation, User, Users};
use starling_config::{AuthMode, BrokerConfig};

use crate::metrics::Metrics;

/// The application close code of a connection whose user was removed from the users table.
pub const CLOSE_REVOKED: u32 = 2;

/// Who a connection is.
#[derive(Debug, Clone)]
pub enum Principal {
    /// A user of the table, and the credential it presented.
    User(Arc<User>, Credential),
    /// Another member of the cluster.
    Peer,
    /// Anyone, under `auth_mode: none`.
    Anonymous,
}

/// The credential a user's connection was opened with, kept for the revocation pass: a reload
/// that replaces it closes the connection.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// A token, by its SHA-256 (what the users document holds; the token itself is not kept).
    Token([u8; 32]),
    /// A client certificate verified against the client CA, by its common name (the users
    /// document names a certificate user by that alone, so a reissued certificate with the
    /// same name is the same credential to the broker).
    Certificate,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Credential::Token(_) => f.write_str("Token(<sha256>)"),
            Credential::Certificate => f.write_str("Certificate"),
        }
    }
}

impl Credential {
    /// Whether the credential still names `user` in `users`: the user is there with the same
    /// method and, for a token, the token's hash is still the user's.
    fn still_names(&self, users: &Users, user: &User) -> bool {
        users.still_has(user)
            && match self {
                Credential::Token(hash) => users
                    .by_token_hash(hash)
                    .is_some_and(|u| u.name() == user.name()),
                Credential::Certificate => true,
            }
    }
}

/// One connection's user: replaced by every reload that keeps the user.
#[derive(Debug)]
pub struct UserAccess {
    user: parking_lot::RwLock<Arc<User>>,
    /// Bumped each time a reload replaces `user`, so the connection's open subscriptions check
    /// themselves again (narrowed permissions end the ones no longer allowed).
    generation: tokio::sync::watch::Sender<u64>,
}

impl UserAccess {
    fn new(user: Arc<User>) -> UserAccess {
        UserAccess {
            user: parking_lot::RwLock::new(user),
            generation: tokio::sync::watch::Sender::new(0),
        }
    }

    /// The user as the table in force describes it.
    pub fn user(&self) -> Arc<User> {
        Arc::clone(&self.user.read())
    }

    /// Replaces the user with the reloaded one and tells whoever watches the changes.
    fn replace(&self, user: Arc<User>) {
        *self.user.write() = user;
        self.generation.send_modify(|g| *g = g.wrapping_add(1));
    }
}

/// What a connection's requests are checked against.
#[derive(Debug, Clone)]
pub enum Access {
    /// A peer, or anyone under `auth_mode: none`: everything is allowed.
    Unrestricted,
    /// A user: its permissions.
    User(Arc<UserAccess>),
}

impl Access {
    /// Whether `operation` on `name` (a topic's bytes or a cache key) is allowed.
    pub fn check(&self, operation: Operation, name: &[u8]) -> Result<(), Denied> {
        match self {
            Access::Unrestricted => Ok(()),
            Access::User(u) => u.user.read().check(operation, name),
        }
    }

    /// Whether `operation` on every name `pattern` matches is allowed (a wildcard
    /// subscription).
    pub fn check_pattern(
        &self,
        operation: Operation,
        pattern: &starling_access::Pattern,
    ) -> Result<(), Denied> {
        match self {
            Access::Unrestricted => Ok(()),
            Access::User(u) => u.user.read().check_pattern(operation, pattern),
        }
    }

    /// What changes with every reload that replaces the user's permissions (`None` for
    /// [`Access::Unrestricted`], whose answer never changes).
    pub fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        match self {
            Access::Unrestricted => None,
            Access::User(u) => Some(u.generation.subscribe()),
        }
    }
}

/// A live user connection, as the revocation pass sees it.
struct Live {
    access: Arc<UserAccess>,
    credential: Credential,
    quic: quinn::Connection,
}

/// The users table in force and the live users' connections.
pub struct Auth {
    mode: AuthMode,
    client_ca: bool,
    peer_uri: Option<String>,
    table: parking_lot::RwLock<Arc<Users>>,
    live: parking_lot::Mutex<HashMap<u64, Live>>,
    metrics: Arc<Metrics>,
}

/// Keeps a user connection in the registry until dropped.
pub struct Registration {
    auth: Weak<Auth>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(auth) = self.auth.upgrade() {
            auth.live.lock().remove(&self.id);
        }
    }
}

/// `auth_mode: required` without a users document: nobody could connect.
#[derive(Debug, thiserror::Error)]
#[error(
    "auth_mode is `required` but no users document is configured: set auth_users_file (or auth_users_secret), or set auth_mode: none for development"
)]
pub struct NoUsersSource;

/// The connection's user was removed between its handshake and its registration.
#[derive(Debug, thiserror::Error)]
#[error("user revoked")]
pub struct Revoked;

impl Auth {
    /// Refuses `auth_mode: required` without a users source (the broker could admit no one).
    pub fn check_config(cfg: &BrokerConfig) -> Result<(), NoUsersSource> {
        let has_source = cfg.auth_users_file.is_some() || cfg.auth_users_secret.is_some();
        if cfg.auth_mode == AuthMode::Required && !has_source {
            return Err(NoUsersSource);
        }
        Ok(())
    }

    /// The access control of a broker with `cfg`, starting with `users`.
    pub fn new(cfg: &BrokerConfig, users: Users, metrics: Arc<Metrics>) -> Arc<Auth> {
        metrics
            .auth_users
            .set(i64::try_from(users.len()).unwrap_or(i64::MAX));
        Arc::new(Auth {
            mode: cfg.auth_mode,
            client_ca: cfg.auth_client_ca_file.is_some(),
            peer_uri: cfg.cluster_peer_uri.clone(),
            table: parking_lot::RwLock::new(Arc::new(users)),
            live: parking_lot::Mutex::new(HashMap::new()),
            metrics,
        })
    }

    /// `auth_mode`.
    pub fn mode(&self) -> AuthMode {
        self.mode
    }

    /// Whether client certificates are verified against a client CA.
    pub fn has_client_ca(&self) -> bool {
        self.client_ca
    }

    /// The URI a peer certificate must carry (`cluster_peer_uri`), if set.
    pub fn peer_uri(&self) -> Option<&str> {
        self.peer_uri.as_deref()
    }

    /// The table in force.
    pub fn users(&self) -> Arc<Users> {
        Arc::clone(&self.table.read())
    }

    /// Metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The [`Access`] of connection `id`, authenticated as `principal`. A user's connection is
    /// registered (so a reload can refresh or revoke it) until the [`Registration`] is dropped;
    /// `Revoked` when a reload removed the user since the handshake.
    pub fn admit(
        self: &Arc<Self>,
        id: u64,
        principal: &Principal,
        quic: &quinn::Connection,
    ) -> Result<(Access, Option<Registration>), Revoked> {
        let (user, credential) = match principal {
            Principal::Peer | Principal::Anonymous => return Ok((Access::Unrestricted, None)),
            Principal::User(user, credential) => (user, credential),
        };
        let access = Arc::new(UserAccess::new(Arc::clone(user)));
        {
            let mut live = self.live.lock();
            // Checked under the registry's lock, which a reload's pass takes after swapping
            // the table: either this sees the new table or the pass sees this connection.
            let table = self.users();
            let still = credential.still_names(&table, user);
            match table.get(user.name()).filter(|_| still) {
                Some(u) => *access.user.write() = u,
                None => return Err(Revoked),
            }
            live.insert(
                id,
                Live {
                    access: Arc::clone(&access),
                    credential: credential.clone(),
                    quic: quic.clone(),
                },
            );
        }
        let registration = Registration {
            auth: Arc::downgrade(self),
            id,
        };
        Ok((Access::User(access), Some(registration)))
    }

    /// Installs a new table: every live connection whose user is still in it, with the
    /// credential the connection was opened with (the same token), gets the new permissions
    /// (and its open subscriptions check them again, `server::subscribe`);
    /// every other one is closed with [`CLOSE_REVOKED`] (a removed user, or a replaced token).
    /// Returns how many were closed.
    pub fn install(&self, users: Users) -> usize {
        self.metrics
            .auth_users
            .set(i64::try_from(users.len()).unwrap_or(i64::MAX));
        let users = Arc::new(users);
        *self.table.write() = Arc::clone(&users);
        let revoked: Vec<(u64, quinn::Connection, String, &'static str)> = {
            let mut live = self.live.lock();
            let mut gone = Vec::new();
            live.retain(|id, l| {
                let old = l.access.user();
                let still = l.credential.still_names(&users, &old);
                match users.get(old.name()).filter(|_| still) {
                    Some(new) => {
                        l.access.replace(new);
                        true
                    }
                    None => {
                        let why = match users.still_has(&old) {
                            true => "credential replaced",
                            false => "user revoked",
                        };
                        gone.push((*id, l.quic.clone(), old.name().to_string(), why));
                        false
                    }
                }
            });
            gone
        };
        for (id, quic, user, why) in &revoked {
            tracing::info!(conn = id, %user, reason = why, "closing a revoked connection");
            quic.close(CLOSE_REVOKED.into(), why.as_bytes());
            self.metrics.auth_revoked.inc();
        }
        revoked.len()
    }
}
