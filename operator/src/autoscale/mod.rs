//! The tier autoscaler: moves a BrokerCluster between tiers from its brokers' own metrics.
//!
//! - [`fetch`]: the one HTTP client both signal sources use (hyper-util with rustls).
//! - [`prom`]: reads the needed series from a broker's `/metrics` text. Pure.
//! - [`promql`]: the optional Prometheus source (`--prometheus-url`): the same observation
//!   from PromQL queries instead of scraping the pods.
//! - [`rates`]: per-pod counter deltas (with reset handling) summed into one observation per
//!   scrape round. Pure.
//! - [`decide`]: THE decision, from the window of observations and the cluster's state. Pure.
//! - [`report`]: the `status.autoscaling` block and the autoscaler's status fields (what its
//!   field manager applies). Pure.
//! - [`scrape`]: which broker pods to scrape, and one `GET /metrics` each.
//! - [`runner`]: the loop: every `scrapeInterval`, scrape each broker pod (or query
//!   Prometheus), keep the window in
//!   memory, decide, and on a change write `status.effectiveTier` (never `spec`), emit an
//!   Event and count the decision. The normal reconcile then renders the new tier.
//!
//! The window lives in memory only: after an operator restart (or a leader change) it refills
//! over one window before the autoscaler can move again. The cooldown survives restarts (it
//! starts at `status.autoscaling.lastChangeTime`).

pub mod decide;
pub mod fetch;
pub mod prom;
pub mod promql;
pub mod rates;
pub mod report;
pub mod runner;
pub mod scrape;

pub use decide::{Decision, HoldReason, Input, decide};

/// `spec.autoscaling` parsed and checked: part of validation ([`crate::validate::autoscaling`]).
pub use crate::validate::autoscaling::Policy;
