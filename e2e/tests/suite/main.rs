//! The end-to-end suite: the real operator and real broker images on a real Kubernetes
//! cluster. Run it with `make e2e` (it starts a local single-node cluster on this machine,
//! builds and imports the images, and helm-installs the operator). Each test works in its own
//! namespace; `e2e/run.sh` runs each test in its own process, four at a time, the longest
//! first, and the operator-restart test alone after the others.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

mod access;
mod autoscaling;
mod bad_spec;
mod cli;
mod cluster;
mod durable;
mod examples;
mod helm_test;
mod lifecycle;
mod observability;
mod operator;
mod prometheus;
mod pubsub;
mod replicated;
mod rollout;
