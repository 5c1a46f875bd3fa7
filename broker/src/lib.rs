//! `starling-broker`: the Starling pub/sub and cache broker.
//!
//! Data flows one way: QUIC stream → frame decode ([`server::conn`]) → publish ingress
//! ([`server::publish`]) → topic batching and fanout ([`pubsub::topic`]) → subscriber queue
//! ([`pubsub::subscriber`]) → writer lane ([`pubsub::lanes`]) → QUIC stream.
//!
//! Module map:
//! - [`broker`]: start-up, the accept loop and the SIGTERM drain ([`Broker`], [`RunningBroker`]).
//! - [`server`]: connections, the handshake and the per-stream handlers.
//! - [`pubsub`]: topics, batching, subscriber queues, writer lanes, acks.
//! - [`cache`]: the sharded TTL cache.
//! - [`transport`] and [`tls`]: quinn configuration and certificates.
//! - [`http`], [`metrics`], [`health`]: the observability surface.
//! - [`timer`]: sub-millisecond batch deadlines.
//! - [`cli`] and [`telemetry`]: the binary's config loading and logging.

pub mod broker;
pub mod cache;
pub mod cli;
pub mod cluster;
pub mod error;
pub mod health;
pub mod http;
pub mod metrics;
pub mod process;
pub mod pubsub;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod timer;
pub mod tls;
pub mod transport;

pub use broker::{Broker, RunningBroker};
pub use error::BrokerError;
