//! Per-shard deadline index used to find expired entries without scanning.
//!
//! Entries with a TTL are kept in a `BTreeSet` ordered by
//! `(deadline, seq, slot)`. Removal is exact (the shard removes the index
//! entry whenever it removes the cache entry), so the set never holds stale
//! records and its first element is always the next entry to expire.

use std::collections::BTreeSet;
use std::time::Instant;

use super::lru::SlotId;

/// Ordered set of `(deadline, seq, slot)` for the entries that expire.
#[derive(Debug, Default)]
pub(super) struct ExpiryIndex {
    set: BTreeSet<(Instant, u64, SlotId)>,
}

impl ExpiryIndex {
    pub(super) fn insert(&mut self, deadline: Instant, seq: u64, slot: SlotId) {
        self.set.insert((deadline, seq, slot));
    }

    pub(super) fn remove(&mut self, deadline: Instant, seq: u64, slot: SlotId) -> bool {
        self.set.remove(&(deadline, seq, slot))
    }

    /// Removes and returns the slot of the earliest-deadline entry if it is
    /// expired at `now`.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<SlotId> {
        let &(deadline, _, _) = self.set.first()?;
        if deadline > now {
            return None;
        }
        self.set.pop_first().map(|(_, _, slot)| slot)
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.set.len()
    }
}
