//! Broker integration tests: a real broker in-process on ephemeral loopback ports, real QUIC
//! clients (the SDK, or raw quinn for malformed input), real HTTP scrapes.
//!
//! One test binary with a module per area keeps link time down on small machines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod admission;
mod auth;
mod bad_input;
mod buffer_budget;
mod cache;
mod common;
mod dedup;
mod delivery;
mod handshake_flood;
mod headers;
mod http_budget;
mod http_probes;
mod limits;
mod observability;
mod peer_uri;
mod publish_flood;
mod queue_groups;
mod quic_path;
mod redaction;
mod request_reply;
mod retention;
mod slow_subscriber;
mod tls_files;
mod token_rotation;
mod wildcards;
