//! One subscription: its bounded queue of encoded EventBatches, the slow-subscriber policy, and
//! the sink the batches are written to ([`SubscriberSink`]).
//!
//! The queue holds shared, already encoded frames ([`Frames`]), so fanout costs a reference count
//! per subscriber, not a copy. A subscriber is pinned to one writer lane for its whole life and
//! is handed to that lane at most once at a time (the `scheduled` flag), which is what keeps its
//! batches in order. Live batches are also charged to the broker-wide
//! [`QueueBudget`](crate::queue_budget::QueueBudget): a batch that does not fit it is
//! handled like one that does not fit the queue.
//!
//! The queue is the sink's only way in: the subscription handler's replies (`SubscribeOk`,
//! `Pong`, errors) are queued too ([`Subscriber::reply`], at most [`MAX_REPLIES`] waiting, outside
//! the batch capacity and never dropped by a policy), and the sink is finished through the queue
//! ([`Subscriber::end`]), after whatever was queued before. The sink itself has one writer at a
//! time: whoever takes a turn ([`Subscriber::take`]) holds it until it gives it back.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use parking_lot::Mutex;
use starling_config::SlowSubscriberPolicy;
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

use crate::counters::{Counters, DropReason};
use crate::queue_budget::QueueBudget;
use crate::sink::{SinkFuture, SubscriberSink};

/// Most handler replies waiting in one subscriber's queue; [`Subscriber::reply`] waits beyond
/// (a client that sends pings and never reads is pushed back, as a blocked write would).
pub const MAX_REPLIES: usize = 16;

/// The bytes of one queued item, always shared, never copied: one EventBatch frame (live
/// fan-out, the same `Bytes` for every subscriber of the topic), or a run of retained frames
/// written back to back (a replay: the retained tail's own `Bytes`, so however many
/// subscribers resume, the tail is held once and counted once, in `starling_retained_bytes`),
/// or a live batch after the frames that describe it: on a wildcard subscription the topic's
/// `BatchTopic` frame (encoded once per topic), and for a subscriber granted `HEADERS` the
/// batch's `EventHeaders` (encoded once per batch), then the shared EventBatch.
#[derive(Debug, Clone)]
pub enum Frames {
    /// One frame.
    One(Bytes),
    /// Consecutive frames, in order.
    Run(Arc<[Bytes]>),
    /// The frames written right before an EventBatch (its `BatchTopic`, its `EventHeaders`,
    /// or both back to back) and the EventBatch.
    Tagged(Bytes, Bytes),
}

impl Frames {
    /// Total bytes.
    pub fn len(&self) -> usize {
        match self {
            Frames::One(b) => b.len(),
            Frames::Run(run) => run.iter().map(Bytes::len).sum(),
            Frames::Tagged(tag, frame) => tag.len() + frame.len(),
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
            Frames::Tagged(tag, frame) => {
                out.push(tag.clone());
                out.push(frame.clone());
            }
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

/// One entry of a subscriber's queue.
enum Item {
    /// A batch (or a replay run) with what it was charged to the queue budget (0 for a run).
    Batch(Queued, u64),
    /// An encoded reply frame of the subscription handler.
    Reply(Bytes),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    /// `Item::Batch` entries in `queue` (what the capacity bounds).
    batches: usize,
    /// `Item::Reply` entries in `queue`.
    replies: usize,
    /// With its lane (or its writer): set by the offer or reply that made the queue non-empty,
    /// cleared by the turn that finds it empty.
    scheduled: bool,
    /// The sink, while nobody writes to it; `None` while a writer holds it, and for good once
    /// it broke or was finished.
    sink: Option<Box<dyn SubscriberSink>>,
    /// [`Subscriber::end`] was asked while a writer held the sink: the writer finishes it once
    /// the queue is written, and hands over the finish's future.
    ending: Option<oneshot::Sender<SinkFuture<'static, ()>>>,
}

/// A writer's turn at a subscriber ([`Subscriber::take`]).
pub enum Turn {
    /// Nothing to write: the subscriber is no longer with its lane.
    Idle,
    /// Write `bufs` (the taken batches' frames and replies, in queue order) to `sink`, then
    /// give the sink back ([`Subscriber::give_back`]) or, if it broke, drop it
    /// ([`Subscriber::lost`]).
    Write {
        /// The sink, held by this writer until given back.
        sink: Box<dyn SubscriberSink>,
        /// What to write, in order.
        bufs: Vec<Bytes>,
        /// The batches taken (for the delivery counts).
        batches: Vec<Queued>,
    },
    /// Everything queued is written and the end was asked for: finish the sink and hand the
    /// future to whoever asked.
    End {
        /// The sink, for good.
        sink: Box<dyn SubscriberSink>,
        /// Where the finish's future goes.
        ended: oneshot::Sender<SinkFuture<'static, ()>>,
    },
}

impl std::fmt::Debug for Turn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Turn::Idle => f.write_str("Idle"),
            Turn::Write { bufs, batches, .. } => f
                .debug_struct("Write")
                .field("bufs", &bufs.len())
                .field("batches", &batches.len())
                .finish(),
            Turn::End { .. } => f.write_str("End"),
        }
    }
}

/// The end of a subscriber's sink ([`Subscriber::end`]): completes once the far end has what
/// was written (or was given up on by the sink). Dropping it does not stop the end.
pub struct Ended {
    state: EndedState,
}

enum EndedState {
    /// Finished; waiting for the far end.
    Finishing(SinkFuture<'static, ()>),
    /// A writer will finish it.
    Pending(oneshot::Receiver<SinkFuture<'static, ()>>),
    /// Nothing to wait for.
    Done,
}

impl Ended {
    /// Waits for the end.
    pub async fn wait(self) {
        match self.state {
            EndedState::Finishing(f) => f.await,
            EndedState::Pending(rx) => {
                if let Ok(f) = rx.await {
                    f.await;
                }
            }
            EndedState::Done => {}
        }
    }
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
    /// Whether its connection was granted `HEADERS`: it receives each batch's `EventHeaders`.
    pub headers: bool,
    /// The queue group it is a member of, if any (see [`crate::group`]).
    pub group: Option<Arc<str>>,
    policy: SlowSubscriberPolicy,
    capacity: usize,
    state: Mutex<State>,
    /// Notified when the writer takes from the queue, and on close.
    space: Notify,
    /// Notified when the writer takes the last queued batch, and on close.
    emptied: Notify,
    budget: Arc<QueueBudget>,
    /// No more batches: closed (its queued batches discarded) or ending (they are written).
    closed: AtomicBool,
    counters: Arc<Counters>,
}

/// Who a subscriber is and where it is served.
#[derive(Debug, Clone)]
pub struct Identity {
    /// Broker-unique subscription id.
    pub id: u64,
    /// The connection it arrived on.
    pub conn_id: u64,
    /// Its writer lane.
    pub lane: usize,
    /// The topic.
    pub topic: Arc<str>,
    /// Whether its connection was granted `HEADERS`.
    pub headers: bool,
    /// The queue group it joins, if any.
    pub group: Option<Arc<str>>,
}

/// How a subscriber's queue is bounded.
#[derive(Debug, Clone, Copy)]
pub struct QueuePolicy {
    /// What a full queue does.
    pub policy: SlowSubscriberPolicy,
    /// Most batches queued (`subscriber_queue_capacity`).
    pub capacity: usize,
}

impl Subscriber {
    /// A new subscription with an empty queue, writing to `sink`.
    pub fn new(
        who: Identity,
        queue: QueuePolicy,
        sink: Box<dyn SubscriberSink>,
        counters: Arc<Counters>,
        budget: Arc<QueueBudget>,
    ) -> Self {
        Subscriber {
            id: who.id,
            conn_id: who.conn_id,
            lane: who.lane,
            topic: who.topic,
            headers: who.headers,
            group: who.group,
            policy: queue.policy,
            capacity: queue.capacity.max(1),
            state: Mutex::new(State {
                sink: Some(sink),
                ..State::default()
            }),
            space: Notify::new(),
            emptied: Notify::new(),
            budget,
            closed: AtomicBool::new(false),
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
            Frames::Tagged(tag, frame) => self.budget.charge_for(tag.len() + frame.len()),
            Frames::Run(_) => 0,
        };
        let mut st = self.state.lock();
        let mut outcome = Outcome::Queued;
        // Batches evicted for this one, uncounted until it is counted in (the count of queued
        // batches never passes through zero on the way, which would wake the drain).
        let mut evicted_batches = 0u64;
        let full = st.batches >= self.capacity;
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
                        let room = st.batches < self.capacity;
                        if room && (charge == 0 || self.budget.try_take(charge)) {
                            placed = true;
                            break;
                        }
                        let Some((evicted, freed)) = st.evict_oldest_batch() else {
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
        st.queue.push_back(Item::Batch(item, charge));
        st.batches += 1;
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

    /// Queues an encoded reply frame of the subscription handler after everything queued so
    /// far, waiting while [`MAX_REPLIES`] replies wait. True when the caller must hand the
    /// subscriber to its lane; false also when the sink is gone (nothing can be written).
    pub async fn reply(&self, frame: Bytes) -> bool {
        loop {
            let notified = self.space.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut st = self.state.lock();
                if st.sink.is_none() && !st.scheduled {
                    return false; // broken or finished
                }
                if st.replies < MAX_REPLIES {
                    st.queue.push_back(Item::Reply(frame));
                    st.replies += 1;
                    let schedule = !st.scheduled;
                    st.scheduled = true;
                    return schedule;
                }
            }
            notified.await;
        }
    }

    /// A writer's turn: up to `max` queued batches (with the replies between them) and the
    /// sink to write them to; or the end, once the queue is written; or nothing, which clears
    /// the scheduled flag (the subscriber is no longer with its lane until the next offer).
    pub fn take(&self, max: usize) -> Turn {
        let mut st = self.state.lock();
        if st.queue.is_empty() {
            if let Some(ended) = st.ending.take()
                && let Some(sink) = st.sink.take()
            {
                return Turn::End { sink, ended };
            }
            st.scheduled = false;
            return Turn::Idle;
        }
        let Some(sink) = st.sink.take() else {
            // Broken or finished: nothing queued can be written any more.
            let left = std::mem::take(&mut st.queue);
            st.batches = 0;
            st.replies = 0;
            st.scheduled = false;
            drop(st);
            self.discard(left);
            return Turn::Idle;
        };
        let (mut bufs, mut batches, mut charged) = (Vec::new(), Vec::new(), 0u64);
        while batches.len() < max.max(1) {
            match st.queue.pop_front() {
                Some(Item::Batch(q, charge)) => {
                    q.frame.push_into(&mut bufs);
                    charged += charge;
                    batches.push(q);
                }
                Some(Item::Reply(frame)) => {
                    bufs.push(frame);
                    st.replies -= 1;
                }
                None => break,
            }
        }
        st.batches -= batches.len();
        let emptied = st.batches == 0;
        drop(st);
        self.budget.release(charged);
        self.counters.unqueued(batches.len() as u64);
        self.space.notify_waiters();
        if emptied {
            self.emptied.notify_waiters();
        }
        Turn::Write {
            sink,
            bufs,
            batches,
        }
    }

    /// Gives the sink back after a written turn.
    pub fn give_back(&self, sink: Box<dyn SubscriberSink>) {
        self.state.lock().sink = Some(sink);
    }

    /// The sink broke during a turn (the writer drops it): the subscriber closes, and nothing
    /// more is written.
    pub fn lost(&self) {
        self.closed.store(true, Ordering::Release);
        let (left, ending) = {
            let mut st = self.state.lock();
            st.batches = 0;
            st.replies = 0;
            st.scheduled = false;
            (std::mem::take(&mut st.queue), st.ending.take())
        };
        drop(ending); // whoever waits for the end stops waiting
        self.discard(left);
    }

    /// Batches its queue can still take before it is full (`capacity` minus the batches
    /// queued): a queue group's credit for this member.
    pub fn room(&self) -> usize {
        self.capacity.saturating_sub(self.state.lock().batches)
    }

    /// Whether a full queue makes an offer wait (the `block` policy).
    pub fn blocks(&self) -> bool {
        self.policy == SlowSubscriberPolicy::Block
    }

    /// Notified whenever the writer takes from the queue, and on close (to wait for
    /// [`Subscriber::room`]: enable the `Notified`, then check the room).
    pub fn space(&self) -> &Notify {
        &self.space
    }

    /// Items waiting (batches and replies).
    pub fn queued(&self) -> usize {
        let st = self.state.lock();
        st.batches + st.replies
    }

    /// Returns once no batch waits in the queue (taken by the writer, or the subscriber
    /// closed); at once if none does.
    pub async fn wait_empty(&self) {
        loop {
            let emptied = self.emptied.notified();
            tokio::pin!(emptied);
            emptied.as_mut().enable();
            if self.state.lock().batches == 0 || self.is_closed() {
                return;
            }
            emptied.await;
        }
    }

    /// Ends the sink after everything queued so far (batches and replies) is written: no batch
    /// is taken from now on, and the sink is finished by its writer, or here when nobody
    /// writes. Returns the end, to wait for the far end if the caller cares. A second call
    /// returns an end with nothing to wait for.
    pub fn end(&self) -> Ended {
        self.closed.store(true, Ordering::Release);
        self.space.notify_waiters();
        let mut st = self.state.lock();
        if st.ending.is_some() {
            return Ended {
                state: EndedState::Done,
            };
        }
        if st.scheduled {
            // A writer holds the sink or will take a turn: it finishes after the queue.
            let (tx, rx) = oneshot::channel();
            st.ending = Some(tx);
            return Ended {
                state: EndedState::Pending(rx),
            };
        }
        // Nobody writes and nothing is queued: finish here.
        let state = match st.sink.take() {
            Some(sink) => EndedState::Finishing(sink.finish()),
            None => EndedState::Done,
        };
        Ended { state }
    }

    /// Marks the subscriber closed, discards its queued batches (counting the dropped events)
    /// and wakes a publisher blocked on it. Queued replies stay, to be written before the end.
    pub fn close(&self) {
        // Also after `end`: an ending subscriber's batches are discarded too.
        self.closed.store(true, Ordering::Release);
        let dropped: Vec<(Queued, u64)> = {
            let mut st = self.state.lock();
            let mut kept = VecDeque::with_capacity(st.replies);
            let mut dropped = Vec::new();
            for item in std::mem::take(&mut st.queue) {
                match item {
                    Item::Batch(q, charge) => dropped.push((q, charge)),
                    reply @ Item::Reply(_) => kept.push_back(reply),
                }
            }
            st.queue = kept;
            st.batches = 0;
            dropped
        };
        self.budget.release(dropped.iter().map(|(_, c)| c).sum());
        if !dropped.is_empty() {
            let events: u64 = dropped.iter().map(|(q, _)| u64::from(q.events)).sum();
            self.counters
                .drop_events(DropReason::SubscriberClosed, events);
            self.counters.unqueued(dropped.len() as u64);
        }
        self.space.notify_waiters();
        self.emptied.notify_waiters();
    }

    /// Discards items that can no longer be written.
    fn discard(&self, items: VecDeque<Item>) {
        let (mut batches, mut events, mut charged) = (0u64, 0u64, 0u64);
        for item in items {
            if let Item::Batch(q, charge) = item {
                batches += 1;
                events += u64::from(q.events);
                charged += charge;
            }
        }
        self.budget.release(charged);
        if batches > 0 {
            self.counters
                .drop_events(DropReason::SubscriberClosed, events);
            self.counters.unqueued(batches);
        }
        self.space.notify_waiters();
        self.emptied.notify_waiters();
    }

    /// Whether the subscriber takes no more batches (closed, or ending).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

impl State {
    /// Removes the oldest queued batch (replies stay).
    fn evict_oldest_batch(&mut self) -> Option<(Queued, u64)> {
        let i = self
            .queue
            .iter()
            .position(|item| matches!(item, Item::Batch(..)))?;
        match self.queue.remove(i) {
            Some(Item::Batch(q, charge)) => {
                self.batches -= 1;
                Some((q, charge))
            }
            Some(reply) => {
                self.queue.insert(i, reply);
                None
            }
            None => None,
        }
    }
}
