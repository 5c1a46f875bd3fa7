//! Subscriber tasks of the pub/sub workload: feed every event into a
//! [`Tracker`] until all messages the topic's producers sent have arrived,
//! or the drain limits pass.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use starling_client::Subscription;
use tokio::sync::watch;
use tokio::time::Instant;

use super::clock::Clock;
use super::tracker::Tracker;

/// After the producers stop, a subscriber that receives nothing for this
/// long (or for a third of the drain timeout, if shorter) gives up.
const DRAIN_IDLE: Duration = Duration::from_secs(5);

/// Per-producer counts of what was sent, once the producers are done.
pub(crate) type SentCounts = Option<Arc<Vec<u64>>>;

/// One subscriber's job.
pub(crate) struct SubscriberPlan {
    /// The subscription.
    pub(crate) subscription: Subscription,
    /// Producers publishing to its topic.
    pub(crate) producers: Vec<usize>,
    /// Its bookkeeping.
    pub(crate) tracker: Tracker,
    /// The run's clock.
    pub(crate) clock: Clock,
    /// Becomes `Some` when the producers are done.
    pub(crate) sent: watch::Receiver<SentCounts>,
    /// Events received so far (for the progress bar).
    pub(crate) received_counter: Arc<AtomicU64>,
    /// Longest wait for the last deliveries.
    pub(crate) drain_timeout: Duration,
}

/// What a subscriber saw.
#[derive(Debug)]
pub(crate) struct SubscriberReport {
    /// Its bookkeeping.
    pub(crate) tracker: Tracker,
    /// Producers publishing to its topic.
    pub(crate) producers: Vec<usize>,
    /// Events the broker dropped for it (sequence gaps).
    pub(crate) dropped: u64,
    /// Why it stopped early, if it did.
    pub(crate) error: Option<String>,
}

/// Receives until complete; see the module docs.
pub(crate) async fn run(mut plan: SubscriberPlan) -> SubscriberReport {
    let mut error = None;
    let mut expected: Option<u64> = None;
    let mut drain_end: Option<Instant> = None;
    let idle = DRAIN_IDLE.min(plan.drain_timeout / 3);
    loop {
        if expected.is_none()
            && let Some(sent) = plan.sent.borrow_and_update().clone()
        {
            expected = Some(sent_to(&sent, &plan.producers));
            drain_end = Some(Instant::now() + plan.drain_timeout);
        }
        if expected.is_some_and(|e| plan.tracker.received_from(&plan.producers) >= e) {
            break;
        }
        let deadline = drain_end.map(|end| end.min(Instant::now() + idle));
        let event = tokio::select! {
            event = plan.subscription.next_event() => event,
            changed = plan.sent.changed(), if expected.is_none() => {
                if changed.is_err() {
                    error = Some("the run ended before the producers reported".to_string());
                    break;
                }
                continue;
            }
            _ = sleep_until(deadline) => {
                break;
            }
        };
        match event {
            Some(Ok(event)) => {
                plan.tracker.observe(&event.payload, plan.clock.now_ns());
                plan.received_counter.fetch_add(1, Ordering::Relaxed);
            }
            Some(Err(e)) => {
                error = Some(format!("subscription {}: {e}", plan.subscription.topic()));
                break;
            }
            None => {
                error = Some(format!(
                    "subscription {} ended by the server",
                    plan.subscription.topic()
                ));
                break;
            }
        }
    }
    let dropped = plan.subscription.dropped_events();
    plan.subscription.unsubscribe().await;
    SubscriberReport {
        tracker: plan.tracker,
        producers: plan.producers,
        dropped,
        error,
    }
}

fn sent_to(sent: &[u64], producers: &[usize]) -> u64 {
    producers.iter().filter_map(|&p| sent.get(p)).sum()
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_counts_only_the_topics_producers() {
        assert_eq!(sent_to(&[5, 7, 9], &[0, 2]), 14);
        assert_eq!(sent_to(&[5], &[3]), 0);
    }
}
