//! Cache counters: per-shard relaxed atomics and the summed snapshot.
//!
//! Each shard owns a [`ShardCounters`] that is only written while the
//! shard's mutex is held, so the `entries`/`bytes` gauges are exact per
//! shard. Readers sum the shards without locking; a snapshot taken while
//! other threads write is therefore not a single point in time, but every
//! counter is individually monotonic and the gauges are exact when quiet.

use std::sync::atomic::{AtomicU64, Ordering};

use super::shard::Reclaimed;

/// Snapshot of the cache counters, summed over all shards.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Reads that returned a value.
    pub hits: u64,
    /// Reads that found nothing (absent or expired).
    pub misses: u64,
    /// Successful puts (rejected puts are not counted).
    pub puts: u64,
    /// Deletes that removed a live entry.
    pub deletes: u64,
    /// Live entries evicted to respect the byte bound.
    pub evictions: u64,
    /// Expired entries reclaimed (on access, on put or by the sweeper).
    pub expirations: u64,
    /// Entries currently stored (gauge; may include expired entries not yet
    /// reclaimed).
    pub entries: u64,
    /// Accounted bytes currently stored (gauge).
    pub bytes: u64,
}

/// Counters of one shard. Written only under the shard lock.
#[derive(Debug, Default)]
pub(super) struct ShardCounters {
    hits: AtomicU64,
    misses: AtomicU64,
    puts: AtomicU64,
    deletes: AtomicU64,
    evictions: AtomicU64,
    expirations: AtomicU64,
    entries: AtomicU64,
    bytes: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    if by != 0 {
        counter.fetch_add(by, Ordering::Relaxed);
    }
}

impl ShardCounters {
    pub(super) fn hit(&self) {
        bump(&self.hits, 1);
    }

    pub(super) fn miss(&self) {
        bump(&self.misses, 1);
    }

    pub(super) fn put(&self) {
        bump(&self.puts, 1);
    }

    pub(super) fn delete(&self) {
        bump(&self.deletes, 1);
    }

    pub(super) fn expired(&self, count: u64) {
        bump(&self.expirations, count);
    }

    pub(super) fn reclaimed(&self, reclaimed: Reclaimed) {
        bump(&self.evictions, reclaimed.evicted);
        bump(&self.expirations, reclaimed.expired);
    }

    /// Publishes the shard's current size; call with the lock held.
    pub(super) fn set_gauges(&self, entries: usize, bytes: u64) {
        let entries = u64::try_from(entries).unwrap_or(u64::MAX);
        self.entries.store(entries, Ordering::Relaxed);
        self.bytes.store(bytes, Ordering::Relaxed);
    }

    pub(super) fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    pub(super) fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Adds this shard's counters into `total`.
    pub(super) fn add_to(&self, total: &mut CacheStats) {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        total.hits = total.hits.saturating_add(read(&self.hits));
        total.misses = total.misses.saturating_add(read(&self.misses));
        total.puts = total.puts.saturating_add(read(&self.puts));
        total.deletes = total.deletes.saturating_add(read(&self.deletes));
        total.evictions = total.evictions.saturating_add(read(&self.evictions));
        total.expirations = total.expirations.saturating_add(read(&self.expirations));
        total.entries = total.entries.saturating_add(read(&self.entries));
        total.bytes = total.bytes.saturating_add(read(&self.bytes));
    }
}
