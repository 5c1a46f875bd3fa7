//! The retained tail of one topic: its most recent encoded EventBatches, kept for
//! `replay_window_ms` (and at most `replay_max_bytes`), so a subscriber that resumes with the
//! position it reached (`Subscribe.resume`) first gets what it missed while it had no
//! subscription: a broker restart, an owner change, a lost connection.
//!
//! The batches are the very `Bytes` the fan-out shared with every subscriber, so retaining one
//! costs a reference count. Which batches a resume position needs is [`Retained::replay`]: the
//! rest of the position's own stream, and every batch of a stream that started later (stream
//! ids grow with their start time). Positions are the
//! topic owner's (see [`starling_proto::Position`]), so a relaying broker's copy answers the
//! same question the same way, for a position it reaches back to ([`Retained::covers`]); for
//! an older one a relay sends the owner's replay first (`cluster::catchup`), since the tail's
//! newer events must not go before the older ones it lacks.
//!
//! Each batch also carries its wall-clock time (Unix milliseconds: for a durable topic the
//! timestamp of its log record, else when it was fanned out here), so a subscription from a
//! time finds where to start in memory: [`Retained::position_at_time`] gives the position of
//! the first batch stamped at or after it, which is then replayed like a resume position.

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

use bytes::Bytes;
use starling_proto::Position;

/// One retained EventBatch.
#[derive(Debug, Clone)]
struct Kept {
    stream: u64,
    first_seq: u64,
    events: u32,
    frame: Bytes,
    at: Instant,
    /// Wall-clock time of the batch, Unix milliseconds.
    time_ms: u64,
}

impl Kept {
    /// One past the last event's sequence number.
    fn end(&self) -> u64 {
        self.first_seq.saturating_add(u64::from(self.events))
    }
}

/// A batch to send again: the encoded frame and its event count.
#[derive(Debug, Clone)]
pub struct Replay {
    /// The encoded EventBatch frame.
    pub frame: Bytes,
    /// Events in it.
    pub events: u32,
}

/// A topic's retained batches, oldest first.
#[derive(Debug)]
pub struct Retained {
    kept: VecDeque<Kept>,
    bytes: usize,
    window: Duration,
    max_bytes: usize,
}

impl Retained {
    /// Keeps batches for `window`, at most `max_bytes` of encoded frames; a zero in either
    /// keeps nothing.
    pub fn new(window: Duration, max_bytes: usize) -> Retained {
        Retained {
            kept: VecDeque::new(),
            bytes: 0,
            window,
            max_bytes,
        }
    }

    /// Whether anything is ever kept.
    pub fn enabled(&self) -> bool {
        !self.window.is_zero() && self.max_bytes > 0
    }

    /// Bytes of encoded frames held now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Keeps a batch just fanned out, stamped `time_ms` (Unix milliseconds; raised to the
    /// previous batch's if older, so times never fall along the tail); returns the bytes it
    /// added minus the bytes evicted.
    pub fn push(
        &mut self,
        stream: u64,
        first_seq: u64,
        events: u32,
        frame: Bytes,
        now: Instant,
        time_ms: u64,
    ) -> isize {
        if !self.enabled() || frame.len() > self.max_bytes {
            return -(self.clear() as isize);
        }
        let added = frame.len();
        self.bytes += added;
        let time_ms = self.kept.back().map_or(time_ms, |k| time_ms.max(k.time_ms));
        self.kept.push_back(Kept {
            stream,
            first_seq,
            events,
            frame,
            at: now,
            time_ms,
        });
        added as isize - self.evict(now) as isize
    }

    /// Drops batches older than the window and, oldest first, beyond the byte limit; returns
    /// the bytes freed.
    pub fn evict(&mut self, now: Instant) -> usize {
        let mut freed = 0;
        while let Some(front) = self.kept.front() {
            let expired = now.saturating_duration_since(front.at) > self.window;
            if !expired && self.bytes <= self.max_bytes {
                break;
            }
            freed += front.frame.len();
            self.bytes -= front.frame.len();
            self.kept.pop_front();
        }
        freed
    }

    /// Drops the oldest batch held; returns the bytes freed (0 when nothing is held). What
    /// stays is still one run without holes.
    pub fn evict_oldest(&mut self) -> usize {
        match self.kept.pop_front() {
            Some(k) => {
                self.bytes -= k.frame.len();
                k.frame.len()
            }
            None => 0,
        }
    }

    /// When the oldest batch held expires (a moment after its window ends), if any is held.
    /// The topic's task evicts then, so a topic that went quiet does not hold its tail until
    /// its next publish.
    pub fn next_expiry(&self) -> Option<Instant> {
        self.kept
            .front()
            .map(|k| k.at + self.window + Duration::from_millis(1))
    }

    /// Drops everything; returns the bytes freed.
    pub fn clear(&mut self) -> usize {
        let freed = self.bytes;
        self.kept.clear();
        self.bytes = 0;
        freed
    }

    /// Whether the retained batches reach back to `from`: the oldest one starts at or before
    /// it, so [`Retained::replay`] misses nothing after it that the topic delivered. When
    /// not, a durable topic replays from its log instead.
    pub fn covers(&self, from: Position) -> bool {
        self.kept
            .front()
            .is_some_and(|k| (k.stream, k.first_seq) <= (from.stream, from.seq))
    }

    /// The position of the first retained batch stamped at or after `time_ms` (its first
    /// event's), or `None` when every batch held is older (or nothing is held). A time before
    /// the oldest batch gives the oldest batch: what is retained starts there. Replaying from
    /// the position ([`Retained::replay`]) sends that batch and every later one of its stream
    /// and of later streams.
    pub fn position_at_time(&self, time_ms: u64) -> Option<Position> {
        self.kept
            .iter()
            .find(|k| k.time_ms >= time_ms)
            .map(|k| Position {
                stream: k.stream,
                seq: k.first_seq,
            })
    }

    /// The batches a subscriber resuming at `from` (the next event it wants) has not seen,
    /// oldest first: those of `from.stream` that hold an event at or after `from.seq`, and
    /// every batch of a stream that started after `from.stream` (stream ids grow with their
    /// start time). The subscriber was numbered in `from.stream` last, so it cannot have seen
    /// an event of a later stream: every event has one position wherever it is delivered. This
    /// holds however many streams the topic went through meanwhile (an owner that restarted
    /// and then saw the membership change, say), and whether `from.stream` is retained here or
    /// was another owner's.
    ///
    /// A batch holding both seen and unseen events is sent whole; the client drops the events
    /// before its resume point.
    pub fn replay(&self, from: Position) -> Vec<Replay> {
        self.kept
            .iter()
            .filter(|k| k.stream > from.stream || (k.stream == from.stream && k.end() > from.seq))
            .map(|k| Replay {
                frame: k.frame.clone(),
                events: k.events,
            })
            .collect()
    }
}

/// Consecutive replay frames grouped into runs of at most `max_bytes` (a single larger frame
/// stays alone), written back to back. A whole replay then takes a few slots of the
/// subscriber's queue rather than one per batch, so a queue sized for live traffic does not
/// drop the replay's oldest part. The frames are the retained `Bytes` themselves: grouping
/// copies no payload, so a replay repeated by many resuming subscribers costs reference
/// counts, not bytes.
pub fn coalesce(batches: Vec<Replay>, max_bytes: usize) -> Vec<ReplayRun> {
    let mut out: Vec<ReplayRun> = Vec::new();
    let mut run: Vec<Bytes> = Vec::new();
    let (mut bytes, mut events) = (0usize, 0u32);
    for b in batches {
        if !run.is_empty() && bytes + b.frame.len() > max_bytes {
            out.push(ReplayRun {
                frames: std::mem::take(&mut run).into(),
                events,
            });
            (bytes, events) = (0, 0);
        }
        bytes += b.frame.len();
        events = events.saturating_add(b.events);
        run.push(b.frame);
    }
    if !run.is_empty() {
        out.push(ReplayRun {
            frames: run.into(),
            events,
        });
    }
    out
}

/// Retained frames queued to a resuming subscriber as one item.
#[derive(Debug, Clone)]
pub struct ReplayRun {
    /// The frames, in order (shared with the retained tail).
    pub frames: std::sync::Arc<[Bytes]>,
    /// Events in them.
    pub events: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(tag: u8, len: usize) -> Bytes {
        Bytes::from(vec![tag; len])
    }

    fn tags(r: &[Replay]) -> Vec<u8> {
        r.iter().map(|b| b.frame[0]).collect()
    }

    fn pos(stream: u64, seq: u64) -> Position {
        Position { stream, seq }
    }

    #[test]
    fn the_oldest_batch_sets_the_next_expiry() {
        let t0 = Instant::now();
        let window = Duration::from_secs(30);
        let mut r = Retained::new(window, 1 << 20);
        assert_eq!(r.next_expiry(), None);
        r.push(7, 0, 10, frame(1, 10), t0, 0);
        r.push(7, 10, 10, frame(2, 10), t0 + Duration::from_secs(5), 0);
        let first = r.next_expiry().expect("something held");
        assert!(first > t0 + window && first <= t0 + window + Duration::from_millis(1));
        // At that moment the first batch is gone and the second one sets the next expiry.
        assert_eq!(r.evict(first), 10);
        assert_eq!(r.bytes(), 10);
        let second = r.next_expiry().expect("second held");
        assert_eq!(second - first, Duration::from_secs(5));
        assert_eq!(r.evict(second), 10);
        assert_eq!(r.next_expiry(), None);
    }

    #[test]
    fn evicting_the_oldest_keeps_the_newest_run() {
        let now = Instant::now();
        let mut r = Retained::new(Duration::from_secs(30), 1 << 20);
        assert_eq!(r.evict_oldest(), 0);
        r.push(7, 0, 10, frame(1, 10), now, 0);
        r.push(7, 10, 10, frame(2, 20), now, 0);
        assert_eq!(r.evict_oldest(), 10);
        assert_eq!(r.bytes(), 20);
        assert_eq!(tags(&r.replay(pos(7, 0))), [2]);
    }

    #[test]
    fn resumes_inside_its_stream() {
        let now = Instant::now();
        let mut r = Retained::new(Duration::from_secs(30), 1 << 20);
        r.push(7, 0, 10, frame(1, 10), now, 0); // 0..10
        r.push(7, 10, 10, frame(2, 10), now, 0); // 10..20
        r.push(7, 20, 5, frame(3, 10), now, 0); // 20..25
        assert_eq!(tags(&r.replay(pos(7, 0))), [1, 2, 3]);
        assert_eq!(
            tags(&r.replay(pos(7, 15))),
            [2, 3],
            "partial batch sent whole"
        );
        assert_eq!(tags(&r.replay(pos(7, 20))), [3]);
        assert!(r.replay(pos(7, 25)).is_empty(), "caught up");
    }

    #[test]
    fn later_streams_follow_whether_or_not_the_resume_stream_is_here() {
        let now = Instant::now();
        let mut r = Retained::new(Duration::from_secs(30), 1 << 20);
        r.push(10, 0, 5, frame(1, 10), now, 0);
        r.push(10, 5, 5, frame(2, 10), now, 0);
        r.push(20, 0, 5, frame(3, 10), now, 0); // the membership changed: stream 20
        r.push(30, 0, 5, frame(4, 10), now, 0); // and again: stream 30
        assert_eq!(tags(&r.replay(pos(10, 5))), [2, 3, 4]);
        assert_eq!(tags(&r.replay(pos(10, 10))), [3, 4]);
        assert_eq!(tags(&r.replay(pos(20, 5))), [4]);
        // From another owner's stream 15 (started between 10 and 20): streams 20 and 30, both
        // of which started after it; nothing of 10.
        assert_eq!(tags(&r.replay(pos(15, 1000))), [3, 4]);
        // From a stream older than anything here (the owner restarted): everything.
        assert_eq!(tags(&r.replay(pos(5, 7))), [1, 2, 3, 4]);
        // From a stream newer than anything here: nothing to replay.
        assert_eq!(tags(&r.replay(pos(99, 0))), Vec::<u8>::new());
    }

    #[test]
    fn the_window_and_the_byte_limit_evict_oldest_first() {
        let t0 = Instant::now();
        let mut r = Retained::new(Duration::from_secs(10), 25);
        assert_eq!(r.push(1, 0, 1, frame(1, 10), t0, 0), 10);
        assert_eq!(r.push(1, 1, 1, frame(2, 10), t0, 0), 10);
        assert_eq!(r.push(1, 2, 1, frame(3, 10), t0, 0), 0, "10 in, 10 out");
        assert_eq!(r.bytes(), 20);
        assert_eq!(tags(&r.replay(pos(1, 0))), [2, 3]);
        assert_eq!(r.evict(t0 + Duration::from_secs(11)), 20);
        assert!(r.replay(pos(1, 0)).is_empty());
        // A frame larger than the limit is never kept, and the rest goes too: what is retained
        // stays one run without holes.
        r.push(1, 3, 1, frame(4, 10), t0, 0);
        assert_eq!(r.push(1, 4, 1, frame(5, 30), t0, 0), -10);
        assert_eq!(r.bytes(), 0);
    }

    #[test]
    fn replays_are_joined_into_few_chunks() {
        let batches: Vec<Replay> = (1..=5)
            .map(|tag| Replay {
                frame: frame(tag, 10),
                events: 2,
            })
            .collect();
        let originals: Vec<Bytes> = batches.iter().map(|b| b.frame.clone()).collect();
        let chunks = coalesce(batches, 25);
        let shape: Vec<(Vec<u8>, u32)> = chunks
            .iter()
            .map(|c| (c.frames.concat(), c.events))
            .collect();
        // The runs hold the retained frames themselves, not copies.
        let held: Vec<&Bytes> = chunks.iter().flat_map(|c| c.frames.iter()).collect();
        assert_eq!(held.len(), originals.len());
        for (h, o) in held.iter().zip(&originals) {
            assert_eq!(h.as_ptr(), o.as_ptr(), "a replayed frame was copied");
        }
        assert_eq!(shape.len(), 3);
        assert_eq!(shape[0].0, [vec![1; 10], vec![2; 10]].concat());
        assert_eq!(shape[0].1, 4);
        assert_eq!(shape[2], (vec![5; 10], 2));
        assert!(coalesce(Vec::new(), 25).is_empty());
    }

    #[test]
    fn a_time_finds_the_first_batch_stamped_at_or_after_it() {
        let now = Instant::now();
        let mut r = Retained::new(Duration::from_secs(30), 1 << 20);
        assert_eq!(r.position_at_time(0), None, "nothing held");
        r.push(7, 0, 10, frame(1, 10), now, 1_000); // 0..10
        r.push(7, 10, 10, frame(2, 10), now, 2_000); // 10..20
        r.push(7, 20, 5, frame(3, 10), now, 2_000); // 20..25, same millisecond
        r.push(9, 0, 5, frame(4, 10), now, 1_500); // a new stream; a clock that went back
        // Before the oldest batch: the oldest.
        assert_eq!(r.position_at_time(0), Some(pos(7, 0)));
        // Exactly on a batch's time: that batch; the first of two sharing a millisecond.
        assert_eq!(r.position_at_time(1_000), Some(pos(7, 0)));
        assert_eq!(r.position_at_time(2_000), Some(pos(7, 10)));
        // Between: the later one.
        assert_eq!(r.position_at_time(1_001), Some(pos(7, 10)));
        // The time that went back was raised: stream 9 is at 2 000, after the others.
        assert_eq!(r.position_at_time(2_000), Some(pos(7, 10)));
        assert_eq!(tags(&r.replay(pos(7, 10))), [2, 3, 4]);
        // After the newest: nothing (live only).
        assert_eq!(r.position_at_time(2_001), None);
        // Evicted batches are not found: the oldest left starts.
        r.evict_oldest();
        assert_eq!(r.position_at_time(0), Some(pos(7, 10)));
    }

    #[test]
    fn disabled_keeps_nothing() {
        let mut r = Retained::new(Duration::ZERO, 1 << 20);
        assert!(!r.enabled());
        r.push(1, 0, 1, frame(1, 10), Instant::now(), 0);
        assert!(r.replay(pos(1, 0)).is_empty());
    }
}
