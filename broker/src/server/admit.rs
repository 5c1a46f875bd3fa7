//! Connection admission: whether a new QUIC connection attempt is served, asked to prove its
//! address first (a QUIC Retry), or refused.
//!
//! The decision is a pure function of the broker's phase, the connections already admitted and
//! not yet ended, the handshakes in progress and whether the attempt's address is already
//! validated. The counts are the broker's own, taken at admission: quinn's
//! `Endpoint::open_connections` only counts a connection once its task has polled it, so in a
//! burst it lags behind the attempts already admitted (measured: 91 admitted under a cap of
//! 64). The budgets come from the config: `max_connections` and `handshake_retry_threshold`; an
//! attempt that is served then reserves its windows from `connection_buffer_budget_bytes`
//! (`server::buffers`). Each refusal and each Retry moves a counter
//! (`starling_quic_refused_total{reason}`, `starling_quic_retries_total`).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::metrics::quic_refusal;

/// Why a connection attempt was refused: the label of `starling_quic_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The broker is starting or draining.
    NotServing,
    /// `max_connections` connections are open.
    MaxConnections,
    /// `connection_buffer_budget_bytes` has no room for even the smallest windows (see
    /// `server::buffers`).
    BufferBudget,
}

impl Refusal {
    /// The metric label.
    pub const fn label(self) -> &'static str {
        match self {
            Refusal::NotServing => quic_refusal::NOT_SERVING,
            Refusal::MaxConnections => quic_refusal::MAX_CONNECTIONS,
            Refusal::BufferBudget => quic_refusal::CONNECTION_BUFFER_BUDGET,
        }
    }
}

/// What to do with one connection attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Serve it.
    Accept,
    /// Answer with a QUIC Retry; the client comes back with a token proving its address.
    Retry,
    /// Refuse it (QUIC `CONNECTION_REFUSED`).
    Refuse(Refusal),
}

/// The broker's state as one attempt arrives.
#[derive(Debug, Clone, Copy)]
pub struct Load {
    /// Whether the broker serves new connections (not starting, not draining).
    pub serving: bool,
    /// Connections admitted and not yet ended, handshaking ones included.
    pub open: usize,
    /// Handshakes in progress.
    pub handshaking: usize,
    /// Whether the attempt already proved its address (it carries a Retry token).
    pub validated: bool,
}

/// The budgets, from the config.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `max_connections`.
    pub max_connections: usize,
    /// `handshake_retry_threshold`.
    pub retry_threshold: usize,
}

/// Decides one attempt. A validated attempt is never asked again; the connection budget applies
/// to every attempt, validated or not, so Retry cannot be used to get past it.
pub fn decide(load: Load, limits: Limits) -> Admission {
    if !load.serving {
        Admission::Refuse(Refusal::NotServing)
    } else if load.open >= limits.max_connections {
        Admission::Refuse(Refusal::MaxConnections)
    } else if !load.validated && load.handshaking >= limits.retry_threshold {
        Admission::Retry
    } else {
        Admission::Accept
    }
}

/// Counts things in progress: admitted connections, or handshakes. Each one holds a [`Slot`]
/// until it is over, whichever way it ends.
#[derive(Debug, Default)]
pub struct InProgress(Arc<AtomicUsize>);

impl InProgress {
    /// How many are in progress now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one more until the returned slot drops.
    pub fn enter(&self) -> Slot {
        self.0.fetch_add(1, Ordering::Relaxed);
        Slot(Arc::clone(&self.0))
    }

    /// Counts one more until the returned slot drops, unless `max` are in progress already.
    pub fn try_enter(&self, max: usize) -> Option<Slot> {
        self.0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| Slot(Arc::clone(&self.0)))
    }
}

/// One thing in progress; dropping it ends the count.
#[derive(Debug)]
pub struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        max_connections: 10,
        retry_threshold: 4,
    };

    fn load(open: usize, handshaking: usize, validated: bool) -> Load {
        Load {
            serving: true,
            open,
            handshaking,
            validated,
        }
    }

    #[test]
    fn attempts_are_served_until_a_budget_is_reached() {
        assert_eq!(decide(load(0, 0, false), LIMITS), Admission::Accept);
        assert_eq!(decide(load(9, 3, false), LIMITS), Admission::Accept);
        assert_eq!(
            decide(load(10, 0, true), LIMITS),
            Admission::Refuse(Refusal::MaxConnections)
        );
        assert_eq!(decide(load(5, 4, false), LIMITS), Admission::Retry);
        assert_eq!(decide(load(5, 400, true), LIMITS), Admission::Accept);
        let stopping = Load {
            serving: false,
            ..load(0, 0, true)
        };
        assert_eq!(
            decide(stopping, LIMITS),
            Admission::Refuse(Refusal::NotServing)
        );
    }

    #[test]
    fn a_zero_threshold_asks_every_new_address_to_prove_itself() {
        let always = Limits {
            retry_threshold: 0,
            ..LIMITS
        };
        assert_eq!(decide(load(0, 0, false), always), Admission::Retry);
        assert_eq!(decide(load(0, 0, true), always), Admission::Accept);
    }

    #[test]
    fn a_slot_counts_until_it_drops() {
        let h = InProgress::default();
        let a = h.enter();
        let b = h.enter();
        assert_eq!(h.count(), 2);
        drop(a);
        assert_eq!(h.count(), 1);
        drop(b);
        assert_eq!(h.count(), 0);
    }

    #[test]
    fn try_enter_stops_at_the_maximum() {
        let h = InProgress::default();
        let a = h.try_enter(2);
        let b = h.try_enter(2);
        assert!(a.is_some() && b.is_some());
        assert!(h.try_enter(2).is_none());
        drop(a);
        assert!(h.try_enter(2).is_some());
    }
}
