//! Readers: iterators over a log's records from a position or a time, in order, across
//! segments, while appends continue.
//!
//! A [`Reader`] returns `None` when it has caught up with the writer; calling `next` again
//! later returns what was appended since (it is not fused). If retention deletes the segment
//! it is on, it returns one [`Error::Truncated`] and then ends; any other error ends it too.
//!
//! The reader constructors of [`Log`] and [`LogView`] (`read_from`, `read_from_time`,
//! `copy_from`, `position_at_time`) live here too, so the log does not depend on its readers.

use std::fs::File;
use std::io;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use starling_proto::Position;

use crate::error::{Error, Result, io_err};
use crate::log::{Log, LogView, Segment, Shared};
use crate::record::key;
use crate::segment::{Record, read_record_at};

impl Log {
    /// See [`LogView::read_from`].
    pub fn read_from(&self, position: Position) -> Reader {
        self.view().read_from(position)
    }

    /// See [`LogView::read_from_time`].
    pub fn read_from_time(&self, timestamp_ms: u64) -> Reader {
        self.view().read_from_time(timestamp_ms)
    }
}

impl LogView {
    /// Reads the log from the record holding `position` (or the first one after it), in
    /// order, across segments: the rest of `position`'s stream and every later stream, as
    /// the retained tail's replay does. A position older than what is left starts at the
    /// oldest record.
    pub fn read_from(&self, position: Position) -> Reader {
        Reader::new(Arc::clone(&self.shared), Start::Position(position))
    }

    /// Reads the log from the first record stamped at or after `timestamp_ms`.
    pub fn read_from_time(&self, timestamp_ms: u64) -> Reader {
        Reader::new(Arc::clone(&self.shared), Start::Time(timestamp_ms))
    }

    /// Like [`LogView::read_from`], but what it returns is not counted as replayed (a copy
    /// for another member, not a resume).
    pub fn copy_from(&self, position: Position) -> Reader {
        Reader::new(Arc::clone(&self.shared), Start::Position(position)).uncounted()
    }

    /// Where [`LogView::read_from_time`] starts, as a position: the position of the first
    /// record stamped at or after `timestamp_ms` (found through the time index), or `None`
    /// when every record is older or the log is empty. [`LogView::read_from`] that position
    /// returns what `read_from_time(timestamp_ms)` does, so a time can be served as a resume
    /// position. A time before the oldest record gives the oldest record's position; several
    /// records stamped with the same millisecond give the first of them. Reads the records
    /// from the index checkpoint before that time up to the one found (about
    /// `index_interval_bytes` and one record), and does not count as a replay. Retention
    /// deleting the segment being looked at is retried on the segments left.
    pub fn position_at_time(&self, timestamp_ms: u64) -> Result<Option<Position>> {
        let mut attempts = 0;
        loop {
            attempts += 1;
            let reader = Reader::new(Arc::clone(&self.shared), Start::Time(timestamp_ms));
            match reader.uncounted().next() {
                None => return Ok(None),
                Some(Ok(record)) => return Ok(Some(record.position)),
                Some(Err(Error::Truncated { .. })) if attempts < 3 => continue,
                Some(Err(e)) => return Err(e),
            }
        }
    }
}

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
pub struct Reader {
    shared: Arc<Shared>,
    start: Start,
    /// Still skipping records before the start.
    seeking: bool,
    /// Whether returned records count as replayed (`LogStats::records_replayed`).
    counted: bool,
    seg: Option<Arc<Segment>>,
    file: Option<File>,
    offset: u64,
    done: bool,
}

impl Reader {
    /// A reader placed at its start now (so retention deleting that segment before the
    /// first `next` ends it with [`Error::Truncated`] rather than skipping silently); on an
    /// empty log it is placed at the first `next` that finds a segment.
    pub(crate) fn new(shared: Arc<Shared>, start: Start) -> Reader {
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
    pub(crate) fn uncounted(mut self) -> Reader {
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

impl Iterator for Reader {
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
                match File::open(&seg.path) {
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
