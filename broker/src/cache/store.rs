//! The public [`Cache`]: shard routing, size checks and counter updates.
//!
//! # Shard routing
//!
//! A key's shard is chosen from the top bits of an `ahash` hash keyed with
//! random seeds drawn once per `Cache` (so a client cannot aim keys at a
//! single shard across restarts). The per-shard hash maps use their own,
//! independently seeded hashers, so the bits used for routing do not
//! correlate with bucket positions inside a shard.

use std::fmt;
use std::time::{Duration, Instant};

use ahash::RandomState;
use bytes::Bytes;
use parking_lot::Mutex;

use super::config::{CacheConfig, Layout};
use super::entry::accounted_size;
use super::error::CacheError;
use super::shard::{Lookup, Removal, Shard};
use super::stats::{CacheStats, ShardCounters};

/// A shard and its counters, padded to its own cache lines so that threads
/// working on neighbouring shards do not contend.
#[repr(align(64))]
struct ShardCell {
    shard: Mutex<Shard>,
    counters: ShardCounters,
}

/// A live entry copied out of the cache (for the cluster hand-off).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedEntry {
    /// The key.
    pub key: Bytes,
    /// The value.
    pub value: Bytes,
    /// Time left to live; `None`: no expiry.
    pub ttl: Option<Duration>,
    /// Identifies this write of the key, for [`Cache::remove_exported`].
    pub seq: u64,
}

/// Sharded in-memory key/value cache with TTLs and a byte bound.
///
/// All methods take `&self`; share it across tasks with an `Arc`.
pub struct Cache {
    cells: Box<[ShardCell]>,
    router: RandomState,
    /// `64 - log2(shards)`: right shift that turns a hash into a shard index.
    shift: u32,
    shard_budget: u64,
    max_value_bytes: usize,
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("shards", &self.cells.len())
            .field("shard_budget", &self.shard_budget)
            .field("max_value_bytes", &self.max_value_bytes)
            .field("stats", &self.stats())
            .finish()
    }
}

impl Cache {
    /// Creates an empty cache. See [`CacheConfig`] for how the shard count
    /// and per-shard budget are derived.
    pub fn new(cfg: CacheConfig) -> Self {
        let layout = Layout::from_config(&cfg);
        let cells = (0..layout.shards)
            .map(|_| ShardCell {
                shard: Mutex::new(Shard::new(layout.shard_budget)),
                counters: ShardCounters::default(),
            })
            .collect();
        Self {
            cells,
            router: RandomState::new(),
            shift: 64 - layout.shards.trailing_zeros(),
            shard_budget: layout.shard_budget,
            max_value_bytes: cfg.max_value_bytes,
        }
    }

    /// Number of shards (a power of two).
    pub fn shard_count(&self) -> usize {
        self.cells.len()
    }

    /// Accounted bytes each shard may hold (`max_bytes / shards`).
    pub fn shard_budget(&self) -> u64 {
        self.shard_budget
    }

    /// Stores `value` under `key`, replacing any previous value and its TTL.
    /// `ttl: None` means the entry never expires. Returns true when a live (unexpired) value was
    /// replaced.
    ///
    /// # Errors
    ///
    /// [`CacheError::ValueTooLarge`] as described for [`put_at`](Self::put_at).
    pub fn put(&self, key: Bytes, value: Bytes, ttl: Option<Duration>) -> Result<bool, CacheError> {
        self.put_at(key, value, ttl, Instant::now())
    }

    /// [`put`](Self::put) with an explicit current time.
    ///
    /// A TTL of zero removes any previous value and stores nothing; a TTL
    /// too large to represent means no expiry.
    ///
    /// # Errors
    ///
    /// [`CacheError::ValueTooLarge`], leaving the cache unchanged, if the
    /// value exceeds `max_value_bytes` (`size` = value length) or the
    /// accounted entry exceeds the per-shard budget (`size` = key + value +
    /// [`ENTRY_OVERHEAD`](super::ENTRY_OVERHEAD), `max` = shard budget).
    pub fn put_at(
        &self,
        key: Bytes,
        value: Bytes,
        ttl: Option<Duration>,
        now: Instant,
    ) -> Result<bool, CacheError> {
        self.check_size(&key, &value)?;
        let deadline = ttl.and_then(|ttl| now.checked_add(ttl));
        let cell = self.cell(&key);
        let mut shard = cell.shard.lock();
        let (reclaimed, replaced) = shard.insert(key, value, deadline, now);
        cell.counters.put();
        cell.counters.reclaimed(reclaimed);
        cell.counters.set_gauges(shard.len(), shard.bytes());
        Ok(replaced)
    }

    /// Returns the live value under `key`; never returns an expired entry.
    pub fn get(&self, key: &[u8]) -> Option<Bytes> {
        self.get_at(key, Instant::now())
    }

    /// [`get`](Self::get) with an explicit current time. A hit marks the
    /// entry most recently used; an expired entry is reclaimed on the spot.
    pub fn get_at(&self, key: &[u8], now: Instant) -> Option<Bytes> {
        let cell = self.cell(key);
        let mut shard = cell.shard.lock();
        match shard.get(key, now) {
            Lookup::Hit(value) => {
                cell.counters.hit();
                Some(value)
            }
            Lookup::Miss => {
                cell.counters.miss();
                None
            }
            Lookup::Expired => {
                cell.counters.miss();
                cell.counters.expired(1);
                cell.counters.set_gauges(shard.len(), shard.bytes());
                None
            }
        }
    }

    /// Removes `key`. Returns true if a live (unexpired) entry existed.
    pub fn delete(&self, key: &[u8]) -> bool {
        self.delete_at(key, Instant::now())
    }

    /// [`delete`](Self::delete) with an explicit current time.
    pub fn delete_at(&self, key: &[u8], now: Instant) -> bool {
        let cell = self.cell(key);
        let mut shard = cell.shard.lock();
        let removal = shard.remove(key, now);
        match removal {
            Removal::Live => cell.counters.delete(),
            Removal::Expired => cell.counters.expired(1),
            Removal::Absent => return false,
        }
        cell.counters.set_gauges(shard.len(), shard.bytes());
        removal == Removal::Live
    }

    /// Copies of the live entries whose key satisfies `pred`, each with its remaining time to
    /// live (`None`: no expiry). Shards are visited one at a time, so other shards keep serving.
    pub fn export_where(&self, mut pred: impl FnMut(&[u8]) -> bool) -> Vec<ExportedEntry> {
        let now = Instant::now();
        let mut out = Vec::new();
        for cell in self.cells.iter() {
            let entries = cell.shard.lock().export_where(&mut pred, now);
            out.extend(
                entries
                    .into_iter()
                    .filter_map(|(key, value, deadline, seq)| {
                        let ttl = match deadline {
                            Some(d) => {
                                Some(d.checked_duration_since(now).filter(|t| !t.is_zero())?)
                            }
                            None => None,
                        };
                        Some(ExportedEntry {
                            key,
                            value,
                            ttl,
                            seq,
                        })
                    }),
            );
        }
        out
    }

    /// Deletes an exported entry unless its key was written again since the export (a newer
    /// value, or the same value handed back by another member, is kept).
    pub fn remove_exported(&self, e: &ExportedEntry) -> bool {
        let cell = self.cell(&e.key);
        let mut shard = cell.shard.lock();
        let removed = shard.remove_if_seq(&e.key, e.seq);
        cell.counters.set_gauges(shard.len(), shard.bytes());
        removed
    }

    /// Reclaims expired entries, at most `budget_per_shard` per shard so
    /// that no shard lock is held for long. Returns how many were removed.
    pub fn sweep_expired(&self, now: Instant, budget_per_shard: usize) -> usize {
        let mut total = 0usize;
        for cell in self.cells.iter() {
            let mut shard = cell.shard.lock();
            let swept = shard.sweep(now, budget_per_shard);
            if swept > 0 {
                cell.counters
                    .expired(u64::try_from(swept).unwrap_or(u64::MAX));
                cell.counters.set_gauges(shard.len(), shard.bytes());
            }
            total = total.saturating_add(swept);
        }
        total
    }

    /// Entries stored, including expired ones not yet reclaimed. Lock-free.
    pub fn len(&self) -> usize {
        let entries = self.cells.iter().fold(0u64, |sum, cell| {
            sum.saturating_add(cell.counters.entries())
        });
        usize::try_from(entries).unwrap_or(usize::MAX)
    }

    /// True if no entry is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Accounted bytes in use. Lock-free.
    pub fn bytes(&self) -> u64 {
        self.cells
            .iter()
            .fold(0u64, |sum, cell| sum.saturating_add(cell.counters.bytes()))
    }

    /// Snapshot of the counters summed over all shards. Lock-free.
    pub fn stats(&self) -> CacheStats {
        let mut total = CacheStats::default();
        for cell in self.cells.iter() {
            cell.counters.add_to(&mut total);
        }
        total
    }

    /// Index of the shard that owns `key`.
    pub(super) fn shard_index(&self, key: &[u8]) -> usize {
        let hash = self.router.hash_one(key);
        // With one shard the shift is 64 and `checked_shr` yields None.
        let index = hash.checked_shr(self.shift).unwrap_or(0);
        usize::try_from(index).unwrap_or(0)
    }

    /// Runs `f` on the locked shard with the given index (tests only).
    #[cfg(test)]
    pub(super) fn with_shard<R>(&self, index: usize, f: impl FnOnce(&Shard) -> R) -> Option<R> {
        self.cells.get(index).map(|cell| f(&cell.shard.lock()))
    }

    fn cell(&self, key: &[u8]) -> &ShardCell {
        let index = self.shard_index(key);
        // `index < cells.len()` by construction; fall back to shard 0.
        match self.cells.get(index) {
            Some(cell) => cell,
            None => &self.cells[0],
        }
    }

    fn check_size(&self, key: &[u8], value: &[u8]) -> Result<(), CacheError> {
        if value.len() > self.max_value_bytes {
            return Err(CacheError::ValueTooLarge {
                size: value.len(),
                max: self.max_value_bytes,
            });
        }
        let size = accounted_size(key.len(), value.len());
        if size > self.shard_budget {
            return Err(CacheError::ValueTooLarge {
                size: usize::try_from(size).unwrap_or(usize::MAX),
                max: usize::try_from(self.shard_budget).unwrap_or(usize::MAX),
            });
        }
        Ok(())
    }
}
