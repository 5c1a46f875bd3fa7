//! The progress bar of runs longer than a few seconds (`indicatif`, on
//! stderr, drawn only when stderr is a terminal): elapsed time against the
//! planned time, with the current publish and delivery rates.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::task::JoinHandle;

/// Runs planned to be shorter than this get no bar.
const MIN_RUN: Duration = Duration::from_secs(3);
/// Redraw interval.
const TICK: Duration = Duration::from_millis(250);

/// Counters the bar reads.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters {
    /// Messages (or operations) issued.
    pub(crate) sent: Vec<Arc<AtomicU64>>,
    /// Messages delivered.
    pub(crate) received: Vec<Arc<AtomicU64>>,
}

impl Counters {
    fn totals(&self) -> (u64, u64) {
        let sum = |v: &[Arc<AtomicU64>]| v.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        (sum(&self.sent), sum(&self.received))
    }
}

/// A running progress bar; [`Progress::finish`] removes it.
pub(crate) struct Progress {
    bar: Option<ProgressBar>,
    ticker: Option<JoinHandle<()>>,
}

impl Progress {
    /// A bar for a run planned to take `planned` (unknown in count mode),
    /// hidden when `enabled` is false or the run is short.
    pub(crate) fn start(
        enabled: bool,
        label: &str,
        planned: Option<Duration>,
        counters: Counters,
    ) -> Self {
        if !enabled || planned.is_some_and(|p| p < MIN_RUN) {
            return Progress {
                bar: None,
                ticker: None,
            };
        }
        let bar = ProgressBar::with_draw_target(
            planned.map(|p| p.as_millis() as u64),
            ProgressDrawTarget::stderr(),
        );
        let template = if planned.is_some() {
            "{prefix} [{bar:30}] {elapsed}/{duration} {msg}"
        } else {
            "{prefix} {spinner} {elapsed} {msg}"
        };
        if let Ok(style) = ProgressStyle::with_template(template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_string());
        let ticker = tokio::spawn(tick(bar.clone(), counters));
        Progress {
            bar: Some(bar),
            ticker: Some(ticker),
        }
    }

    /// Stops and clears the bar.
    pub(crate) fn finish(self) {
        if let Some(t) = self.ticker {
            t.abort();
        }
        if let Some(bar) = self.bar {
            bar.finish_and_clear();
        }
    }
}

async fn tick(bar: ProgressBar, counters: Counters) {
    let start = Instant::now();
    let mut last = (Instant::now(), counters.totals());
    loop {
        tokio::time::sleep(TICK).await;
        let now = Instant::now();
        let totals = counters.totals();
        let dt = now.duration_since(last.0).as_secs_f64().max(1e-3);
        let rate = |a: u64, b: u64| (b.saturating_sub(a)) as f64 / dt;
        bar.set_message(format!(
            "sent {}/s delivered {}/s",
            human(rate(last.1.0, totals.0)),
            human(rate(last.1.1, totals.1))
        ));
        bar.set_position(now.duration_since(start).as_millis() as u64);
        last = (now, totals);
    }
}

/// `1234567.0` → `1.23M`.
pub(crate) fn human(v: f64) -> String {
    match v {
        v if v >= 1e9 => format!("{:.2}G", v / 1e9),
        v if v >= 1e6 => format!("{:.2}M", v / 1e6),
        v if v >= 1e3 => format!("{:.1}k", v / 1e3),
        v => format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn human_numbers() {
        assert_eq!(human(12.0), "12");
        assert_eq!(human(12_345.0), "12.3k");
        assert_eq!(human(1_234_567.0), "1.23M");
        assert_eq!(human(2.5e9), "2.50G");
    }
}
