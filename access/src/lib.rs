//! Starling's access control, shared by the broker (which enforces it) and the operator (which
//! writes it):
//!
//! - [`pattern`]: the one pattern language for topics and cache keys (`orders.*`,
//!   `tenant-a.>`);
//! - [`relation`]: pattern against pattern: whether allow patterns cover every name a
//!   subscription pattern matches, whether two patterns share a name;
//! - [`document`]: the users document (`users.yaml`), its serde types and its validation;
//! - [`users`]: the compiled, immutable user table the broker looks principals up in, and the
//!   permission check;
//! - [`token`]: token generation and hashing (brokers hold only SHA-256 hashes).
//!
//! Nothing here does I/O: the broker reads the document from a file or a Secret and hands the
//! text to [`Users::parse`].

pub mod document;
pub mod pattern;
pub mod relation;
pub mod token;
pub mod users;

pub use document::{Authentication, Permissions, Rules, UserEntry, UsersDocument};
pub use pattern::{Pattern, PatternError};
pub use token::{generate_token, hash_token, token_hash_hex};
pub use users::{AccessError, Denied, Method, Operation, User, Users};

/// The certificate common name that marks a broker's peer certificate. It contains a `:`, which
/// no user name may (user names are Kubernetes object names), so no user certificate can carry
/// it by accident.
pub const PEER_IDENTITY: &str = "starling:peer";

/// The document version this crate reads and writes.
pub const DOCUMENT_VERSION: u32 = 1;
