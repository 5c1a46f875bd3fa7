//! Tests of the cache module, with shared helpers.

mod basic;
mod concurrency;
mod eviction;
mod limits;
mod lru_slab;
mod model;
mod sweeper;
mod ttl;

use bytes::Bytes;

use super::{Cache, CacheConfig, ENTRY_OVERHEAD};

/// Owned `Bytes` from a string literal.
fn b(s: &str) -> Bytes {
    Bytes::copy_from_slice(s.as_bytes())
}

/// Accounted size of an entry, as a `u64`.
fn size_of(key: &str, value: &str) -> u64 {
    (key.len() + value.len() + ENTRY_OVERHEAD) as u64
}

/// A single-shard cache with the given byte budget and no value limit to
/// speak of, so eviction order is deterministic.
fn one_shard(max_bytes: u64) -> Cache {
    Cache::new(CacheConfig {
        max_bytes,
        shards: 1,
        max_value_bytes: usize::MAX,
    })
}

/// Checks every shard's internal invariants.
fn assert_consistent(cache: &Cache) {
    for index in 0..cache.shard_count() {
        cache.with_shard(index, |shard| shard.assert_consistent());
    }
}
