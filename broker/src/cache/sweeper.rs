//! Periodic background task that actively reclaims expired entries.
//!
//! Lazy reclaim (on read, delete and put) already guarantees expired keys
//! are never returned; the sweeper bounds how long unread expired entries
//! keep occupying memory. Each tick it removes at most
//! [`SWEEP_BUDGET_PER_SHARD`] entries per shard, earliest deadline first, so
//! a shard lock is never held for long; a backlog drains over later ticks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinHandle;
use tokio::time::MissedTickBehavior;

use super::store::Cache;

/// Most expired entries one sweeper tick reclaims from a single shard.
pub const SWEEP_BUDGET_PER_SHARD: usize = 1024;

/// Shortest interval the sweeper accepts; smaller values are raised to it.
const MIN_SWEEP_INTERVAL: Duration = Duration::from_millis(1);

impl Cache {
    /// Spawns a task that calls [`sweep_expired`](Self::sweep_expired)
    /// every `interval` (at least 1 ms). The task holds only a weak
    /// reference and ends by itself once the cache is dropped; abort the
    /// returned handle to stop it earlier.
    ///
    /// # Panics
    ///
    /// Panics if called outside a Tokio runtime.
    pub fn spawn_sweeper(self: &Arc<Self>, interval: Duration) -> JoinHandle<()> {
        let cache = Arc::downgrade(self);
        let period = interval.max(MIN_SWEEP_INTERVAL);
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(period);
            ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
            // The first tick completes immediately; skip it.
            ticker.tick().await;
            loop {
                ticker.tick().await;
                let Some(cache) = cache.upgrade() else {
                    break;
                };
                cache.sweep_expired(Instant::now(), SWEEP_BUDGET_PER_SHARD);
            }
        })
    }
}
