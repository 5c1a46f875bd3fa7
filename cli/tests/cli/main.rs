//! The `starling` CLI's integration tests (the built binary against real brokers on loopback),
//! in one test binary (one compile and link instead of three; docs/local-cluster.md, "Test
//! budget"). Select a module with cargo's filter, e.g. `--test cli auth::`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod auth;
mod cli;
mod cluster;
