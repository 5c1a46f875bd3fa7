//! The Raft log of one replicated topic on a `starling-storage` log: openraft's
//! `RaftLogStorage` (storage-v2) and `RaftLogReader` for [`LogStore`].
//!
//! - The Raft log index is the record position: entry `i` is the record at
//!   `Position { stream: 1, seq: i }` with one event; its payload is the entry in the binary
//!   format of [`entry_codec`] (older builds wrote JSON, which is still read).
//! - `append` writes every entry of the call, then fsyncs once (group commit) and only then
//!   reports the entries flushed to the library ([`openraft::storage::LogFlushed`]); the
//!   library counts a replica towards a commit quorum only after that report.
//! - `truncate` (the library replacing a conflicting, uncommitted suffix) is
//!   [`Log::truncate_from`]; `purge` (the prefix a snapshot covers) records the purged log id
//!   first and then deletes whole segments before it ([`Log::remove_segments_before`]), or
//!   empties the log when the purge reaches its end (a follower that installed a snapshot
//!   past its log).
//! - The vote, the committed log id and the purged log id live in one small file,
//!   `raft-meta.json`, replaced atomically through the storage file layer ([`meta`]). A
//!   vote or a purge is written at once. The committed log id is written at most every
//!   [`COMMITTED_SAVE_INTERVAL`] (else it rides along with the next write): openraft treats
//!   a persisted committed id as a hint (a stale one only means a restarted replica
//!   re-applies from an older point once the leader tells it the commit index), and
//!   writing it at every commit costs two fsyncs per publish on every replica.
//!
//! The storage log is synchronous. Writes run inline on the Raft core's task; the fsync of an
//! `append` call runs on a blocking thread (`spawn_blocking`, outside the store's lock), and
//! the flushed callback fires after it. Truncation and purge (rare) run inline.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{AnyError, OptionalSend, RaftLogReader, StorageIOError};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use starling_storage::{Fs, FsyncPolicy, Log, LogConfig, Position};

use crate::codec;
use crate::entry_codec;
use crate::meta;
use crate::types::{Entry, LogId, StorageError, TypeConfig, Vote};

/// The stream id of every record of a replicated topic's logs.
pub const STREAM: u64 = 1;
/// The name of the vote / committed / purged file.
pub const META_FILE: &str = "raft-meta.json";
/// The longest the committed log id on disk waits for a write of its own.
pub const COMMITTED_SAVE_INTERVAL: Duration = Duration::from_millis(200);

/// The record position of log index `index`.
pub fn position(index: u64) -> Position {
    Position {
        stream: STREAM,
        seq: index,
    }
}

/// What `raft-meta.json` holds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct RaftMeta {
    vote: Option<Vote>,
    committed: Option<LogId>,
    purged: Option<LogId>,
}

struct Inner<F: Fs> {
    fs: F,
    dir: PathBuf,
    log: Log<F>,
    meta: RaftMeta,
    /// The last entry's log id (`None`: the log holds no entry).
    last: Option<LogId>,
    max_record: usize,
    /// When the meta file was last written.
    saved_at: Option<Instant>,
}

/// One topic's Raft log on a storage log; cloning shares it (the clone is the library's
/// log reader).
#[derive(Clone)]
pub struct LogStore<F: Fs> {
    inner: Arc<Mutex<Inner<F>>>,
}

impl<F: Fs> Debug for LogStore<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LogStore").finish_non_exhaustive()
    }
}

fn read_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::read_logs(AnyError::new(&e)).into()
}

fn write_err(e: impl std::error::Error + 'static) -> StorageError {
    StorageIOError::write_logs(AnyError::new(&e)).into()
}

/// The storage configuration of a Raft log: fsyncs are explicit (one per `append` call),
/// so the policy is `Interval` with no flusher running; sealed segments are fsynced at a
/// roll, as that policy does.
pub fn log_config(segment_bytes: u64, max_record_bytes: u32) -> LogConfig {
    LogConfig {
        segment_bytes,
        max_record_bytes,
        fsync: FsyncPolicy::Interval(Duration::from_secs(24 * 3600)),
        ..LogConfig::default()
    }
}

impl<F: Fs> LogStore<F> {
    /// Opens (creating it if needed) the Raft log in `dir` through `fs`, recovering the
    /// storage log and reading the meta file. A meta file that does not parse fails the open
    /// (it is only ever replaced whole).
    pub fn open(fs: F, dir: &Path, config: LogConfig) -> io::Result<LogStore<F>> {
        let (log, _report) =
            Log::open_in(fs.clone(), dir, config).map_err(|e| io::Error::other(e.to_string()))?;
        let max_record = config.max_record_bytes as usize;
        let meta = match meta::read(&fs, dir, META_FILE)? {
            Some(b) => codec::decode_body(&b, 1 << 20)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?,
            None => RaftMeta::default(),
        };
        let mut inner = Inner {
            fs,
            dir: dir.to_path_buf(),
            log,
            meta,
            last: None,
            max_record,
            saved_at: None,
        };
        inner.last = inner
            .read_last()
            .map_err(|e| io::Error::other(e.to_string()))?;
        Ok(LogStore {
            inner: Arc::new(Mutex::new(inner)),
        })
    }

    /// Whether the store holds nothing at all: no vote, no entry (a new or emptied volume).
    pub fn is_blank(&self) -> bool {
        let inner = self.inner.lock();
        inner.meta.vote.is_none() && inner.last.is_none() && inner.meta.purged.is_none()
    }
}

impl<F: Fs> Inner<F> {
    fn entry_at(&self, index: u64) -> Result<Option<Entry>, StorageError> {
        match self.log.read_from(position(index)).next() {
            None => Ok(None),
            Some(Err(e)) => Err(read_err(e)),
            Some(Ok(r)) if r.position.seq == index => {
                entry_codec::decode_entry_shared(&r.payload, self.max_record)
                    .map(Some)
                    .map_err(read_err)
            }
            Some(Ok(_)) => Ok(None),
        }
    }

    fn read_last(&self) -> Result<Option<LogId>, StorageError> {
        let Some(next) = self.log.next_position() else {
            return Ok(None);
        };
        let Some(index) = next.seq.checked_sub(1) else {
            return Ok(None);
        };
        Ok(self.entry_at(index)?.map(|e| e.log_id))
    }

    fn save_meta(&mut self) -> Result<(), StorageError> {
        let bytes = codec::encode_body(&self.meta).map_err(write_err)?;
        meta::write_atomic(&self.fs, &self.dir, META_FILE, &bytes)
            .map_err(|e| StorageIOError::write_vote(AnyError::new(&e)))?;
        self.saved_at = Some(Instant::now());
        Ok(())
    }

    fn entries(&self, start: u64, end: u64) -> Result<Vec<Entry>, StorageError> {
        let mut out = Vec::new();
        if start >= end {
            return Ok(out);
        }
        for r in self.log.read_from(position(start)) {
            let r = r.map_err(read_err)?;
            let index = r.position.seq;
            if index < start {
                continue;
            }
            if index >= end {
                break;
            }
            let entry =
                entry_codec::decode_entry_shared(&r.payload, self.max_record).map_err(read_err)?;
            out.push(entry);
        }
        Ok(out)
    }
}

fn bounds(range: &impl RangeBounds<u64>) -> (u64, u64) {
    let start = match range.start_bound() {
        Bound::Included(s) => *s,
        Bound::Excluded(s) => s.saturating_add(1),
        Bound::Unbounded => 0,
    };
    let end = match range.end_bound() {
        Bound::Included(e) => e.saturating_add(1),
        Bound::Excluded(e) => *e,
        Bound::Unbounded => u64::MAX,
    };
    (start, end)
}

impl<F: Fs> RaftLogReader<TypeConfig> for LogStore<F> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry>, StorageError> {
        let (start, end) = bounds(&range);
        self.inner.lock().entries(start, end)
    }
}

impl<F: Fs> RaftLogStorage<TypeConfig> for LogStore<F> {
    type LogReader = LogStore<F>;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, StorageError> {
        let inner = self.inner.lock();
        let purged = inner.meta.purged;
        let last = match (inner.last, purged) {
            (Some(l), Some(p)) if p.index > l.index => Some(p),
            (Some(l), _) => Some(l),
            (None, p) => p,
        };
        Ok(LogState {
            last_purged_log_id: purged,
            last_log_id: last,
        })
    }

    async fn get_log_reader(&mut self) -> LogStore<F> {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        inner.meta.vote = Some(*vote);
        inner.save_meta()
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, StorageError> {
        Ok(self.inner.lock().meta.vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        if inner.meta.committed == committed {
            return Ok(());
        }
        inner.meta.committed = committed;
        if inner
            .saved_at
            .is_some_and(|t| t.elapsed() < COMMITTED_SAVE_INTERVAL)
        {
            return Ok(());
        }
        inner.save_meta()
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, StorageError> {
        Ok(self.inner.lock().meta.committed)
    }

    async fn append<I>(
        &mut self,
        entries: I,
        callback: LogFlushed<TypeConfig>,
    ) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let (written, view) = {
            let mut inner = self.inner.lock();
            let mut result = Ok(());
            for entry in entries {
                let appended = entry_codec::encode_entry(&entry)
                    .map_err(write_err)
                    .and_then(|payload| {
                        inner
                            .log
                            .append(position(entry.log_id.index), 1, &payload)
                            .map_err(write_err)
                    });
                if let Err(e) = appended {
                    result = Err(e);
                    break;
                }
                inner.last = Some(entry.log_id);
            }
            (result, inner.log.view())
        };
        // The fsync runs on a blocking thread, outside the lock: the runtime's worker keeps
        // serving (the peer links, the replication tasks reading this log), and readers are
        // not held up. The library waits for the callback before its next log write.
        let result = match written {
            Ok(()) => match tokio::task::spawn_blocking(move || view.sync()).await {
                Ok(synced) => synced.map(|_| ()).map_err(write_err),
                Err(e) => Err(write_err(e)),
            },
            Err(e) => Err(e),
        };
        match result {
            Ok(()) => {
                callback.log_io_completed(Ok(()));
                Ok(())
            }
            Err(e) => {
                callback.log_io_completed(Err(io::Error::other(e.to_string())));
                Err(e)
            }
        }
    }

    async fn truncate(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        inner
            .log
            .truncate_from(position(log_id.index))
            .map_err(write_err)?;
        inner.last = inner.read_last()?;
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        if inner.meta.purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        inner.meta.purged = Some(log_id);
        inner.save_meta()?;
        if inner.last.is_none_or(|l| l.index <= log_id.index) {
            // Everything held is purged: empty the log so the next entry may take any index.
            inner.log.truncate_from(position(0)).map_err(write_err)?;
            inner.last = None;
        } else {
            inner
                .log
                .remove_segments_before(position(log_id.index.saturating_add(1)))
                .map_err(write_err)?;
        }
        Ok(())
    }
}
