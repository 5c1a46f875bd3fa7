//! `starling-testkit`: test support shared by the workspace's tests, so each helper is written
//! once (a dev-dependency only; never published).
//!
//! | module | what it owns |
//! | --- | --- |
//! | [`pki`] | test certificate authorities (rcgen) and the leaves they sign |
//! | [`forbidden`] | [`assert_forbidden`]: a typed `Forbidden` refusal naming the user and object |
//! | [`payload`] | numbered payloads and reading their number back |
//! | [`http`] | [`http_get`]: one plain HTTP/1.1 GET |
//! | `broker` (feature `broker`) | one in-process broker for SDK and CLI tests; `broker::secured`, one that requires credentials |
//! | `cluster` (feature `broker`) | several in-process brokers as one cluster, with a cluster CA and member files (and a topics document) |
//! | [`replicated`] | acked publishes to a replicated topic and reading them back with positions |
//!
//! Every helper panics on a setup failure: in a test, the panic is the failure report.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test support: a panic is the failure report

#[cfg(feature = "broker")]
pub mod broker;
#[cfg(feature = "broker")]
pub mod cluster;
pub mod forbidden;
pub mod http;
pub mod payload;
pub mod pki;
pub mod replicated;

pub use forbidden::assert_forbidden;
pub use http::http_get;
