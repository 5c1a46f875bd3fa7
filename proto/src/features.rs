//! Feature bits advertised in [`Hello::features`](crate::Hello::features)
//! and granted in [`HelloOk::features`](crate::HelloOk::features).
//!
//! The server grants the intersection of what the client asked for and
//! what it supports. Unknown bits must be ignored by both sides.

/// `PublishBatch` frames are accepted.
pub const BATCH_PUBLISH: u64 = 1;
/// The cache frames (`CachePut`, `CacheGet`, `CacheDelete`) are served.
pub const CACHE: u64 = 2;
/// Cluster redirects (`Moved`) and `ClusterInfo` may be used.
pub const CLUSTER: u64 = 4;
/// The server checks `Hello::auth_token`.
pub const AUTH_TOKEN: u64 = 8;

/// Every feature bit defined by protocol version 1.
pub const ALL: u64 = BATCH_PUBLISH | CACHE | CLUSTER | AUTH_TOKEN;
