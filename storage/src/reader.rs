//! Readers: iterators over a log's records from a position or a time, in order, across
//! segments, while appends continue.
//!
//! A [`Reader`] returns `None` when it has caught up with the writer; calling `next` again
//! later returns what was appended since (it is not fused). If retention deletes the segment
//! it is on, it returns one [`Error::Truncated`] and then ends; any other error ends it too.

use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use starling_proto::Position;

use crate::error::{Error, Result, io_err};
use crate::fs::{Fs, RealFs};
use crate::record::key;
use crate::segment::{Record, read_record_at};
use crate::shared::{Segment, Shared};

/// Where a reader starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Start {
    /// The record holding this position, or the first after it.
    Position(Position),
    /// The first record stamped at or after this time.
    Time(u64),
}

impl Start {
    /// Whether `record` comes before the start and is skipped.
    fn skips(&self, record: &Record) -> bool {
        match *self {
            Start::Position(p) => key(record.end()) <= key(p),
            Start::Time(t) => record.timestamp_ms < t,
        }
    }
}

/// An iterator over a log's records; see the module doc.
#[derive(Debug)]
pub struct Reader<F: Fs = RealFs> {
    shared: Arc<Shared<F>>,
    start: Start,
    /// Still skipping records before the start.
    seeking: bool,
    /// Whether returned records count as replayed (`LogStats::records_replayed`).
    counted: bool,
    seg: Option<Arc<Segment>>,
    file: Option<F::File>,
    offset: u64,
    done: bool,
}

impl<F: Fs> Reader<F> {
    /// A reader placed at its start now (so retention deleting that segment before the
    /// first `next` ends it with [`Error::Truncated`] rather than skipping silently); on an
    /// empty log it is placed at the first `next` that finds a segment.
    pub(crate) fn new(shared: Arc<Shared<F>>, start: Start) -> Reader<F> {
        let mut reader = Reader {
            shared,
            start,
            seeking: true,
            counted: true,
            seg: None,
            file: None,
            offset: 0,
            done: false,
        };
        if let Some((seg, offset)) = reader.locate() {
            reader.seg = Some(seg);
            reader.offset = offset;
        }
        reader
    }

    /// The same reader, not counting what it returns as replayed (a lookup, not a replay).
    pub(crate) fn uncounted(mut self) -> Reader<F> {
        self.counted = false;
        self
    }

    /// Picks the segment and the offset to start scanning from (`None`: the log is empty).
    fn locate(&self) -> Option<(Arc<Segment>, u64)> {
        let state = self.shared.state.lock();
        let segs = &state.segments;
        let seg = match self.start {
            Start::Position(p) => {
                let i = segs.partition_point(|s| key(s.base) <= key(p));
                segs.get(i.saturating_sub(1))?
            }
            Start::Time(t) => segs
                .iter()
                .find(|s| s.last_ms.load(Ordering::Relaxed) >= t)
                .or(segs.last())?,
        };
        let index = seg.index.lock();
        let checkpoint = match self.start {
            Start::Position(p) => index.seek_position(p),
            Start::Time(t) => index.seek_time(t),
        };
        Some((Arc::clone(seg), checkpoint.map_or(0, |e| e.offset)))
    }

    /// The segment after `base`, if the writer has started one.
    fn after(&self, base: Position) -> Option<Arc<Segment>> {
        let state = self.shared.state.lock();
        state
            .segments
            .iter()
            .find(|s| key(s.base) > key(base))
            .cloned()
    }

    fn truncated(&mut self, seg: &Segment) -> Option<Result<Record>> {
        self.done = true;
        self.file = None;
        Some(Err(Error::Truncated { segment: seg.base }))
    }
}

impl<F: Fs> Iterator for Reader<F> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        loop {
            if self.done {
                return None;
            }
            let seg = match &self.seg {
                Some(s) => Arc::clone(s),
                None => {
                    let (seg, offset) = self.locate()?;
                    self.seg = Some(Arc::clone(&seg));
                    self.offset = offset;
                    seg
                }
            };
            if seg.deleted.load(Ordering::Acquire) {
                return self.truncated(&seg);
            }
            // `sealed` before `len`: once sealed is seen, the length read is final.
            let sealed = seg.sealed.load(Ordering::Acquire);
            let len = seg.len.load(Ordering::Acquire);
            if self.offset >= len {
                if !sealed {
                    return None;
                }
                let next = self.after(seg.base)?;
                self.seg = Some(next);
                self.file = None;
                self.offset = 0;
                continue;
            }
            if self.file.is_none() {
                match self.shared.fs.open_read(&seg.path) {
                    Ok(f) => self.file = Some(f),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        return self.truncated(&seg);
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(io_err(&seg.path)(e)));
                    }
                }
            }
            let file = self.file.as_ref()?;
            let max = self.shared.config.max_record_bytes;
            match read_record_at(file, &seg.path, self.offset, len, max) {
                Ok((record, record_len)) => {
                    self.offset += record_len;
                    if self.seeking && self.start.skips(&record) {
                        continue;
                    }
                    self.seeking = false;
                    if self.counted {
                        self.shared
                            .stats
                            .records_replayed
                            .fetch_add(1, Ordering::Relaxed);
                    }
                    return Some(Ok(record));
                }
                Err(e) => {
                    if seg.deleted.load(Ordering::Acquire) {
                        return self.truncated(&seg);
                    }
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
    }
}
