//! Cache configuration and its normalisation into a shard layout.

/// Largest shard count the cache will create, whatever is configured.
pub(super) const MAX_SHARDS: usize = 1 << 16;

/// Sizing of a [`Cache`](super::Cache).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheConfig {
    /// Upper bound on accounted bytes over the whole cache. It is split
    /// evenly across the shards: each shard may hold `max_bytes / shards`.
    pub max_bytes: u64,
    /// Requested number of shards. Rounded up to a power of two, with 0
    /// treated as 1 and the result capped at 65 536.
    pub shards: usize,
    /// Largest value (in bytes, key and overhead excluded) a put accepts.
    pub max_value_bytes: usize,
}

impl Default for CacheConfig {
    /// 256 MiB over 16 shards, values up to 1 MiB.
    fn default() -> Self {
        Self {
            max_bytes: 256 * 1024 * 1024,
            shards: 16,
            max_value_bytes: 1024 * 1024,
        }
    }
}

/// The shard layout derived from a [`CacheConfig`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Number of shards, a power of two in `1..=MAX_SHARDS`.
    pub shards: usize,
    /// Accounted bytes each shard may hold.
    pub shard_budget: u64,
}

impl Layout {
    pub(super) fn from_config(cfg: &CacheConfig) -> Self {
        let shards = cfg
            .shards
            .max(1)
            .checked_next_power_of_two()
            .unwrap_or(MAX_SHARDS)
            .min(MAX_SHARDS);
        // `shards` is at most 2^16, so it always fits in a u64.
        let divisor = u64::try_from(shards).unwrap_or(u64::MAX);
        Self {
            shards,
            shard_budget: cfg.max_bytes / divisor,
        }
    }
}
