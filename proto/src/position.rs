//! Stream positions: the [`Position`] every delivered event carries, and [`SeenStreams`], the
//! record of how far each recent stream has been received, with which a relaying broker and a
//! resubscribing client drop the events a replay sends them twice.

use std::collections::VecDeque;

/// A place in a topic's event streams: event `seq` of stream `stream`.
///
/// Every event a topic's owner accepts gets a position: the owner's current stream id and a
/// sequence number counting up within that stream. A broker draws a new stream id when it
/// starts serving the topic and after every membership change that leaves the topic with it (a
/// late batch at a former owner continues the old stream); ids are nonzero and grow with
/// the stream's start time (wall-clock milliseconds in the high bits, 20 random bits below), so
/// a broker can tell which streams started after a given one. Brokers relaying a topic from its owner keep the owner's positions, so
/// one event has the same position wherever it is delivered. In a `Subscribe` it names the
/// next event the subscriber wants (one past the last it received).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    /// The stream id; never 0.
    pub stream: u64,
    /// A sequence number within the stream.
    pub seq: u64,
}

/// How far each of the last few streams has been received: for each, one past the highest
/// sequence number seen.
#[derive(Debug, Default, Clone)]
pub struct SeenStreams {
    next: VecDeque<(u64, u64)>,
}

impl SeenStreams {
    /// Streams remembered; the oldest is forgotten first.
    pub const STREAMS: usize = 8;

    /// Records a run of `len` events starting at `first` and returns how many of its leading
    /// events were already received (0 ..= `len`): those are duplicates to drop.
    pub fn skip(&mut self, first: Position, len: usize) -> usize {
        let end = first.seq.saturating_add(len as u64);
        match self.next.iter_mut().find(|(s, _)| *s == first.stream) {
            Some((_, next)) => {
                let skip = next.saturating_sub(first.seq).min(len as u64);
                *next = (*next).max(end);
                // `skip` is at most `len`, a usize.
                usize::try_from(skip).unwrap_or(len)
            }
            None => {
                if self.next.len() == Self::STREAMS {
                    self.next.pop_front();
                }
                self.next.push_back((first.stream, end));
                0
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(stream: u64, seq: u64) -> Position {
        Position { stream, seq }
    }

    #[test]
    fn replays_overlapping_what_was_seen_are_trimmed() {
        let mut s = SeenStreams::default();
        assert_eq!(s.skip(at(1, 0), 10), 0);
        assert_eq!(s.skip(at(1, 5), 10), 5, "5..10 seen, 10..15 new");
        assert_eq!(s.skip(at(1, 0), 3), 3, "all seen");
        assert_eq!(s.skip(at(1, 15), 1), 0);
        // Another stream is new; the first is still remembered.
        assert_eq!(s.skip(at(2, 0), 4), 0);
        assert_eq!(s.skip(at(1, 12), 4), 4);
    }

    #[test]
    fn only_the_last_streams_are_remembered() {
        let mut s = SeenStreams::default();
        for stream in 1..=(SeenStreams::STREAMS as u64 + 1) {
            s.skip(at(stream, 0), 1);
        }
        assert_eq!(s.skip(at(1, 0), 1), 0, "the oldest stream was forgotten");
        assert_eq!(s.skip(at(SeenStreams::STREAMS as u64 + 1, 0), 1), 1);
    }
}
