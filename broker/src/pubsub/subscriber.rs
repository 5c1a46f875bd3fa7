//! One subscription: its bounded queue of encoded EventBatches, the slow-subscriber policy, and
//! the QUIC stream the batches are written to.
//!
//! The queue holds shared, already encoded frames ([`Frames`]), so fanout costs a reference count
//! per subscriber, not a copy. A subscriber is pinned to one writer lane for its whole life and
//! is handed to that lane at most once at a time (the `scheduled` flag), which is what keeps its
//! batches in order. Live batches are also charged to the broker-wide
//! [`QueueBudget`](crate::pubsub::queue_budget::QueueBudget): a batch that does not fit it is
//! handled like one that does not fit the queue.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use bytes::Bytes;
use parking_lot::Mutex;
use starling_config::SlowSubscriberPolicy;
use tokio::sync::Notify;

use crate::pubsub::counters::{Counters, DropReason};
use crate::pubsub::queue_budget::QueueBudget;

/// The bytes of one queued item, always shared, never copied: one EventBatch frame (live
/// fan-out, the same `Bytes` for every subscriber of the topic), or a run of retained frames
/// written back to back (a replay: the retained tail's own `Bytes`, so however many
/// subscribers resume, the tail is held once and counted once, in `starling_retained_bytes`).
#[derive(Debug, Clone)]
pub enum Frames {
    /// One frame.
    One(Bytes),
    /// Consecutive frames, in order.
    Run(Arc<[Bytes]>),
}

impl Frames {
    /// Total bytes.
    pub fn len(&self) -> usize {
        match self {
            Frames::One(b) => b.len(),
            Frames::Run(run) => run.iter().map(Bytes::len).sum(),
        }
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the frames (reference counts, not bytes) to `out`, in order.
    pub fn push_into(&self, out: &mut Vec<Bytes>) {
        match self {
            Frames::One(b) => out.push(b.clone()),
            Frames::Run(run) => out.extend(run.iter().cloned()),
        }
    }
}

/// One encoded EventBatch (or a replay's run of them) waiting for its lane.
#[derive(Debug, Clone)]
pub struct Queued {
    /// The frames, shared with every other subscriber of the topic and with the retained tail.
    pub frame: Frames,
    /// Events in the batch.
    pub events: u32,
    /// When it entered this subscriber's queue.
    pub enqueued: Instant,
}

/// What happened to a batch offered to a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Queued.
    Queued,
    /// Queued after evicting the oldest batch (`drop_old`).
    QueuedDroppedOld,
    /// Refused: queue full under `drop_new`.
    DroppedNew,
    /// The subscriber is closed.
    Closed,
}

/// Result of offering a batch to a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offer {
    /// What happened to the batch.
    pub outcome: Outcome,
    /// Whether the caller must hand the subscriber to its lane (it was idle).
    pub schedule: bool,
}

impl Offer {
    fn just(outcome: Outcome) -> Self {
        Offer {
            outcome,
            schedule: false,
        }
    }
}

#[derive(Debug, Default)]
struct State {
    /// Each batch with what it was charged to the queue budget (0 for a replay run).
    queue: VecDeque<(Queued, u64)>,
    scheduled: bool,
}

/// A live subscription.
pub struct Subscriber {
    /// Broker-unique subscription id.
    pub id: u64,
    /// The connection it arrived on.
    pub conn_id: u64,
    /// Its writer lane.
    pub lane: usize,
    /// The topic.
    pub topic: Arc<str>,
    policy: SlowSubscriberPolicy,
    capacity: usize,
    state: Mutex<State>,
    space: Notify,
    /// Notified when the lane takes the last queued batch, and on close.
    emptied: Notify,
    budget: Arc<QueueBudget>,
    closed: AtomicBool,
    /// The stream EventBatches are written to. Locked only by the subscriber's lane (or the
    /// task that finishes a stalled write).
    pub stream: tokio::sync::Mutex<quinn::SendStream>,
    counters: Arc<Counters>,
}

impl Subscriber {
    /// A new subscription with an empty queue.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        id: u64,
        conn_id: u64,
        lane: usize,
        topic: Arc<str>,
        policy: SlowSubscriberPolicy,
        capacity: usize,
        stream: quinn::SendStream,
        counters: Arc<Counters>,
        budget: Arc<QueueBudget>,
    ) -> Self {
        Subscriber {
            id,
            conn_id,
            lane,
            topic,
            policy,
            capacity: capacity.max(1),
            state: Mutex::new(State::default()),
            space: Notify::new(),
            emptied: Notify::new(),
            budget,
            closed: AtomicBool::new(false),
            stream: tokio::sync::Mutex::new(stream),
            counters,
        }
    }

    /// Offers a batch without waiting. Under `block` a full queue (or a full queue budget)
    /// returns the batch back.
    fn try_offer(&self, item: Queued) -> Result<Offer, Queued> {
        if self.is_closed() {
            return Ok(Offer::just(Outcome::Closed));
        }
        let charge = match &item.frame {
            Frames::One(b) => self.budget.charge_for(b.len()),
            Frames::Run(_) => 0,
        };
        let mut st = self.state.lock();
        let mut outcome = Outcome::Queued;
        // Batches evicted for this one, uncounted until it is counted in (the count of queued
        // batches never passes through zero on the way, which would wake the drain).
        let mut evicted_batches = 0u64;
        let full = st.queue.len() >= self.capacity;
        let fits = !full && (charge == 0 || self.budget.try_take(charge));
        if !fits {
            let (new, old) = if full {
                (DropReason::QueueFullNew, DropReason::QueueFullOld)
            } else {
                (DropReason::QueueBudget, DropReason::QueueBudget)
            };
            match self.policy {
                SlowSubscriberPolicy::Block => return Err(item),
                SlowSubscriberPolicy::DropNew => {
                    self.counters.drop_events(new, item.events.into());
                    return Ok(Offer::just(Outcome::DroppedNew));
                }
                SlowSubscriberPolicy::DropOld => {
                    // Evict this subscriber's oldest batches until the new one fits the queue
                    // and the budget; with nothing left to evict it is dropped instead.
                    let mut placed = false;
                    loop {
                        let room = st.queue.len() < self.capacity;
                        if room && (charge == 0 || self.budget.try_take(charge)) {
                            placed = true;
                            break;
                        }
                        let Some((evicted, freed)) = st.queue.pop_front() else {
                            break;
                        };
                        self.budget.release(freed);
                        self.counters.drop_events(old, evicted.events.into());
                        evicted_batches += 1;
                        outcome = Outcome::QueuedDroppedOld;
                    }
                    if !placed {
                        self.counters.unqueued(evicted_batches);
                        self.counters.drop_events(new, item.events.into());
                        return Ok(Offer::just(Outcome::DroppedNew));
                    }
                }
            }
        }
        st.queue.push_back((item, charge));
        self.counters.queued(1);
        self.counters.unqueued(evicted_batches);
        let schedule = !st.scheduled;
        st.scheduled = true;
        Ok(Offer { outcome, schedule })
    }

    /// Offers a batch, waiting for room (in the queue and in the queue budget) under the
    /// `block` policy.
    pub async fn offer(&self, mut item: Queued) -> Offer {
        loop {
            let notified = self.space.notified();
            let freed = self.budget.freed().notified();
            tokio::pin!(notified);
            tokio::pin!(freed);
            notified.as_mut().enable();
            freed.as_mut().enable();
            match self.try_offer(item) {
                Ok(offer) => return offer,
                Err(back) => {
                    item = back;
                    if self.is_closed() {
                        return Offer::just(Outcome::Closed);
                    }
                    tokio::select! {
                        _ = &mut notified => {}
                        _ = &mut freed => {}
                    }
                }
            }
        }
    }

    /// Takes up to `max` queued batches for writing. An empty result clears the scheduled flag:
    /// the subscriber is no longer with its lane until the next offer.
    pub fn take(&self, max: usize) -> Vec<Queued> {
        let mut st = self.state.lock();
        let n = st.queue.len().min(max.max(1));
        if n == 0 {
            st.scheduled = false;
            return Vec::new();
        }
        let taken: Vec<(Queued, u64)> = st.queue.drain(..n).collect();
        let emptied = st.queue.is_empty();
        drop(st);
        if emptied {
            self.emptied.notify_waiters();
        }
        self.budget.release(taken.iter().map(|(_, c)| c).sum());
        let out: Vec<Queued> = taken.into_iter().map(|(q, _)| q).collect();
        self.counters.unqueued(out.len() as u64);
        self.space.notify_one();
        out
    }

    /// Batches waiting.
    pub fn queued(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Returns once no batch waits in the queue (taken by the lane, or the subscriber closed);
    /// at once if none does.
    pub async fn wait_empty(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.queued() == 0 || self.is_closed() {
                return;
            }
            emptied.await;
        }
    }

    /// Marks the subscriber closed, discards its queue (counting the dropped events) and wakes
    /// a publisher blocked on it.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let dropped: Vec<(Queued, u64)> = self.state.lock().queue.drain(..).collect();
        self.budget.release(dropped.iter().map(|(_, c)| c).sum());
        if !dropped.is_empty() {
            let events: u64 = dropped.iter().map(|(q, _)| u64::from(q.events)).sum();
            self.counters
                .drop_events(DropReason::SubscriberClosed, events);
            self.counters.unqueued(dropped.len() as u64);
        }
        self.space.notify_waiters();
        self.space.notify_one();
        self.emptied.notify_waiters();
    }

    /// Whether the subscriber is closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}
