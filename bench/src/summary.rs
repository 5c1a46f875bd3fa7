//! Turning the producers' and subscribers' reports of a pub/sub run into the
//! figures of its [`RunResult`], and judging its integrity.

use starling_config::SlowSubscriberPolicy;

use super::args::PubSubArgs;
use super::producer::ProducerReport;
use super::result::{Latency, RunResult, new_histogram};
use super::subscriber::SubscriberReport;
use super::tracker::Window;

/// Fills the counts, rates and latency of `result`. Rates are over the
/// measurement window: its fixed length in duration mode; in count mode up
/// to the last publish (published) or the last delivery (delivered).
pub(crate) fn summarise(
    result: &mut RunResult,
    a: &PubSubArgs,
    window: Window,
    producers: &[ProducerReport],
    sent: &[u64],
    subs: &[SubscriberReport],
) {
    let secs = |end_ns: u64| end_ns.saturating_sub(window.start) as f64 / 1e9;
    let mut errors: Vec<String> = producers.iter().filter_map(|r| r.error.clone()).collect();
    result.published = producers.iter().map(|r| r.measured).sum();
    let last_publish = producers.iter().map(|r| r.last_ns).max().unwrap_or(0);
    let pub_secs = secs(last_publish.min(window.end));
    result.published_msgs_per_s = rate(result.published, pub_secs);

    let acked: Vec<_> = producers
        .iter()
        .filter_map(|r| r.ack_latency.as_ref())
        .collect();
    if !acked.is_empty() {
        let mut ack = new_histogram();
        for h in acked {
            let _ = ack.add(h);
        }
        result.ack_latency_us = Some(Latency::from_ns(&ack));
    }
    let mut latency = new_histogram();
    let mut last_ns = 0;
    for s in subs {
        let acc = s.tracker.account(sent, &s.producers);
        result.expected += acc.expected;
        result.lost += acc.lost;
        result.duplicates += acc.duplicates;
        result.reordered += s.tracker.reordered;
        result.dropped += s.dropped;
        result.delivered += s.tracker.in_window;
        last_ns = last_ns.max(s.tracker.last_recv_ns);
        let _ = latency.add(&s.tracker.latency);
        errors.extend(s.error.clone());
    }
    let delivered_secs = secs(last_ns.min(window.end));
    result.elapsed_s = delivered_secs.max(pub_secs);
    result.delivered_msgs_per_s = rate(result.delivered, delivered_secs);
    result.delivered_mb_per_s = result.delivered_msgs_per_s * a.payload as f64 / 1e6;
    result.latency_us = Latency::from_ns(&latency);
    if !errors.is_empty() {
        errors.truncate(3);
        result.failure = Some(errors.join("; "));
    }
}

/// Marks the run failed when it lost messages under a lossless policy, or
/// reordered or duplicated messages under any policy.
pub(crate) fn judge(result: &mut RunResult, policy: Option<SlowSubscriberPolicy>) {
    let mut problems = Vec::new();
    if result.lost > 0 && policy == Some(SlowSubscriberPolicy::Block) {
        problems.push(format!(
            "lost {} of {} deliveries under the lossless `block` policy",
            result.lost, result.expected
        ));
    }
    if result.reordered > 0 {
        problems.push(format!(
            "{} messages arrived out of order",
            result.reordered
        ));
    }
    if result.duplicates > 0 {
        problems.push(format!("{} duplicate deliveries", result.duplicates));
    }
    if !problems.is_empty() {
        let mut all: Vec<String> = result.failure.take().into_iter().collect();
        all.extend(problems);
        result.failure = Some(all.join("; "));
    }
}

fn rate(n: u64, secs: f64) -> f64 {
    if secs > 0.0 { n as f64 / secs } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_fails_only_lossless_runs_but_reordering_always_fails() {
        let mut r = RunResult {
            lost: 3,
            expected: 10,
            ..RunResult::default()
        };
        judge(&mut r, Some(SlowSubscriberPolicy::DropOld));
        assert_eq!(r.failure, None);
        judge(&mut r, Some(SlowSubscriberPolicy::Block));
        assert!(
            r.failure
                .as_deref()
                .is_some_and(|f| f.contains("lost 3 of 10"))
        );
        let mut r = RunResult {
            reordered: 1,
            ..RunResult::default()
        };
        judge(&mut r, None);
        assert!(r.failure.is_some());
    }
}
