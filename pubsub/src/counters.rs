//! The pub/sub engine's own counts: plain atomics the engine updates and decides by, which the
//! broker exports to Prometheus at scrape time (`Metrics::observe_pubsub`). No decision reads a
//! metric back: the broker-wide retention cap reads [`Counters::retained_bytes`], the drain waits
//! on [`Counters::wait_queues_empty`].
//!
//! Distributions (batch sizes, delivery latency) are not counts: the engine reports each one to
//! an [`Observe`] the embedder supplies ([`Unobserved`] when nobody looks).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

use crate::batcher::Trigger;

/// Why events were dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropReason {
    /// A full subscriber queue under `drop_new`.
    QueueFullNew,
    /// A full subscriber queue under `drop_old`.
    QueueFullOld,
    /// The subscriber went away with events still queued.
    SubscriberClosed,
    /// The broker-wide `subscriber_queue_budget_bytes` was full (under `drop_new` or
    /// `drop_old`).
    QueueBudget,
}

impl DropReason {
    /// Every reason, in the order of [`Counters::dropped`].
    pub const ALL: [DropReason; 4] = [
        DropReason::QueueFullNew,
        DropReason::QueueFullOld,
        DropReason::SubscriberClosed,
        DropReason::QueueBudget,
    ];

    fn index(self) -> usize {
        match self {
            DropReason::QueueFullNew => 0,
            DropReason::QueueFullOld => 1,
            DropReason::SubscriberClosed => 2,
            DropReason::QueueBudget => 3,
        }
    }
}

/// Every flush trigger, in the order of [`Counters::batch_flushes`].
pub const TRIGGERS: [Trigger; 4] = [
    Trigger::Events,
    Trigger::Bytes,
    Trigger::Delay,
    Trigger::Drain,
];

fn trigger_index(t: Trigger) -> usize {
    match t {
        Trigger::Events => 0,
        Trigger::Bytes => 1,
        Trigger::Delay => 2,
        Trigger::Drain => 3,
    }
}

/// One writer lane's counts.
#[derive(Debug, Default)]
pub struct LaneCounters {
    /// Ready subscribers waiting in the lane's queue.
    pub depth: AtomicU64,
    /// The highest depth seen.
    pub high_water: AtomicU64,
    /// Subscriber hand-offs to the lane.
    pub enqueued: AtomicU64,
}

/// The engine's counts.
#[derive(Debug)]
pub struct Counters {
    /// Events written to subscriber sinks.
    pub delivered_events: AtomicU64,
    /// Bytes written to subscriber sinks.
    pub delivered_bytes: AtomicU64,
    dropped: [AtomicU64; 4],
    batch_flushes: [AtomicU64; 4],
    /// Writes that found the sink blocked and were parked.
    pub lane_stalls: AtomicU64,
    /// Batches queued across all subscriber queues (replies not counted).
    queued_batches: AtomicU64,
    /// Notified when `queued_batches` reaches zero.
    queues_empty: Notify,
    /// Bytes of encoded batches retained for resuming subscribers, over all topics (the
    /// broker-wide cap is checked against it).
    pub retained_bytes: AtomicU64,
    /// Events sent again to resuming subscribers (replays and catch-ups).
    pub replayed_events: AtomicU64,
    /// Events handed to one member of a queue group (each counted once per group).
    pub group_events: AtomicU64,
    /// Events no member of a queue group took (dropped by the group's slow-subscriber policy).
    pub group_dropped_events: AtomicU64,
    /// Topics alive (the `max_topics` cap's count).
    pub topics: AtomicU64,
    /// Durable-log errors met by topic tasks (opening, reading back, time lookups).
    pub storage_errors: AtomicU64,
    /// Log records replayed to resuming subscribers.
    pub storage_replayed_records: AtomicU64,
    /// Publishes dropped as repeats of a message id within its topic's window.
    pub duplicates: AtomicU64,
    /// Bytes the de-duplication windows of all topics hold (checked against
    /// `dedup_max_total_bytes` by [`Counters::charge_dedup`]).
    pub dedup_bytes: AtomicU64,
    /// Publishes refused because their new ids did not fit in `dedup_max_total_bytes`.
    pub dedup_refused: AtomicU64,
    /// Per writer lane.
    pub lanes: Vec<LaneCounters>,
}

impl Counters {
    /// All zero, with `lanes` lanes' counts.
    pub fn new(lanes: usize) -> Counters {
        Counters {
            delivered_events: AtomicU64::new(0),
            delivered_bytes: AtomicU64::new(0),
            dropped: Default::default(),
            batch_flushes: Default::default(),
            lane_stalls: AtomicU64::new(0),
            queued_batches: AtomicU64::new(0),
            queues_empty: Notify::new(),
            retained_bytes: AtomicU64::new(0),
            replayed_events: AtomicU64::new(0),
            group_events: AtomicU64::new(0),
            group_dropped_events: AtomicU64::new(0),
            topics: AtomicU64::new(0),
            storage_errors: AtomicU64::new(0),
            storage_replayed_records: AtomicU64::new(0),
            duplicates: AtomicU64::new(0),
            dedup_bytes: AtomicU64::new(0),
            dedup_refused: AtomicU64::new(0),
            lanes: (0..lanes.max(1)).map(|_| LaneCounters::default()).collect(),
        }
    }

    /// Counts `events` dropped for `reason`.
    pub fn drop_events(&self, reason: DropReason, events: u64) {
        self.dropped[reason.index()].fetch_add(events, Ordering::Relaxed);
    }

    /// Events dropped for `reason` so far.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped[reason.index()].load(Ordering::Relaxed)
    }

    /// Counts a batch sealed by `trigger`.
    pub fn batch_flushed(&self, trigger: Trigger) {
        self.batch_flushes[trigger_index(trigger)].fetch_add(1, Ordering::Relaxed);
    }

    /// Batches sealed by `trigger` so far.
    pub fn batch_flushes(&self, trigger: Trigger) -> u64 {
        self.batch_flushes[trigger_index(trigger)].load(Ordering::Relaxed)
    }

    /// Counts `n` batches queued to subscribers.
    pub fn queued(&self, n: u64) {
        self.queued_batches.fetch_add(n, Ordering::AcqRel);
    }

    /// Counts `n` batches leaving subscriber queues (taken for writing, evicted or dropped).
    pub fn unqueued(&self, n: u64) {
        if n > 0 && self.queued_batches.fetch_sub(n, Ordering::AcqRel) == n {
            self.queues_empty.notify_waiters();
        }
    }

    /// Batches queued across all subscriber queues now.
    pub fn queued_batches(&self) -> u64 {
        self.queued_batches.load(Ordering::Acquire)
    }

    /// Returns once no batch is queued to any subscriber (at once if none is).
    pub async fn wait_queues_empty(&self) {
        loop {
            let emptied = self.queues_empty.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.queued_batches() == 0 {
                return;
            }
            emptied.await;
        }
    }

    /// Charges `bytes` of a de-duplication window when they fit in `budget` with what all
    /// windows hold; nothing is charged when they do not.
    pub fn charge_dedup(&self, bytes: u64, budget: u64) -> bool {
        self.dedup_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |held| {
                held.checked_add(bytes).filter(|&total| total <= budget)
            })
            .is_ok()
    }

    /// Gives back `bytes` of a de-duplication window.
    pub fn dedup_freed(&self, bytes: u64) {
        if bytes > 0 {
            self.dedup_bytes.fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Records a change of the retained bytes.
    pub fn retained_changed(&self, change: isize) {
        if change >= 0 {
            self.retained_bytes
                .fetch_add(change.unsigned_abs() as u64, Ordering::AcqRel);
        } else {
            self.retained_bytes
                .fetch_sub(change.unsigned_abs() as u64, Ordering::AcqRel);
        }
    }
}

/// What the engine reports besides counts: one call per sealed batch and per written batch.
pub trait Observe: Send + Sync {
    /// A batch of `events` events and `bytes` payload bytes was sealed.
    fn batch_sealed(&self, events: usize, bytes: usize);
    /// A queued batch was written `latency` after it was queued.
    fn delivered(&self, latency: Duration);
}

/// An [`Observe`] that keeps nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct Unobserved;

impl Observe for Unobserved {
    fn batch_sealed(&self, _events: usize, _bytes: usize) {}
    fn delivered(&self, _latency: Duration) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_drain_wait_ends_when_the_last_batch_leaves() {
        let c = std::sync::Arc::new(Counters::new(1));
        c.wait_queues_empty().await;
        c.queued(2);
        let waiter = {
            let c = std::sync::Arc::clone(&c);
            tokio::spawn(async move { c.wait_queues_empty().await })
        };
        tokio::task::yield_now().await;
        c.unqueued(1);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        c.unqueued(1);
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken")
            .expect("joined");
    }

    #[test]
    fn retained_bytes_go_both_ways() {
        let c = Counters::new(1);
        c.retained_changed(100);
        c.retained_changed(-40);
        assert_eq!(c.retained_bytes.load(Ordering::Relaxed), 60);
    }
}
