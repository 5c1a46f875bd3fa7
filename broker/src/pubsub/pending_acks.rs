//! The budget of `persisted` acks waiting for their durable log's fsync
//! (`max_pending_persisted_ack_bytes`, with a per-connection share,
//! `max_pending_persisted_ack_bytes_per_connection`).
//!
//! Such an ack is charged what it holds in memory (`pubsub::ack::PENDING_ACK_BYTES`) by its publish
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

/// The broker-wide budget, shared by every publish stream.
#[derive(Debug)]
pub struct PendingAcks {
    whole: Arc<Semaphore>,
    bytes: usize,
    /// What one ack is charged, in permits of one byte.
    charge: u32,
    gauge: IntGauge,
    waits_broker: IntCounter,
    waits_connection: IntCounter,
}

/// Where the budget shows what it holds and counts its waits
/// (`starling_persisted_acks_pending_bytes`, `starling_persisted_ack_budget_waits_total`).
#[derive(Debug, Clone)]
pub struct Shown {
    /// Bytes charged now.
    pub held: IntGauge,
    /// Waits at the whole budget (`scope="broker"`).
    pub waits_broker: IntCounter,
    /// Waits at a connection's share (`scope="connection"`).
    pub waits_connection: IntCounter,
}

/// One connection's share of the budget.
#[derive(Debug, Clone)]
pub struct ConnShare {
    share: Arc<Semaphore>,
}

impl ConnShare {
    /// A share of `bytes` (at least one `charge`).
    pub fn new(bytes: u64, charge: usize) -> ConnShare {
        ConnShare {
            share: Arc::new(Semaphore::new(permits(bytes, charge))),
        }
    }
}

/// One ack's charge: given back when dropped (with its ack's written frame).
#[derive(Debug)]
pub struct PendingCharge {
    /// The whole budget's permits: as many as the bytes charged.
    whole: OwnedSemaphorePermit,
    _share: Option<OwnedSemaphorePermit>,
    gauge: IntGauge,
}

impl Drop for PendingCharge {
    fn drop(&mut self) {
        let bytes = i64::try_from(self.whole.num_permits()).unwrap_or(i64::MAX);
        self.gauge.sub(bytes);
    }
}

/// `bytes` as permits: at least one `charge` (so a charge always fits once the others are
/// released), at most what a semaphore holds.
fn permits(bytes: u64, charge: usize) -> usize {
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .clamp(charge.max(1), Semaphore::MAX_PERMITS)
}

impl PendingAcks {
    /// A budget of `bytes`, each ack charged `charge` bytes (`pubsub::ack::PENDING_ACK_BYTES`),
    /// shown in `shown`.
    pub fn new(bytes: u64, charge: usize, shown: Shown) -> PendingAcks {
        let n = permits(bytes, charge);
        PendingAcks {
            whole: Arc::new(Semaphore::new(n)),
            bytes: n,
            charge: u32::try_from(charge.max(1)).unwrap_or(u32::MAX),
            gauge: shown.held,
            waits_broker: shown.waits_broker,
            waits_connection: shown.waits_connection,
        }
    }

    /// Charges one ack to `share` (none for a peer's connection) and to the whole budget,
    /// waiting (and counting each wait) while either is exhausted: the share first, so a
    /// connection waiting for its own share holds nothing of the whole. `None` once closed
    /// (never, in practice).
    pub async fn take(&self, share: Option<&ConnShare>) -> Option<PendingCharge> {
        let n = self.charge;
        let share = match share {
            Some(s) => Some(acquire(&s.share, n, &self.waits_connection).await?),
            None => None,
        };
        let whole = acquire(&self.whole, n, &self.waits_broker).await?;
        self.gauge.add(i64::from(n));
        Some(PendingCharge {
            whole,
            _share: share,
            gauge: self.gauge.clone(),
        })
    }

    /// Bytes charged now.
    pub fn held(&self) -> usize {
        self.bytes - self.whole.available_permits()
    }
}

/// `n` permits of `sem`, at once if they fit, else counted in `waits` and awaited.
async fn acquire(sem: &Arc<Semaphore>, n: u32, waits: &IntCounter) -> Option<OwnedSemaphorePermit> {
    match Arc::clone(sem).try_acquire_many_owned(n) {
        Ok(p) => Some(p),
        Err(TryAcquireError::NoPermits) => {
            waits.inc();
            Arc::clone(sem).acquire_many_owned(n).await.ok()
        }
        Err(TryAcquireError::Closed) => None,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const ACK: usize = 400;

    fn shown() -> Shown {
        Shown {
            held: IntGauge::new("held", "held").unwrap(),
            waits_broker: IntCounter::new("broker", "broker").unwrap(),
            waits_connection: IntCounter::new("connection", "connection").unwrap(),
        }
    }

    #[tokio::test]
    async fn a_connection_at_its_share_waits_and_others_go_on() {
        let shown = shown();
        let budget = PendingAcks::new(10 * ACK as u64, ACK, shown.clone());
        let one = ConnShare::new(2 * ACK as u64, ACK);
        let other = ConnShare::new(2 * ACK as u64, ACK);
        let a = budget.take(Some(&one)).await.unwrap();
        let _b = budget.take(Some(&one)).await.unwrap();
        // The third of `one` waits for its share; `other` is served meanwhile.
        let third = budget.take(Some(&one));
        tokio::pin!(third);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut third)
                .await
                .is_err()
        );
        assert_eq!(shown.waits_connection.get(), 1);
        let _c = budget.take(Some(&other)).await.unwrap();
        assert_eq!(budget.held(), 3 * ACK);
        assert_eq!(shown.held.get(), 3 * ACK as i64);
        drop(a);
        let _d = third.await.unwrap();
        assert_eq!(budget.held(), 3 * ACK);
        assert_eq!(shown.waits_broker.get(), 0);
    }

    #[tokio::test]
    async fn the_whole_budget_holds_peers_and_shares_alike() {
        let shown = shown();
        let budget = PendingAcks::new(2 * ACK as u64, ACK, shown.clone());
        let share = ConnShare::new(1 << 20, ACK);
        let a = budget.take(None).await.unwrap();
        let b = budget.take(Some(&share)).await.unwrap();
        let next = budget.take(Some(&share));
        tokio::pin!(next);
        assert!(
            tokio::time::timeout(Duration::from_millis(20), &mut next)
                .await
                .is_err()
        );
        assert_eq!(shown.waits_broker.get(), 1);
        drop(a);
        let c = next.await.unwrap();
        assert_eq!(budget.held(), 2 * ACK);
        drop((b, c));
        assert_eq!(shown.held.get(), 0);
    }

    #[tokio::test]
    async fn a_share_smaller_than_one_charge_still_takes_one() {
        let budget = PendingAcks::new(1, ACK, shown());
        let share = ConnShare::new(1, ACK);
        let one = tokio::time::timeout(Duration::from_secs(1), budget.take(Some(&share))).await;
        assert!(matches!(one, Ok(Some(_))));
    }
}
