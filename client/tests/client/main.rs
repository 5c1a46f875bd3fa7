//! The client crate's integration tests against real brokers on loopback, in one test binary
//! (one compile and link of the broker and the SDK instead of three; docs/local-cluster.md,
//! "Test budget"). Select a module with cargo's filter, e.g. `--test client resume::`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod auth;
mod resume;
mod smoke;
mod trace;
