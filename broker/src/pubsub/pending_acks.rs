//! The budget of `persisted` acks waiting for their durable log's fsync
//! (`max_pending_persisted_ack_bytes`, with a per-connection share,
//! `max_pending_persisted_ack_bytes_per_connection`).
//!
//! Such an ack is charged [`PENDING_ACK_BYTES`] (what it holds in memory) by its publish
//! stream before the request is handed on, and holds the charge ([`PendingCharge`]) until its
//! ack or refusal is written; once it is in its log's wait list it gives its stream's
//! request-window permit back (`pubsub::ack`). So the acks waiting for an fsync are bounded by
//! memory, not by `pub_queue_depth`, and one publish stream can keep more of them waiting than
//! its window holds. A stream whose charge does not fit waits for room (it reads no further
//! meanwhile, so QUIC flow control slows its client): nothing is refused, dropped or acked
//! early. The semaphores decide; the gauge and the wait counter only show it.

use std::sync::Arc;

use prometheus::{IntCounter, IntGauge};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError};

use crate::metrics::Metrics;
pub use crate::pubsub::ack::PENDING_ACK_BYTES;

/// The charge of one ack, in permits of one byte.
const CHARGE: u32 = PENDING_ACK_BYTES as u32;

/// The broker-wide budget, shared by every publish stream.
#[derive(Debug)]
pub struct PendingAcks {
    whole: Arc<Semaphore>,
    bytes: usize,
    gauge: IntGauge,
    waits_broker: IntCounter,
    waits_connection: IntCounter,
}

/// One connection's share of the budget.
#[derive(Debug, Clone)]
pub struct ConnShare {
    share: Arc<Semaphore>,
}

impl ConnShare {
    /// A share of `bytes` (at least one ack's charge).
    pub fn new(bytes: u64) -> ConnShare {
        ConnShare {
            share: Arc::new(Semaphore::new(permits(bytes))),
        }
    }
}

/// One ack's charge: given back when dropped (with its ack's written frame).
#[derive(Debug)]
pub struct PendingCharge {
    _whole: OwnedSemaphorePermit,
    _share: Option<OwnedSemaphorePermit>,
    gauge: IntGauge,
}

impl Drop for PendingCharge {
    fn drop(&mut self) {
        self.gauge.sub(i64::from(CHARGE));
    }
}

/// `bytes` as permits: at least one charge, at most what a semaphore holds.
fn permits(bytes: u64) -> usize {
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .clamp(PENDING_ACK_BYTES, Semaphore::MAX_PERMITS)
}

impl PendingAcks {
    /// A budget of `bytes`, shown in `metrics`.
    pub fn new(bytes: u64, metrics: &Metrics) -> PendingAcks {
        let waits = |scope: &str| {
            metrics
                .persisted_ack_budget_waits
                .with_label_values(&[scope])
        };
        let n = permits(bytes);
        PendingAcks {
            whole: Arc::new(Semaphore::new(n)),
            bytes: n,
            gauge: metrics.persisted_acks_pending_bytes.clone(),
            waits_broker: waits("broker"),
            waits_connection: waits("connection"),
        }
    }

    /// Charges one ack to `share` (none for a peer's connection) and to the whole budget,
    /// waiting (and counting each wait) while either is exhausted: the share first, so a
    /// connection waiting for its own share holds nothing of the whole. `None` once closed
    /// (never, in practice).
    pub async fn take(&self, share: Option<&ConnShare>) -> Option<PendingCharge> {
        let share = match share {
            Some(s) => Some(acquire(&s.share, &self.waits_connection).await?),
            None => None,
        };
        let whole = acquire(&self.whole, &self.waits_broker).await?;
        self.gauge.add(i64::from(CHARGE));
        Some(PendingCharge {
            _whole: whole,
            _share: share,
            gauge: self.gauge.clone(),
        })
    }

    /// Bytes charged now.
    pub fn held(&self) -> usize {
        self.bytes - self.whole.available_permits()
    }
}

/// One charge of `sem`, at once if it fits, else counted in `waits` and awaited.
async fn acquire(sem: &Arc<Semaphore>, waits: &IntCounter) -> Option<OwnedSemaphorePermit> {
    match Arc::clone(sem).try_acquire_many_owned(CHARGE) {
        Ok(p) => Some(p),
        Err(TryAcquireError::NoPermits) => {
            waits.inc();
            Arc::clone(sem).acquire_many_owned(CHARGE).await.ok()
        }
        Err(TryAcquireError::Closed) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_connection_at_its_share_waits_and_others_go_on() {
        let metrics = Metrics::new().unwrap();
        let budget = PendingAcks::new(10 * PENDING_ACK_BYTES as u64, &metrics);
        let one = ConnShare::new(2 * PENDING_ACK_BYTES as u64);
        let other = ConnShare::new(2 * PENDING_ACK_BYTES as u64);
        let a = budget.take(Some(&one)).await.unwrap();
        let _b = budget.take(Some(&one)).await.unwrap();
        let waits = |scope: &str| {
            metrics
                .persisted_ack_budget_waits
                .with_label_values(&[scope])
                .get()
        };
        // The third of `one` waits for its share; `other` is served meanwhile.
        let third = budget.take(Some(&one));
        tokio::pin!(third);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut third)
                .await
                .is_err()
        );
        assert_eq!(waits("connection"), 1);
        let _c = budget.take(Some(&other)).await.unwrap();
        assert_eq!(budget.held(), 3 * PENDING_ACK_BYTES);
        assert_eq!(
            metrics.persisted_acks_pending_bytes.get(),
            3 * PENDING_ACK_BYTES as i64
        );
        drop(a);
        let _d = third.await.unwrap();
        assert_eq!(budget.held(), 3 * PENDING_ACK_BYTES);
        assert_eq!(waits("broker"), 0);
    }

    #[tokio::test]
    async fn the_whole_budget_holds_peers_and_shares_alike() {
        let metrics = Metrics::new().unwrap();
        let budget = PendingAcks::new(2 * PENDING_ACK_BYTES as u64, &metrics);
        let share = ConnShare::new(1 << 20);
        let a = budget.take(None).await.unwrap();
        let _b = budget.take(Some(&share)).await.unwrap();
        let next = budget.take(Some(&share));
        tokio::pin!(next);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut next)
                .await
                .is_err()
        );
        assert_eq!(
            metrics
                .persisted_ack_budget_waits
                .with_label_values(&["broker"])
                .get(),
            1
        );
        drop(a);
        let _c = next.await.unwrap();
        assert_eq!(budget.held(), 2 * PENDING_ACK_BYTES);
    }
}
