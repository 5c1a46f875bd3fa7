//! Producers of the pub/sub workload. Closed loop: a tokio task publishes
//! as fast as the client accepts, stamping each message with the time it
//! is handed over. Open loop (`--rate`): a dedicated thread sleeps until
//! each batch is due and stamps every message with its *intended* send time
//! from the [`Schedule`], so a stall shows up as latency.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::Bytes;
use starling_client::{Client, ClientError};

use super::clock::{Clock, Schedule};
use super::payload::{Header, PayloadFactory};

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
