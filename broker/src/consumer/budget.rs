//! The broker-wide byte budget of durable consumers' pending messages
//! (`consumer_pending_max_bytes`): every consumer task charges each payload it keeps for
//! delivery (its bytes plus [`PENDING_OVERHEAD`]) before it offers the message, and releases
//! it once the message is resolved. A task whose charge does not fit stops reading its log
//! there (the message stays in the log, read again once acks free room), so the memory the
//! consumers hold is bounded whatever their windows (`max_ack_pending`) add up to. The
//! count is this module's own atomic; the gauge only shows it.

use std::sync::atomic::{AtomicU64, Ordering};

use prometheus::{IntCounter, IntGauge};

/// Bytes charged per pending message besides its payload: its map entry here and in the
/// state machine, and its `Bytes` handle.
pub const PENDING_OVERHEAD: u64 = 96;

/// The budget, shared by every consumer task of the broker.
#[derive(Debug)]
pub struct PendingBudget {
    used: AtomicU64,
    limit: u64,
    held: IntGauge,
    waits: IntCounter,
}

impl PendingBudget {
    /// A budget of `limit` bytes, shown in `held` (`starling_consumer_pending_bytes`), each
    /// refused charge counted in `waits` (`starling_consumer_budget_waits_total`).
    pub fn new(limit: u64, held: IntGauge, waits: IntCounter) -> PendingBudget {
        PendingBudget {
            used: AtomicU64::new(0),
            limit,
            held,
            waits,
        }
    }

    /// What a payload of `len` bytes is charged.
    pub fn cost(len: usize) -> u64 {
        len as u64 + PENDING_OVERHEAD
    }

    /// Charges `bytes` if they fit; false (and counted) when they do not.
    pub fn try_charge(&self, bytes: u64) -> bool {
        let fits = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&n| n <= self.limit)
            })
            .is_ok();
        if fits {
            self.held.add(bytes as i64);
        } else {
            self.waits.inc();
        }
        fits
    }

    /// Gives back `bytes` charged before.
    pub fn release(&self, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                Some(used.saturating_sub(bytes))
            });
        self.held.sub(bytes as i64);
    }

    /// Bytes charged now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_within_the_limit_and_counts_what_does_not_fit() {
        let held = IntGauge::new("held", "h").unwrap_or_else(|e| panic!("{e}"));
        let waits = IntCounter::new("waits", "w").unwrap_or_else(|e| panic!("{e}"));
        let b = PendingBudget::new(1_000, held.clone(), waits.clone());
        assert!(b.try_charge(PendingBudget::cost(500)));
        assert!(b.try_charge(PendingBudget::cost(300)));
        assert_eq!(b.used(), 800 + 2 * PENDING_OVERHEAD);
        assert!(!b.try_charge(PendingBudget::cost(1)), "past the limit");
        assert_eq!(waits.get(), 1);
        b.release(PendingBudget::cost(500));
        assert_eq!(b.used(), 300 + PENDING_OVERHEAD);
        assert_eq!(held.get(), (300 + PENDING_OVERHEAD) as i64);
        assert!(b.try_charge(PendingBudget::cost(400)));
        assert!(
            !b.try_charge(u64::MAX),
            "an overflowing charge does not fit"
        );
    }
}
