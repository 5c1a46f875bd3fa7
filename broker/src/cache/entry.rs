//! One stored cache entry and how its size is accounted.

use std::time::Instant;

use bytes::Bytes;

/// Fixed bytes charged per entry on top of `key.len() + value.len()`.
///
/// It approximates the bookkeeping each entry really costs: two `Bytes`
/// handles plus deadline and list links in the slab node (~96 bytes), the
/// key handle and slot index in the shard's hash map (~40 bytes), and a
/// deadline-index node when the entry has a TTL. Rounded to 128 so that
/// many tiny entries cannot blow past `max_bytes` in real memory.
pub const ENTRY_OVERHEAD: usize = 128;

/// Accounted size of an entry with the given key and value lengths.
pub(super) fn accounted_size(key_len: usize, value_len: usize) -> u64 {
    let payload = key_len
        .saturating_add(value_len)
        .saturating_add(ENTRY_OVERHEAD);
    u64::try_from(payload).unwrap_or(u64::MAX)
}

/// A key/value pair with its optional expiry deadline.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub key: Bytes,
    pub value: Bytes,
    /// `None` means the entry never expires.
    pub deadline: Option<Instant>,
    /// Per-shard insertion sequence number; breaks ties between equal
    /// deadlines in the expiry index so reclaim order is deterministic.
    pub seq: u64,
}

impl Entry {
    /// Accounted size in bytes.
    pub(super) fn size(&self) -> u64 {
        accounted_size(self.key.len(), self.value.len())
    }

    /// An entry is expired from its deadline on (inclusive).
    pub(super) fn is_expired(&self, now: Instant) -> bool {
        self.deadline.is_some_and(|deadline| deadline <= now)
    }
}
