//! Errors returned by cache operations.

/// Why a cache operation was refused.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum CacheError {
    /// The value exceeds `max_value_bytes`, or the whole entry (key, value
    /// and overhead) exceeds the per-shard byte budget. The cache is left
    /// unchanged.
    #[error("cache entry of {size} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Size that was checked: the value length for the value limit, the
        /// accounted entry size for the shard budget.
        size: usize,
        /// The limit it exceeded.
        max: usize,
    },
}
