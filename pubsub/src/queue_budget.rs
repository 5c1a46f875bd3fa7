//! The broker-wide budget of bytes queued for subscribers (`subscriber_queue_budget_bytes`).
//!
//! Every live EventBatch queued for a subscriber takes its encoded size from the budget, and
//! gives it back when the subscriber's lane takes it for writing or the subscriber closes. A
//! batch shared by n subscribers counts n times (it is in memory once): the budget bounds the
//! worst case, where each queue holds batches nobody else holds. Replays are not charged: they
//! are runs of the retained tail's own `Bytes`, counted in `replay_max_total_bytes`.
//!
//! A batch that does not fit is treated like a full subscriber queue (the slow-subscriber
//! policy applies; `block` waits on [`QueueBudget::freed`]). A batch larger than the whole
//! budget is charged the whole budget, so it still passes once everything else has drained.
//! The bytes held ([`QueueBudget::used`]) are exported as `starling_subscriber_queued_bytes`.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::Notify;

/// The budget.
pub struct QueueBudget {
    cap: u64,
    used: AtomicU64,
    freed: Notify,
}

impl QueueBudget {
    /// A budget of `cap` bytes (at least 1).
    pub fn new(cap: u64) -> QueueBudget {
        QueueBudget {
            cap: cap.max(1),
            used: AtomicU64::new(0),
            freed: Notify::new(),
        }
    }

    /// What a batch of `bytes` is charged: its size, at most the whole budget.
    pub fn charge_for(&self, bytes: usize) -> u64 {
        (bytes as u64).clamp(1, self.cap)
    }

    /// Takes `charge` bytes if they fit.
    pub fn try_take(&self, charge: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                (used + charge <= self.cap).then_some(used + charge)
            })
            .is_ok()
    }

    /// Gives `charge` bytes back and wakes whoever waits for room.
    pub fn release(&self, charge: u64) {
        if charge == 0 {
            return;
        }
        self.used.fetch_sub(charge, Ordering::AcqRel);
        self.freed.notify_waiters();
    }

    /// Notified whenever bytes are given back.
    pub fn freed(&self) -> &Notify {
        &self.freed
    }

    /// Bytes held now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(cap: u64) -> QueueBudget {
        QueueBudget::new(cap)
    }

    #[test]
    fn takes_until_full_and_gives_back() {
        let b = budget(100);
        assert!(b.try_take(60));
        assert!(!b.try_take(41), "past the cap");
        assert!(b.try_take(40));
        assert_eq!(b.used(), 100);
        b.release(60);
        assert!(b.try_take(50));
        assert_eq!(b.used(), 90);
    }

    #[test]
    fn a_batch_larger_than_the_budget_is_charged_the_whole_budget() {
        let b = budget(100);
        assert_eq!(b.charge_for(1_000), 100);
        assert_eq!(b.charge_for(0), 1);
        assert!(b.try_take(b.charge_for(1_000)));
        assert!(!b.try_take(1));
    }
}
