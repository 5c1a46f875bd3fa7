//! What a publish request holds between its stream and its topic (or owner): its place in the
//! count the drain waits for ([`InFlight`]) and its bytes of `max_inflight_publish_bytes`
//! ([`Budget`]). A local request's bytes travel on into the topic ([`InFlight::take_budget`],
//! `pubsub::topic::Hold`) and are released once its batch is sealed and offered, so the budget
//! covers the topic channels and open batches too.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::sync::{OwnedSemaphorePermit, TryAcquireError};

use crate::metrics::Metrics;
use crate::state::PublishGate;

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

/// A publish request's share of `max_inflight_publish_bytes`: its payload bytes (at least 1,
/// at most the whole budget), held from when its frame was read until its batch was sealed and
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
