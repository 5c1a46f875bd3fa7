//! Pure batching logic: collects a topic's events and decides when a batch must go out.
//!
//! A batch flushes on whichever comes first: `max_events` events, `max_bytes` payload bytes,
//! or `max_delay` after its first event. An event that would push a non-empty batch past
//! `max_bytes` flushes the batch first, so a batch exceeds `max_bytes` only when a single event
//! is larger than it. A message's headers ride with it to the seal: the batch lists them by
//! the message's index in the batch (what the `EventHeaders` frame carries), and their encoded
//! size counts toward `max_bytes`, so a batch's headers frame stays within the same bound.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use starling_proto::{Header, IndexedHeaders, headers_len};

/// Why a batch was flushed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// It reached `max_events`.
    Events,
    /// It reached `max_bytes`.
    Bytes,
    /// Its first event is `max_delay` old.
    Delay,
    /// An explicit flush (drain).
    Drain,
}

impl Trigger {
    /// Metric label.
    pub fn label(self) -> &'static str {
        match self {
            Trigger::Events => "events",
            Trigger::Bytes => "bytes",
            Trigger::Delay => "delay",
            Trigger::Drain => "drain",
        }
    }
}

/// A batch ready to encode: payloads plus whatever the caller attached to them (acks).
#[derive(Debug)]
pub struct Batch<A> {
    /// Event payloads in publish order.
    pub payloads: Vec<Bytes>,
    /// Attachments released when this batch is committed.
    pub attached: Vec<A>,
    /// The headers of the messages that have any, by strictly increasing index into
    /// `payloads`.
    pub headers: Vec<IndexedHeaders>,
    /// Sum of payload lengths and of the encoded header lists.
    pub bytes: usize,
    /// What flushed it.
    pub trigger: Trigger,
}

/// Batching limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Events per batch.
    pub max_events: usize,
    /// Payload bytes per batch.
    pub max_bytes: usize,
    /// Age of the first event at which the batch flushes.
    pub max_delay: Duration,
}

/// The open batch of one topic and the batches ready to go out.
#[derive(Debug)]
pub struct Batcher<A> {
    limits: Limits,
    payloads: Vec<Bytes>,
    attached: Vec<A>,
    headers: Vec<IndexedHeaders>,
    bytes: usize,
    opened_at: Option<Instant>,
    ready: VecDeque<Batch<A>>,
}

impl<A> Batcher<A> {
    /// An empty batcher.
    pub fn new(limits: Limits) -> Self {
        Batcher {
            limits: Limits {
                max_events: limits.max_events.max(1),
                max_bytes: limits.max_bytes.max(1),
                ..limits
            },
            payloads: Vec::new(),
            attached: Vec::new(),
            headers: Vec::new(),
            bytes: 0,
            opened_at: None,
            ready: VecDeque::new(),
        }
    }

    /// Adds one event, with an optional attachment released when its batch is committed.
    pub fn push(&mut self, payload: Bytes, attach: Option<A>, now: Instant) {
        self.push_with_headers(payload, Vec::new(), attach, now);
    }

    /// [`Batcher::push`] for a message with headers (none when `headers` is empty).
    pub fn push_with_headers(
        &mut self,
        payload: Bytes,
        headers: Vec<Header>,
        attach: Option<A>,
        now: Instant,
    ) {
        let size = if headers.is_empty() {
            payload.len()
        } else {
            payload.len() + 4 + headers_len(&headers)
        };
        if !self.payloads.is_empty() && self.bytes + size > self.limits.max_bytes {
            self.seal(Trigger::Bytes);
        }
        if self.payloads.is_empty() {
            self.opened_at = Some(now);
        }
        self.bytes += size;
        if !headers.is_empty() {
            // At most `max_events` (a `usize` from config) per batch: far below `u32::MAX`.
            let index = u32::try_from(self.payloads.len()).unwrap_or(u32::MAX);
            self.headers.push(IndexedHeaders { index, headers });
        }
        self.payloads.push(payload);
        self.attached.extend(attach);
        if self.payloads.len() >= self.limits.max_events {
            self.seal(Trigger::Events);
        } else if self.bytes >= self.limits.max_bytes {
            self.seal(Trigger::Bytes);
        }
    }

    /// When the open batch must flush, if one is open.
    pub fn deadline(&self) -> Option<Instant> {
        self.opened_at.map(|t| t + self.limits.max_delay)
    }

    /// Seals the open batch if its deadline has passed.
    pub fn poll_deadline(&mut self, now: Instant) {
        if self.deadline().is_some_and(|d| now >= d) {
            self.seal(Trigger::Delay);
        }
    }

    /// Seals the open batch regardless of limits.
    pub fn flush(&mut self) {
        self.seal(Trigger::Drain);
    }

    /// The next sealed batch.
    pub fn pop_ready(&mut self) -> Option<Batch<A>> {
        self.ready.pop_front()
    }

    /// Whether nothing is open or sealed.
    pub fn is_empty(&self) -> bool {
        self.payloads.is_empty() && self.ready.is_empty()
    }

    fn seal(&mut self, trigger: Trigger) {
        if self.payloads.is_empty() {
            return;
        }
        let cap = self.limits.max_events.min(1024);
        self.ready.push_back(Batch {
            payloads: std::mem::replace(&mut self.payloads, Vec::with_capacity(cap)),
            attached: std::mem::take(&mut self.attached),
            headers: std::mem::take(&mut self.headers),
            bytes: std::mem::take(&mut self.bytes),
            trigger,
        });
        self.opened_at = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(events: usize, bytes: usize, delay_us: u64) -> Limits {
        Limits {
            max_events: events,
            max_bytes: bytes,
            max_delay: Duration::from_micros(delay_us),
        }
    }

    fn p(n: usize) -> Bytes {
        Bytes::from(vec![7u8; n])
    }

    #[test]
    fn count_trigger() {
        let now = Instant::now();
        let mut b: Batcher<u32> = Batcher::new(limits(3, 1 << 20, 1000));
        b.push(p(1), Some(1), now);
        b.push(p(1), None, now);
        assert!(b.pop_ready().is_none());
        b.push(p(1), Some(3), now);
        let batch = b.pop_ready().expect("sealed at 3 events");
        assert_eq!((batch.payloads.len(), batch.trigger), (3, Trigger::Events));
        assert_eq!(batch.attached, vec![1, 3]);
        assert!(b.is_empty() && b.deadline().is_none());
    }

    #[test]
    fn bytes_trigger_and_overflow_flushes_first() {
        let now = Instant::now();
        let mut b: Batcher<()> = Batcher::new(limits(100, 10, 1000));
        b.push(p(6), None, now);
        b.push(p(6), None, now); // would be 12 > 10: the first batch goes alone
        let first = b.pop_ready().expect("overflow seals");
        assert_eq!((first.bytes, first.trigger), (6, Trigger::Bytes));
        b.push(p(4), None, now); // 10 bytes: reaches the limit
        let second = b.pop_ready().expect("limit reached");
        assert_eq!((second.payloads.len(), second.bytes), (2, 10));
        b.push(p(50), None, now); // single oversized event forms its own batch
        assert_eq!(b.pop_ready().map(|x| x.bytes), Some(50));
    }

    #[test]
    fn delay_trigger() {
        let t0 = Instant::now();
        let mut b: Batcher<()> = Batcher::new(limits(100, 1 << 20, 250));
        b.push(p(1), None, t0);
        b.push(p(1), None, t0 + Duration::from_micros(100));
        assert_eq!(b.deadline(), Some(t0 + Duration::from_micros(250)));
        b.poll_deadline(t0 + Duration::from_micros(249));
        assert!(b.pop_ready().is_none());
        b.poll_deadline(t0 + Duration::from_micros(250));
        let batch = b.pop_ready().expect("deadline passed");
        assert_eq!((batch.payloads.len(), batch.trigger), (2, Trigger::Delay));
    }

    #[test]
    fn headers_ride_to_the_seal_by_index_and_count_as_bytes() {
        let now = Instant::now();
        let mut b: Batcher<()> = Batcher::new(limits(3, 1 << 20, 1000));
        b.push(p(1), None, now);
        b.push_with_headers(p(1), vec![Header::new("k", "v")], None, now);
        b.push(p(1), None, now);
        let batch = b.pop_ready().expect("sealed at 3 events");
        assert_eq!(
            batch.headers,
            vec![IndexedHeaders {
                index: 1,
                headers: vec![Header::new("k", "v")]
            }]
        );
        // 3 payload bytes, the entry's index (4) and its list (4 + 3 + 3).
        assert_eq!(batch.bytes, 3 + 4 + 10);
        // The next batch numbers its messages from 0 again.
        b.push_with_headers(p(0), vec![Header::new("a", "")], None, now);
        b.flush();
        let next = b.pop_ready().expect("flushed");
        assert_eq!(next.headers[0].index, 0);
        // Headers count toward max_bytes: one that would overflow seals the batch before it.
        let mut small: Batcher<()> = Batcher::new(limits(100, 12, 1000));
        small.push(p(4), None, now);
        small.push_with_headers(p(1), vec![Header::new("k", "v")], None, now);
        let first = small.pop_ready().expect("overflow seals");
        assert!(first.headers.is_empty());
        assert_eq!(first.payloads.len(), 1);
    }

    #[test]
    fn drain_flushes_partial_batches_only_when_non_empty() {
        let mut b: Batcher<()> = Batcher::new(limits(100, 100, 100));
        b.flush();
        assert!(b.pop_ready().is_none());
        b.push(p(1), None, Instant::now());
        b.flush();
        assert_eq!(b.pop_ready().map(|x| x.trigger), Some(Trigger::Drain));
    }
}
