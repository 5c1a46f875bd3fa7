//! What a publish request holds between its stream and its topic (or owner): its place in the
//! count the drain waits for ([`InFlight`]) and its bytes of `max_inflight_publish_bytes`
//! ([`Budget`]). A local request's bytes travel on into the topic ([`InFlight::take_budget`],
//! `pubsub::topic::Hold`) and are released once its batch is sealed and offered, so the budget
//! covers the topic channels and open batches too.
//!
//! A request is charged what it holds in memory ([`charge`]), not what it carried on the wire:
//! a batch of a million empty payloads is 4 MiB on the wire and about 68 MiB in memory until its
//! topic has sealed it, and charging its payload bytes (none) let a few thousand such frames
//! queue against a budget they hardly touched.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use starling_proto::DECODED_ITEM_BYTES;
use tokio::sync::{OwnedSemaphorePermit, TryAcquireError};

use crate::metrics::Metrics;
use crate::state::PublishGate;

/// What each payload of a request in flight costs besides its bytes: what decoding it cost (its
/// handle in the decoded request and its length prefix in the received frame,
/// [`DECODED_ITEM_BYTES`]) and its handle again in its topic's open batch (`pubsub::batcher`),
/// which holds the payloads until the batch is sealed, when the budget is released.
pub const ITEM_BYTES: usize = DECODED_ITEM_BYTES + std::mem::size_of::<Bytes>();

/// What a request of `items` payloads of `payload_bytes` bytes in all is charged of
/// `max_inflight_publish_bytes`: its bytes and [`ITEM_BYTES`] per payload (saturating).
pub const fn charge(payload_bytes: usize, items: usize) -> usize {
    payload_bytes.saturating_add(items.saturating_mul(ITEM_BYTES))
}

/// Counts one publish request in [`PublishGate::in_flight`] from before the drain check until
/// it has reached its topic (or its owner): a drain waits for the count to reach zero before it
/// flushes the topics, so nothing acked on receipt is still on its way when streams finish. It
/// also holds the request's bytes of `max_inflight_publish_bytes` ([`Budget`]) until then.
pub struct InFlight {
    gate: Arc<PublishGate>,
    /// Released with the request (dropped with it).
    _budget: Option<Budget>,
}

impl InFlight {
    /// Counts a request holding `budget` (none for a peer's).
    pub fn new(gate: &Arc<PublishGate>, budget: Option<Budget>) -> InFlight {
        gate.in_flight.fetch_add(1, Ordering::SeqCst);
        std::sync::atomic::fence(Ordering::SeqCst);
        InFlight {
            gate: Arc::clone(gate),
            _budget: budget,
        }
    }
}

impl InFlight {
    /// Hands the request's bytes of the budget on (to its topic message), keeping its place in
    /// the count the drain waits for.
    pub fn take_budget(&mut self) -> Option<Budget> {
        self._budget.take()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.gate.leave();
    }
}

/// A publish request's share of `max_inflight_publish_bytes`: its [`charge`] (at least 1, at
/// most the whole budget), held from when its frame was read until its batch was sealed and
/// offered by its topic (or it reached its owner), and counted in
/// `starling_publish_inflight_bytes` meanwhile.
pub struct Budget {
    _permit: OwnedSemaphorePermit,
    gauge: prometheus::IntGauge,
    bytes: i64,
}

impl Budget {
    /// Takes `bytes` of the budget, waiting (and counting the wait) while it is exhausted, so the
    /// stream is not read meanwhile and QUIC flow control holds its client back. `None` once
    /// the budget is closed (never, in practice).
    pub async fn take(gate: &PublishGate, metrics: &Metrics, bytes: usize) -> Option<Budget> {
        let whole = gate.budget_bytes;
        let n = u32::try_from(bytes.clamp(1, whole.max(1))).unwrap_or(u32::MAX);
        let sem = Arc::clone(&gate.budget);
        let permit = match Arc::clone(&sem).try_acquire_many_owned(n) {
            Ok(p) => p,
            Err(TryAcquireError::NoPermits) => {
                metrics.publish_budget_waits.inc();
                sem.acquire_many_owned(n).await.ok()?
            }
            Err(TryAcquireError::Closed) => return None,
        };
        let gauge = metrics.publish_inflight_bytes.clone();
        gauge.add(i64::from(n));
        Some(Budget {
            _permit: permit,
            gauge,
            bytes: i64::from(n),
        })
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        self.gauge.sub(self.bytes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_charged_its_payloads_and_each_item_it_holds() {
        assert_eq!(ITEM_BYTES, 68);
        assert_eq!(charge(1000, 1), 1068);
        // The amplification of issue 33: a million empty payloads, 4 MiB on the wire, were
        // charged 1 byte; they hold about 68 MiB until their batch is sealed.
        assert_eq!(charge(0, 1 << 20), 68 << 20);
        assert_eq!(charge(usize::MAX, 2), usize::MAX);
    }

    #[tokio::test]
    async fn a_batch_of_empty_payloads_takes_its_items_of_the_budget() {
        let metrics = Metrics::new().unwrap();
        let pending =
            crate::pubsub::pending_acks::PendingAcks::new(1 << 20, 1, metrics.pending_acks_shown());
        let gate = PublishGate::new(1 << 20, pending);
        let held = Budget::take(&gate, &metrics, charge(0, 1000))
            .await
            .unwrap();
        assert_eq!(metrics.publish_inflight_bytes.get(), 68_000);
        assert_eq!(gate.budget.available_permits(), (1 << 20) - 68_000);
        drop(held);
        assert_eq!(metrics.publish_inflight_bytes.get(), 0);
        assert_eq!(gate.budget.available_permits(), 1 << 20);
    }
}
