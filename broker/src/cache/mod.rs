//! In-memory key/value cache of the broker: sharded, TTL-aware and bounded in
//! bytes.
//!
//! This module owns the cache data structure and nothing else; the broker
//! wires it to the wire protocol and exports [`CacheStats`] as metrics.
//!
//! # Layout
//!
//! * [`Cache`] (`store.rs`) routes every key to one of N shards (N a power of
//!   two) by hashing it, and each shard sits behind its own
//!   `parking_lot::Mutex`, so there is no global lock.
//! * A shard (`shard.rs`) keeps a hash map from key to slot, a slab-backed
//!   O(1) LRU list of entries (`lru.rs`) and an ordered deadline index of the
//!   entries that carry a TTL (`expiry.rs`).
//! * Counters (`stats.rs`) are per-shard relaxed atomics, summed by
//!   [`Cache::stats`] without taking any lock.
//! * `sweeper.rs` runs the periodic active expiry task.
//!
//! # Accounting
//!
//! An entry costs `key.len() + value.len() + ENTRY_OVERHEAD` bytes (see
//! [`ENTRY_OVERHEAD`]). The configured `max_bytes` is split evenly across the
//! shards; a put that would overflow its shard's budget first reclaims
//! expired entries, then evicts least-recently-used ones (a read or a write
//! both count as a use).
//!
//! # Time
//!
//! Every time-dependent operation has an `*_at` variant taking the current
//! [`std::time::Instant`], so tests drive time explicitly; the plain variants
//! call `Instant::now()`.

mod config;
mod entry;
mod error;
mod expiry;
mod lru;
mod shard;
mod stats;
mod store;
mod sweeper;

#[cfg(test)]
mod tests;

pub use config::CacheConfig;
pub use entry::ENTRY_OVERHEAD;
pub use error::CacheError;
pub use stats::CacheStats;
pub use store::{Cache, ExportedEntry};
pub use sweeper::SWEEP_BUDGET_PER_SHARD;
