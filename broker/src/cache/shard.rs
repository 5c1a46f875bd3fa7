//! One shard of the cache: map, LRU order, deadline index and byte count.
//!
//! A shard is plain single-threaded data; [`Cache`](super::Cache) wraps each
//! one in a mutex and keeps its counters. The invariants maintained here:
//! every entry is in the map, in the LRU slab and (if it has a deadline) in
//! the expiry index, and `bytes` is the sum of the entries' accounted sizes.

use std::collections::HashMap;
use std::time::Instant;

use ahash::RandomState;
use bytes::Bytes;

use super::entry::{Entry, accounted_size};
use super::expiry::ExpiryIndex;
use super::lru::{LruSlab, SlotId};

/// Result of a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Lookup {
    Hit(Bytes),
    Miss,
    /// The key was present but expired; it has been reclaimed.
    Expired,
}

/// Result of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Removal {
    Live,
    /// The key was present but expired; it has been reclaimed.
    Expired,
    Absent,
}

/// Entries a write pushed out of the shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Reclaimed {
    /// Live entries dropped by LRU eviction.
    pub evicted: u64,
    /// Expired entries reclaimed (including an expired entry the write
    /// replaced).
    pub expired: u64,
}

#[derive(Debug)]
pub(super) struct Shard {
    map: HashMap<Bytes, SlotId, RandomState>,
    lru: LruSlab<Entry>,
    expiry: ExpiryIndex,
    bytes: u64,
    budget: u64,
    next_seq: u64,
}

impl Shard {
    /// An empty shard holding at most `budget` accounted bytes. The map
    /// hasher is randomly keyed, independently of the shard router.
    pub(super) fn new(budget: u64) -> Self {
        Self {
            map: HashMap::with_hasher(RandomState::new()),
            lru: LruSlab::default(),
            expiry: ExpiryIndex::default(),
            bytes: 0,
            budget,
            next_seq: 0,
        }
    }

    /// Stored entries, including expired ones not yet reclaimed.
    pub(super) fn len(&self) -> usize {
        self.lru.len()
    }

    /// Accounted bytes of the stored entries.
    pub(super) fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads `key`, marking it most recently used on a hit.
    pub(super) fn get(&mut self, key: &[u8], now: Instant) -> Lookup {
        let Some(&slot) = self.map.get(key) else {
            return Lookup::Miss;
        };
        let live = self.lru.get(slot).is_some_and(|e| !e.is_expired(now));
        if !live {
            self.remove_slot(slot);
            return Lookup::Expired;
        }
        self.lru.touch(slot);
        match self.lru.get(slot) {
            Some(entry) => Lookup::Hit(entry.value.clone()),
            None => Lookup::Miss,
        }
    }

    /// Deletes `key`.
    pub(super) fn remove(&mut self, key: &[u8], now: Instant) -> Removal {
        let Some(&slot) = self.map.get(key) else {
            return Removal::Absent;
        };
        match self.remove_slot(slot) {
            Some(entry) if entry.is_expired(now) => Removal::Expired,
            Some(_) => Removal::Live,
            None => Removal::Absent,
        }
    }

    /// Stores `key` → `value` as the most recently used entry, replacing any
    /// previous value and making room by reclaiming expired entries first
    /// and evicting least-recently-used ones second.
    ///
    /// The caller must have checked that the entry fits in the budget on
    /// its own. An entry whose deadline is already due replaces (removes)
    /// the old value but is not stored. Also returns whether a live value
    /// was replaced.
    pub(super) fn insert(
        &mut self,
        key: Bytes,
        value: Bytes,
        deadline: Option<Instant>,
        now: Instant,
    ) -> (Reclaimed, bool) {
        let mut reclaimed = Reclaimed::default();
        let mut replaced = false;
        if let Some(&slot) = self.map.get(key.as_ref())
            && let Some(old) = self.remove_slot(slot)
        {
            if old.is_expired(now) {
                reclaimed.expired += 1;
            } else {
                replaced = true;
            }
        }
        if deadline.is_some_and(|d| d <= now) {
            return (reclaimed, replaced);
        }
        let size = accounted_size(key.len(), value.len());
        self.make_room(size, now, &mut reclaimed);

        let seq = self.next_seq;
        self.next_seq = self.next_seq.wrapping_add(1);
        let slot = self.lru.push_front(Entry {
            key: key.clone(),
            value,
            deadline,
            seq,
        });
        if let Some(deadline) = deadline {
            self.expiry.insert(deadline, seq, slot);
        }
        self.map.insert(key, slot);
        self.bytes = self.bytes.saturating_add(size);
        (reclaimed, replaced)
    }

    /// Copies of the live entries whose key satisfies `pred`, with their deadlines.
    pub(super) fn export_where(
        &self,
        pred: &mut impl FnMut(&[u8]) -> bool,
        now: Instant,
    ) -> Vec<(Bytes, Bytes, Option<Instant>, u64)> {
        self.lru
            .iter()
            .filter(|e| !e.is_expired(now) && pred(&e.key))
            .map(|e| (e.key.clone(), e.value.clone(), e.deadline, e.seq))
            .collect()
    }

    /// Deletes `key` if it is still the entry stored with sequence number `seq` (not
    /// rewritten since it was exported).
    pub(super) fn remove_if_seq(&mut self, key: &[u8], seq: u64) -> bool {
        let Some(&slot) = self.map.get(key) else {
            return false;
        };
        if self.lru.get(slot).is_some_and(|e| e.seq == seq) {
            self.remove_slot(slot).is_some()
        } else {
            false
        }
    }

    /// Reclaims up to `budget` expired entries, earliest deadline first.
    pub(super) fn sweep(&mut self, now: Instant, budget: usize) -> usize {
        let mut swept = 0;
        while swept < budget {
            let Some(slot) = self.expiry.pop_expired(now) else {
                break;
            };
            if self.remove_slot(slot).is_some() {
                swept += 1;
            }
        }
        swept
    }

    /// Frees space until `size` more bytes fit in the budget.
    fn make_room(&mut self, size: u64, now: Instant, reclaimed: &mut Reclaimed) {
        while self.bytes.saturating_add(size) > self.budget {
            if let Some(slot) = self.expiry.pop_expired(now) {
                if self.remove_slot(slot).is_some() {
                    reclaimed.expired += 1;
                }
                continue;
            }
            let Some(victim) = self.lru.back() else {
                break;
            };
            if self.remove_slot(victim).is_none() {
                break;
            }
            reclaimed.evicted += 1;
        }
    }

    /// Removes the entry in `slot` from every structure and the byte count.
    fn remove_slot(&mut self, slot: SlotId) -> Option<Entry> {
        let entry = self.lru.remove(slot)?;
        self.map.remove(entry.key.as_ref());
        if let Some(deadline) = entry.deadline {
            self.expiry.remove(deadline, entry.seq, slot);
        }
        self.bytes = self.bytes.saturating_sub(entry.size());
        Some(entry)
    }

    /// Panics if the shard's internal structures disagree.
    #[cfg(test)]
    pub(super) fn assert_consistent(&self) {
        let mut bytes = 0;
        let mut with_deadline = 0;
        for entry in self.lru.iter() {
            bytes += entry.size();
            with_deadline += usize::from(entry.deadline.is_some());
            assert!(self.map.contains_key(entry.key.as_ref()));
        }
        assert_eq!(self.map.len(), self.lru.len());
        assert_eq!(self.expiry.len(), with_deadline);
        assert_eq!(self.bytes, bytes);
        assert!(self.bytes <= self.budget);
    }

    /// Keys from most to least recently used.
    #[cfg(test)]
    pub(super) fn keys_by_recency(&self) -> Vec<Bytes> {
        self.lru.iter().map(|e| e.key.clone()).collect()
    }
}
