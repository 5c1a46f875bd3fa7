//! `starling-operator`: turns a `BrokerCluster` into a running, sized, profile-configured broker
//! cluster and keeps it there.
//!
//! Control flows one way: BrokerCluster → validated cluster → rendered objects → apply →
//! observed status.
//!
//! Module map (each step imports only the steps before it; `scripts/module-cycles.py` checks):
//! - [`crd`]: the `BrokerCluster` resource, its status, its condition types and reasons
//!   ([`crd::conditions`]) and its CEL admission rules.
//! - [`ca_trust`]: which CA Secret the operator may use (its own, or one the spec names). Pure.
//! - [`validate`]: raw spec → [`validate::ValidatedCluster`] (or a `Degraded` reason), with the
//!   config hash and the autoscaling policy. Pure.
//! - [`members`]: the member list and the sequencing of scale changes. Pure.
//! - [`tier_change`]: the order of replicas and config in a tier change, and the step a
//!   reconcile renders ([`tier_change::stage`]). Pure.
//! - [`roll`]: a replicated cluster's roll held by the operator: the StatefulSet's partition,
//!   lowered one broker at a time while every replica is in sync. Pure (its reads in
//!   [`roll::observe`]).
//! - [`build`]: one pure renderer per child object (ConfigMaps, StatefulSet and pod template,
//!   Services, PodDisruptionBudget, ServiceAccount, Role and RoleBinding, the generated TLS
//!   Secret).
//! - [`tls`]: the self-signed certificate generated when `spec.tls` is unset.
//! - [`pki`]: the cluster CA and the peer and user certificates it signs. Pure.
//! - [`live`]: the children's watch caches (metadata only, slimmed).
//! - [`pods`]: which pods are a cluster's brokers (those its StatefulSet controls). Pure.
//! - [`apply`]: server-side apply of the children that the API server does not already hold
//!   as rendered ([`apply::current`]), deletion of unwanted ones, and status writes (one field
//!   manager per writer).
//! - [`status`]: conditions and counters from the observed StatefulSet. Pure.
//! - [`events`]: which Kubernetes Events a reconcile emits. Pure.
//! - [`context`]: the reconciler's shared state.
//! - [`autoscale`]: the tier autoscaler: scrapes the brokers, decides (pure), writes
//!   `status.effectiveTier` with its own narrow handle.
//! - [`controller`]: the kube-runtime controller wiring the steps together.
//! - [`users`]: the BrokerUser controller (credentials Secrets and user status); [`access`]
//!   checks users and builds the users document (pure).
//! - [`topics`]: the BrokerTopic controller (a BrokerTopic whose cluster is missing); the
//!   cluster's reconcile judges its BrokerTopics ([`validate::topics`]), writes the topics
//!   document and their status ([`apply::topics`], [`status::topics`]).
//! - [`leader`], [`fence`]: Lease-based leader election, and the fence every writer stops on
//!   when the lease is lost.
//! - [`metrics`], [`http`], [`telemetry`]: the process's metrics, health endpoint and logs;
//!   [`api_requests`]: the API client, its requests counted by verb.
//! - [`cli`]: flags and the process's main loop.
//! - [`docs`]: generates the reference part of `docs/operator.md`.
//! - [`names`], [`quantity`], [`error`]: shared names and labels, quantity parsing, errors.
//! - `fake_api` (tests only): an in-process fake of the Kubernetes API for reconcile tests.
//!
//! The profile, tier and knob tables are `starling-config`'s; nothing here restates them.

pub mod access;
pub mod api_requests;
pub mod apply;
pub mod autoscale;
pub mod build;
pub mod ca_trust;
pub mod cli;
pub mod context;
pub mod controller;
pub mod crd;
pub mod docs;
pub mod error;
pub mod events;
#[cfg(test)]
pub(crate) mod fake_api;
pub mod fence;
pub mod http;
pub mod leader;
pub mod live;
pub mod members;
pub mod metrics;
pub mod names;
pub mod pki;
pub mod pods;
pub mod roll;
pub use starling_config::quantity;
pub mod status;
pub mod telemetry;
pub mod tier_change;
pub mod tls;
pub mod topics;
pub mod users;
pub mod validate;
