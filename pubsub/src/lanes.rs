//! Writer lanes: a fixed pool of tasks that write queued EventBatches to subscriber sinks.
//!
//! Each subscriber is pinned to one lane by the configured shard policy, and a lane serves one
//! subscriber at a time, so per-subscriber order always holds. A lane writes up to
//! `fanout_batch_size` queued batches per turn in one vectored write. When a subscriber's
//! sink is blocked (QUIC flow control) the lane does not wait: it parks the unfinished write,
//! with the sink, on a separate task and moves on, so one slow subscriber cannot stall the
//! others on its lane. A lane also finishes a sink whose end was asked for once its queue is
//! written ([`Subscriber::end`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use starling_config::LaneShard;
use starling_placement::hash::mix;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::counters::{Counters, Observe};
use crate::queue_budget::QueueBudget;
use crate::sink::{SubscriberSink, WriteNow};
use crate::subscriber::{Queued, Subscriber, Turn};

/// Picks a lane for a new subscriber.
#[derive(Debug)]
pub struct LanePicker {
    lanes: usize,
    shard: LaneShard,
    next: AtomicUsize,
}

impl LanePicker {
    /// A picker over `lanes` lanes.
    pub fn new(lanes: usize, shard: LaneShard) -> Self {
        LanePicker {
            lanes: lanes.max(1),
            shard,
            next: AtomicUsize::new(0),
        }
    }

    /// The lane for a subscription.
    pub fn pick(&self, subscription_id: u64, connection_id: u64) -> usize {
        let n = self.lanes as u64;
        match self.shard {
            LaneShard::Auto | LaneShard::SubscriberIdHash => (mix(subscription_id) % n) as usize,
            LaneShard::ConnectionIdHash => (mix(connection_id) % n) as usize,
            LaneShard::RoundRobinPin => self.next.fetch_add(1, Ordering::Relaxed) % self.lanes,
        }
    }
}

/// The lane pool.
pub struct Lanes {
    senders: Vec<mpsc::Sender<Arc<Subscriber>>>,
    /// Lane assignment.
    pub picker: LanePicker,
    /// The bytes every subscriber queue draws from (`subscriber_queue_budget_bytes`).
    pub queue_budget: Arc<QueueBudget>,
    counters: Arc<Counters>,
    observe: Arc<dyn Observe>,
}

impl Lanes {
    /// Starts one lane task per lane of `counters` (`subscriber_writer_lanes`).
    pub fn spawn(
        queue_depth: usize,
        fanout_batch_size: usize,
        shard: LaneShard,
        queue_budget_bytes: u64,
        counters: Arc<Counters>,
        observe: Arc<dyn Observe>,
    ) -> Arc<Lanes> {
        let count = counters.lanes.len().max(1);
        let mut senders = Vec::with_capacity(count);
        let mut receivers = Vec::with_capacity(count);
        for _ in 0..count {
            let (tx, rx) = mpsc::channel(queue_depth.max(1));
            senders.push(tx);
            receivers.push(rx);
        }
        let lanes = Arc::new(Lanes {
            senders,
            picker: LanePicker::new(count, shard),
            queue_budget: Arc::new(QueueBudget::new(queue_budget_bytes)),
            counters,
            observe,
        });
        for (i, rx) in receivers.into_iter().enumerate() {
            let worker = LaneWorker {
                lane: i,
                lanes: Arc::clone(&lanes),
                max_batches: fanout_batch_size.max(1),
            };
            tokio::spawn(worker.run(rx));
        }
        lanes
    }

    /// The engine's counts (shared with the topics and subscribers of these lanes).
    pub fn counters(&self) -> &Arc<Counters> {
        &self.counters
    }

    /// Where distributions are reported.
    pub fn observe(&self) -> &Arc<dyn Observe> {
        &self.observe
    }

    /// Number of lanes.
    pub fn len(&self) -> usize {
        self.senders.len()
    }

    /// Whether there are no lanes (never true: at least one is started).
    pub fn is_empty(&self) -> bool {
        self.senders.is_empty()
    }

    /// Hands a subscriber with queued batches to its lane, waiting if the lane queue is full.
    pub async fn schedule(&self, sub: Arc<Subscriber>) {
        let lane = sub.lane % self.senders.len();
        let (Some(tx), Some(m)) = (self.senders.get(lane), self.counters.lanes.get(lane)) else {
            return;
        };
        let depth = m.depth.fetch_add(1, Ordering::Relaxed) + 1;
        m.high_water.fetch_max(depth, Ordering::Relaxed);
        m.enqueued.fetch_add(1, Ordering::Relaxed);
        if tx.send(sub).await.is_err() {
            m.depth.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Puts `sub` back in `lane`'s queue without waiting; refused when the queue is full.
    fn try_requeue(&self, lane: usize, sub: Arc<Subscriber>) -> Result<(), LaneFull> {
        let tx = self.senders.get(lane).ok_or(LaneFull)?;
        tx.try_send(sub).map_err(|_| LaneFull)?;
        if let Some(m) = self.counters.lanes.get(lane) {
            m.depth.fetch_add(1, Ordering::Relaxed);
            m.enqueued.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// A lane's queue had no room (or there is no such lane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct LaneFull;

struct LaneWorker {
    lane: usize,
    lanes: Arc<Lanes>,
    max_batches: usize,
}

impl LaneWorker {
    async fn run(self, mut rx: mpsc::Receiver<Arc<Subscriber>>) {
        while let Some(sub) = rx.recv().await {
            if let Some(m) = self.lanes.counters.lanes.get(self.lane) {
                m.depth.fetch_sub(1, Ordering::Relaxed);
            }
            self.serve(sub).await;
        }
    }

    /// Writes one turn's worth of batches for `sub`, then requeues it behind the other ready
    /// subscribers if it has more.
    async fn serve(&self, sub: Arc<Subscriber>) {
        loop {
            let (mut sink, mut bufs, batches) = match sub.take(self.max_batches) {
                Turn::Idle => return,
                Turn::End { sink, ended } => {
                    let _ = ended.send(sink.finish());
                    return;
                }
                Turn::Write {
                    sink,
                    bufs,
                    batches,
                } => (sink, bufs, batches),
            };
            tracing::trace!(
                lane = self.lane,
                sub = sub.id,
                batches = batches.len(),
                "lane write"
            );
            let outcome = sink.write_now(&mut bufs);
            tracing::trace!(lane = self.lane, sub = sub.id, ?outcome, "lane wrote");
            match outcome {
                WriteNow::Done => {
                    sub.give_back(sink);
                    self.lanes.record(&batches);
                }
                WriteNow::Failed => {
                    drop(sink);
                    sub.lost();
                    return;
                }
                WriteNow::Blocked => {
                    self.lanes
                        .counters
                        .lane_stalls
                        .fetch_add(1, Ordering::Relaxed);
                    let lanes = Arc::clone(&self.lanes);
                    tokio::spawn(finish_stalled(lanes, sub, sink, bufs, batches));
                    return;
                }
            }
            if sub.queued() == 0 {
                continue; // clears the scheduled flag, ends, or picks up a batch that raced in
            }
            // Requeue behind the other ready subscribers; if the lane queue is full, keep
            // serving this one inline.
            if self.lanes.try_requeue(self.lane, Arc::clone(&sub)).is_ok() {
                return;
            }
        }
    }
}

/// Finishes a write the lane had to park, then gives the subscriber back to its lane.
async fn finish_stalled(
    lanes: Arc<Lanes>,
    sub: Arc<Subscriber>,
    mut sink: Box<dyn SubscriberSink>,
    mut bufs: Vec<Bytes>,
    batches: Vec<Queued>,
) {
    match sink.write_all(&mut bufs).await {
        Ok(()) => {
            sub.give_back(sink);
            lanes.record(&batches);
            lanes.schedule(sub).await;
        }
        Err(_) => {
            drop(sink);
            sub.lost();
        }
    }
}

impl Lanes {
    /// Counts written batches and reports their latency.
    fn record(&self, items: &[Queued]) {
        let now = Instant::now();
        let c = &self.counters;
        for q in items {
            c.delivered_events
                .fetch_add(q.events.into(), Ordering::Relaxed);
            c.delivered_bytes
                .fetch_add(q.frame.len() as u64, Ordering::Relaxed);
            self.observe.delivered(now.duration_since(q.enqueued));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_pins_within_range_and_hash_policies_are_stable() {
        for shard in [
            LaneShard::Auto,
            LaneShard::SubscriberIdHash,
            LaneShard::ConnectionIdHash,
            LaneShard::RoundRobinPin,
        ] {
            let p = LanePicker::new(4, shard);
            for id in 0..100 {
                assert!(p.pick(id, id / 10) < 4);
            }
        }
        let p = LanePicker::new(4, LaneShard::SubscriberIdHash);
        assert_eq!(p.pick(42, 1), p.pick(42, 2));
        let p = LanePicker::new(4, LaneShard::ConnectionIdHash);
        assert_eq!(p.pick(1, 7), p.pick(2, 7));
        let p = LanePicker::new(3, LaneShard::RoundRobinPin);
        assert_eq!(
            (0..6).map(|i| p.pick(i, 0)).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1, 2]
        );
    }

    #[test]
    fn hash_spreads_sequential_ids() {
        let p = LanePicker::new(4, LaneShard::Auto);
        let mut counts = [0usize; 4];
        for id in 1..=4000 {
            counts[p.pick(id, 0)] += 1;
        }
        assert!(
            counts.iter().all(|&c| (800..1200).contains(&c)),
            "{counts:?}"
        );
    }
}
