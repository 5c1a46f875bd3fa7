//! The replica crate's integration tests, in one test binary: each module was its own binary
//! before, and each instantiated openraft's generic core again (about 100 s of compile each on
//! 2 cores; docs/local-cluster.md, "Test budget"). Select one module with cargo's filter, e.g.
//! `cargo test --profile ci --workspace --test replica schedules::`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod common;

mod binary_codec;
mod cluster;
mod codec;
mod compat_json;
mod create;
mod failover;
mod mixed_versions;
mod schedules;
mod state_machine;
