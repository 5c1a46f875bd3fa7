//! Producers of the pub/sub workload. Closed loop: a tokio task publishes
//! as fast as the client accepts, stamping each message with the time it
//! is handed over. Open loop (`--rate`): a dedicated thread sleeps until
//! each batch is due and stamps every message with its *intended* send time
//! from the [`Schedule`], so a stall shows up as latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use hdrhistogram::Histogram;
use starling_client::{Client, ClientError};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};

use super::clock::{Clock, Schedule};
use super::payload::{Header, PayloadFactory};
use super::result::new_histogram;

/// When a producer stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// At this time (ns since the epoch).
    At(u64),
    /// After this many measured messages.
    Count(u64),
}

/// Everything one producer needs.
#[derive(Debug, Clone)]
pub(crate) struct ProducerPlan {
    /// Producer index.
    pub(crate) id: u32,
    /// Topic it publishes to.
    pub(crate) topic: String,
    /// Payload builder.
    pub(crate) payloads: PayloadFactory,
    /// Messages per publish call.
    pub(crate) batch: u32,
    /// The run's clock.
    pub(crate) clock: Clock,
    /// Start of the measured phase (ns).
    pub(crate) measure_start_ns: u64,
    /// When to stop.
    pub(crate) stop: Stop,
    /// Messages handed to the client so far (for the progress bar).
    pub(crate) sent_counter: Arc<AtomicU64>,
    /// Acked publishes with at most this many calls unacked (closed loop only).
    pub(crate) ack_window: Option<u32>,
}

/// What a producer did.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProducerReport {
    /// Messages published, warm-up included.
    pub(crate) sent: u64,
    /// Measured messages published.
    pub(crate) measured: u64,
    /// When the last measured publish call returned (ns).
    pub(crate) last_ns: u64,
    /// The error that stopped it early.
    pub(crate) error: Option<String>,
    /// Acked publishes: stamp→ack latency of measured messages (ns).
    pub(crate) ack_latency: Option<Histogram<u64>>,
}

impl ProducerPlan {
    /// Messages in the next batch whose first message is stamped `stamp_ns`,
    /// or `None` when the producer is done.
    fn next_batch(&self, stamp_ns: u64, measured: u64) -> Option<u64> {
        let batch = u64::from(self.batch.max(1));
        match self.stop {
            Stop::At(end) => (stamp_ns < end).then_some(batch),
            Stop::Count(_) if stamp_ns < self.measure_start_ns => Some(batch),
            Stop::Count(total) => (measured < total).then(|| batch.min(total - measured)),
        }
    }

    fn build(&self, first_seq: u64, n: u64, stamp: impl Fn(u64) -> u64) -> Vec<Bytes> {
        (0..n)
            .map(|i| {
                self.payloads.make(Header {
                    producer: self.id,
                    seq: first_seq + i,
                    send_ns: stamp(i),
                })
            })
            .collect()
    }

    fn account(&self, report: &mut ProducerReport, stamp_ns: u64, n: u64) {
        report.sent += n;
        self.sent_counter.fetch_add(n, Ordering::Relaxed);
        if stamp_ns >= self.measure_start_ns {
            report.measured += n;
            report.last_ns = self.clock.now_ns();
        }
    }
}

/// Publishes as fast as the client accepts until the plan says stop.
pub(crate) async fn closed_loop(client: Client, plan: ProducerPlan) -> ProducerReport {
    if let Some(window) = plan.ack_window {
        return closed_loop_acked(client, plan, window).await;
    }
    let mut report = ProducerReport::default();
    loop {
        let now = plan.clock.now_ns();
        let Some(n) = plan.next_batch(now, report.measured) else {
            break;
        };
        let payloads = plan.build(report.sent, n, |_| now);
        if let Err(e) = publish(&client, &plan.topic, payloads).await {
            report.error = Some(format!("producer {}: {e}", plan.id));
            break;
        }
        plan.account(&mut report, now, n);
    }
    report
}

/// One acked publish call in flight: its stamp, its messages, whether they are measured, the
/// ack to wait for, and the window slot it holds until then.
struct InFlight {
    stamp_ns: u64,
    n: u64,
    measured: bool,
    ack: BoxFuture<'static, Result<(), ClientError>>,
    _slot: OwnedSemaphorePermit,
}

/// Closed loop with acked publishes: each call queues one acked batch on the topic's stream
/// (`publish_batch_pipelined`, so acks come back in call order) while at most `window` calls
/// wait for their ack. A collector task awaits the acks in order and records each message's
/// stamp→ack latency; the producer ends once every ack is in.
async fn closed_loop_acked(client: Client, plan: ProducerPlan, window: u32) -> ProducerReport {
    let slots = Arc::new(Semaphore::new(window.max(1) as usize));
    let (tx, mut rx) = mpsc::unbounded_channel::<InFlight>();
    let clock = plan.clock;
    let collector_slots = Arc::clone(&slots);
    let collector = tokio::spawn(async move {
        let mut latency = new_histogram();
        while let Some(f) = rx.recv().await {
            if let Err(e) = f.ack.await {
                collector_slots.close();
                return (latency, Some(e.to_string()));
            }
            if f.measured {
                let ns = clock.now_ns().saturating_sub(f.stamp_ns).max(1);
                let _ = latency.record_n(ns, f.n);
            }
        }
        (latency, None)
    });
    let mut report = ProducerReport::default();
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            break; // the collector saw a failed ack
        };
        let now = plan.clock.now_ns();
        let Some(n) = plan.next_batch(now, report.measured) else {
            break;
        };
        let payloads = plan.build(report.sent, n, |_| now);
        let ack = match client.publish_batch_pipelined(&plan.topic, payloads).await {
            Ok(ack) => Box::pin(ack),
            Err(e) => {
                report.error = Some(format!("producer {}: {e}", plan.id));
                break;
            }
        };
        let measured = now >= plan.measure_start_ns;
        let queued = tx.send(InFlight {
            stamp_ns: now,
            n,
            measured,
            ack,
            _slot: slot,
        });
        if queued.is_err() {
            break;
        }
        plan.account(&mut report, now, n);
    }
    drop(tx);
    match collector.await {
        Ok((latency, error)) => {
            report.ack_latency = Some(latency);
            if let Some(e) = error {
                report
                    .error
                    .get_or_insert(format!("producer {}: ack: {e}", plan.id));
            }
        }
        Err(e) => {
            report
                .error
                .get_or_insert(format!("producer {}: ack collector: {e}", plan.id));
        }
    }
    report
}

/// Publishes on `schedule` from the current (blocking) thread, driving the
/// client on `runtime`.
pub(crate) fn open_loop(
    runtime: tokio::runtime::Handle,
    client: Client,
    plan: ProducerPlan,
    schedule: Schedule,
) -> ProducerReport {
    let mut report = ProducerReport::default();
    loop {
        let first_due = schedule.due_ns(report.sent);
        let Some(n) = plan.next_batch(first_due, report.measured) else {
            break;
        };
        let last_due = schedule.due_ns(report.sent + n - 1);
        let now = plan.clock.now_ns();
        if last_due > now {
            std::thread::sleep(Duration::from_nanos(last_due - now));
        }
        let first_seq = report.sent;
        let payloads = plan.build(first_seq, n, |i| schedule.due_ns(first_seq + i));
        if let Err(e) = runtime.block_on(publish(&client, &plan.topic, payloads)) {
            report.error = Some(format!("producer {}: {e}", plan.id));
            break;
        }
        plan.account(&mut report, first_due, n);
    }
    report
}

async fn publish(
    client: &Client,
    topic: &str,
    mut payloads: Vec<Bytes>,
) -> Result<(), ClientError> {
    if payloads.len() == 1
        && let Some(one) = payloads.pop()
    {
        return client.publish(topic, one).await;
    }
    client.publish_batch(topic, payloads, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(stop: Stop, batch: u32) -> ProducerPlan {
        ProducerPlan {
            id: 0,
            topic: "t".into(),
            payloads: PayloadFactory::new(32),
            batch,
            clock: Clock::start(),
            measure_start_ns: 100,
            stop,
            sent_counter: Arc::default(),
            ack_window: None,
        }
    }

    #[test]
    fn duration_mode_stops_at_the_deadline() {
        let p = plan(Stop::At(1_000), 4);
        assert_eq!(p.next_batch(0, 0), Some(4));
        assert_eq!(p.next_batch(999, 50), Some(4));
        assert_eq!(p.next_batch(1_000, 50), None);
    }

    #[test]
    fn count_mode_counts_only_measured_messages_and_trims_the_last_batch() {
        let p = plan(Stop::Count(10), 4);
        assert_eq!(p.next_batch(50, 0), Some(4)); // warm-up: unlimited
        assert_eq!(p.next_batch(100, 8), Some(2));
        assert_eq!(p.next_batch(100, 10), None);
    }

    #[test]
    fn accounting_separates_warmup() {
        let p = plan(Stop::Count(10), 1);
        let mut r = ProducerReport::default();
        p.account(&mut r, 50, 3);
        p.account(&mut r, 150, 2);
        assert_eq!((r.sent, r.measured), (5, 2));
        assert_eq!(p.sent_counter.load(Ordering::Relaxed), 5);
        let built = p.build(7, 2, |i| 1_000 + i);
        let h = super::super::payload::decode(&built[1]);
        assert_eq!(h.map(|h| (h.seq, h.send_ns)), Some((8, 1_001)));
    }
}
