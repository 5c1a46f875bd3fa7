//! Cluster integration tests: several real brokers in one process on loopback, with server and
//! peer certificates from one test CA and a members file, with real QUIC between them and to
//! the clients.
//!
//! One test binary with a module per area keeps link time down on small machines.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod consumers;
mod durable_handoff;
mod durable_owner;
mod failure;
mod late;
mod meet;
mod patterns;
mod queue_groups;
mod relay_live;
mod relay_resume;
mod replica_link;
mod replica_moves;
mod replicated;
mod replicated_sigkill;
mod rotation;
mod scale;

// The cluster harness, shared with the CLI's cluster test.
use starling_testkit::cluster as harness;
