//! [`Tracker`]: one subscriber's bookkeeping — per-producer counts and next
//! expected sequence number (loss, reordering, duplicates), the HDR
//! histogram of publish→receive latency of measured messages (sent at or
//! after the measurement start), and the deliveries *received* inside the
//! measurement window, from which the delivered rate is computed (so a
//! backlog left by the warm-up neither inflates nor deflates it).

use hdrhistogram::Histogram;

use super::payload;
use super::result::new_histogram;

/// What one subscriber saw.
#[derive(Debug)]
pub(crate) struct Tracker {
    /// Next expected sequence number per producer.
    next: Vec<u64>,
    /// Messages received per producer, warm-up included.
    received: Vec<u64>,
    /// Messages that arrived after a later message of the same producer.
    pub(crate) reordered: u64,
    /// Payloads without a benchmark header or with an unknown producer.
    pub(crate) foreign: u64,
    /// Measured messages received.
    pub(crate) measured: u64,
    /// Receive time of the last message (ns since the epoch).
    pub(crate) last_recv_ns: u64,
    /// Deliveries received inside the measurement window.
    pub(crate) in_window: u64,
    /// Latency of measured messages (ns).
    pub(crate) latency: Histogram<u64>,
    window: Window,
}

/// The measurement window in ns since the epoch: from `start` to `end`
/// (`u64::MAX` in count mode, where the window ends with the last delivery).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// Start of the measured phase.
    pub(crate) start: u64,
    /// When producers stop (duration mode).
    pub(crate) end: u64,
}

/// Loss accounting of one subscriber against what its producers sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Accounting {
    /// Deliveries expected.
    pub(crate) expected: u64,
    /// Expected deliveries that did not arrive.
    pub(crate) lost: u64,
    /// Deliveries beyond what was sent.
    pub(crate) duplicates: u64,
}

impl Tracker {
    /// A tracker for a run with `producers` producers measured over `window`.
    pub(crate) fn new(producers: usize, window: Window) -> Self {
        Tracker {
            next: vec![0; producers],
            received: vec![0; producers],
            reordered: 0,
            foreign: 0,
            measured: 0,
            last_recv_ns: 0,
            in_window: 0,
            latency: new_histogram(),
            window,
        }
    }

    /// Records one delivered payload received at `now_ns`.
    pub(crate) fn observe(&mut self, payload: &[u8], now_ns: u64) {
        let Some(h) = payload::decode(payload) else {
            self.foreign += 1;
            return;
        };
        let p = h.producer as usize;
        let (Some(next), Some(received)) = (self.next.get_mut(p), self.received.get_mut(p)) else {
            self.foreign += 1;
            return;
        };
        *received += 1;
        if h.seq >= *next {
            *next = h.seq + 1;
        } else {
            self.reordered += 1;
        }
        self.last_recv_ns = self.last_recv_ns.max(now_ns);
        if (self.window.start..=self.window.end).contains(&now_ns) {
            self.in_window += 1;
        }
        if h.send_ns >= self.window.start {
            self.measured += 1;
            self.latency
                .saturating_record(now_ns.saturating_sub(h.send_ns).max(1));
        }
    }

    /// Messages received so far from the producers in `producers`.
    pub(crate) fn received_from(&self, producers: &[usize]) -> u64 {
        producers.iter().filter_map(|&p| self.received.get(p)).sum()
    }

    /// Loss and duplicates given what each producer sent (`sent[p]`), over
    /// the producers of this subscriber's topic.
    pub(crate) fn account(&self, sent: &[u64], producers: &[usize]) -> Accounting {
        let mut a = Accounting::default();
        for &p in producers {
            let sent = sent.get(p).copied().unwrap_or(0);
            let got = self.received.get(p).copied().unwrap_or(0);
            a.expected += sent;
            a.lost += sent.saturating_sub(got);
            a.duplicates += got.saturating_sub(sent);
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::super::payload::{Header, PayloadFactory};
    use super::*;

    fn msg(producer: u32, seq: u64, send_ns: u64) -> bytes::Bytes {
        PayloadFactory::new(32).make(Header {
            producer,
            seq,
            send_ns,
        })
    }

    #[test]
    fn counts_latency_only_for_measured_messages() {
        let window = Window {
            start: 1_000,
            end: 4_000,
        };
        let mut t = Tracker::new(1, window);
        t.observe(&msg(0, 0, 500), 900); // warm-up, received before the window
        t.observe(&msg(0, 1, 600), 1_100); // warm-up, received in the window
        t.observe(&msg(0, 2, 1_000), 3_000);
        t.observe(&msg(0, 3, 2_000), 5_000); // received after the window
        assert_eq!(t.measured, 2);
        assert_eq!(t.in_window, 2);
        assert_eq!(t.latency.len(), 2);
        assert_eq!(t.last_recv_ns, 5_000);
        assert_eq!(t.received_from(&[0]), 4);
        assert_eq!(
            t.account(&[4], &[0]),
            Accounting {
                expected: 4,
                lost: 0,
                duplicates: 0
            }
        );
    }

    #[test]
    fn detects_loss_reordering_and_foreign_payloads() {
        let mut t = Tracker::new(
            2,
            Window {
                start: 0,
                end: u64::MAX,
            },
        );
        for (p, s) in [(0, 0), (0, 2), (0, 1), (1, 0), (1, 1)] {
            t.observe(&msg(p, s, 0), 1);
        }
        t.observe(b"not a bench message", 1);
        t.observe(&msg(9, 0, 0), 1);
        assert_eq!(t.reordered, 1);
        assert_eq!(t.foreign, 2);
        // producer 0 sent 5 (2 missing), producer 1 sent 1 (1 extra).
        assert_eq!(
            t.account(&[5, 1], &[0, 1]),
            Accounting {
                expected: 6,
                lost: 2,
                duplicates: 1
            }
        );
        assert_eq!(t.account(&[5, 1], &[1]).expected, 1);
    }
}
