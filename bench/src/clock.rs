//! The run's clock and the open-loop schedule.
//!
//! Producers and subscribers live in one process, so one monotonic epoch
//! serves both ends: a timestamp is nanoseconds since [`Clock::epoch`]. With
//! `--rate`, message `i` of a producer is *intended* to be sent at
//! `start + i / rate`; its latency is measured from that instant, not from
//! when it was actually sent, so a stalled sender cannot hide the stall
//! (no coordinated omission).

use std::time::{Duration, Instant};

/// The shared epoch of one run.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    epoch: Instant,
}

impl Clock {
    /// A clock whose zero is now.
    pub(crate) fn start() -> Self {
        Clock {
            epoch: Instant::now(),
        }
    }

    /// Nanoseconds since the epoch.
    pub(crate) fn now_ns(&self) -> u64 {
        self.ns_of(Instant::now())
    }

    /// `at` as nanoseconds since the epoch (0 before it).
    pub(crate) fn ns_of(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// The instant `ns` nanoseconds after the epoch.
    pub(crate) fn instant(&self, ns: u64) -> Instant {
        self.epoch + Duration::from_nanos(ns)
    }
}

/// When each message of one open-loop producer is due.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Schedule {
    /// First message's intended time (ns since the epoch).
    pub(crate) start_ns: u64,
    /// Nanoseconds between two messages of this producer.
    pub(crate) interval_ns: f64,
}

impl Schedule {
    /// A producer's share of `total_rate` messages/s spread over `producers`.
    pub(crate) fn new(start_ns: u64, total_rate: f64, producers: u32) -> Self {
        let per_producer = total_rate / f64::from(producers.max(1));
        Schedule {
            start_ns,
            interval_ns: 1e9 / per_producer,
        }
    }

    /// Intended send time of message `i`.
    pub(crate) fn due_ns(&self, i: u64) -> u64 {
        self.start_ns
            .saturating_add((i as f64 * self.interval_ns) as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_spreads_the_rate_over_producers() {
        let s = Schedule::new(1_000, 10_000.0, 4); // 2,500 msg/s each
        assert_eq!(s.due_ns(0), 1_000);
        assert_eq!(s.due_ns(1), 1_000 + 400_000);
        assert_eq!(s.due_ns(2_500), 1_000 + 1_000_000_000);
    }

    #[test]
    fn clock_is_monotonic_from_its_epoch() {
        let c = Clock::start();
        let a = c.now_ns();
        let b = c.now_ns();
        assert!(b >= a);
        assert_eq!(c.ns_of(c.instant(5_000)), 5_000);
    }
}
