//! `starling-broker`: the Starling pub/sub and cache broker.
//!
//! Data flows one way: QUIC stream → frame decode ([`server::conn`]) → publish ingress
//! ([`server::publish`]) → topic batching and fanout ([`pubsub::topic`]) → subscriber queue
//! ([`pubsub::subscriber`]) → writer lane ([`pubsub::lanes`]) → QUIC stream.
//!
//! Module map (imports go one way: `broker` and `server` use `cluster`, `pubsub` and `cache`,
//! never the reverse; `scripts/module-cycles.py broker/src` checks it):
//! - [`broker`]: start-up, the accept loop and the SIGTERM drain ([`Broker`], [`RunningBroker`]).
//! - [`auth`]: client identity (certificates, tokens, peers), the users table and its reload,
//!   and the permission check of every request.
//! - [`state`]: the shared state, built once and handed out as narrow handles.
//! - [`server`]: the QUIC ingress: connections, the handshake and the per-stream handlers
//!   (decode, check, hand over).
//! - [`cluster`]: membership, placement, peer links, upstreams, the cache hand-off, and
//!   [`cluster::forward`] (everything handed to another member).
//! - [`pubsub`]: topics (registry and task) and acks; batching, subscriber queues, writer lanes,
//!   the retained tail, the engine's counters and batch deadlines come from `starling-pubsub`.
//! - [`cache`]: the sharded TTL cache.
//! - [`transport`], [`tls`] and [`tls_reload`]: quinn configuration, certificates and the
//!   client CA, and their reload.
//! - [`watched`]: the one poller of the documents re-read while the broker runs (users, member
//!   list, TLS files).
//! - [`client_settings`]: the broker's knobs as the SDK's settings (path tuning, profile), for
//!   its peer links and the bench.
//! - [`http`], [`http_slots`], [`metrics`], [`health`]: the observability surface, and the HTTP
//!   listener's slots (probes keep their own).
//! - [`memory_limit`]: the cgroup memory limit the config's worst case is checked against at start.
//! - [`cli`] and [`telemetry`]: the binary's config loading and logging.
//! - [`error`]: the typed errors.

pub mod auth;
pub mod broker;
pub mod cache;
pub mod cli;
pub mod client_settings;
pub mod cluster;
pub mod consumer;
pub mod durable;
pub mod error;
pub mod health;
pub mod http;
pub mod http_slots;
pub mod memory_limit;
pub mod metrics;
pub mod process;
pub mod pubsub;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod tls;
pub mod tls_reload;
pub mod transport;
pub mod watched;

pub use broker::{Broker, RunningBroker};
pub use error::BrokerError;
