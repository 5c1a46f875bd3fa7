//! What a log's writer, views and readers share: the segment list ([`Segment`]), the
//! published state ([`State`]: next and durable positions, the active file, the poison) and
//! [`Shared`], which also holds the file layer, the counters and the lock every fsync runs
//! under (see [`crate::log`]).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use starling_proto::Position;

use crate::config::{FsyncPolicy, LogConfig};
use crate::error::{Error, FailedOp, Failure, Result};
use crate::fs::{Fs, is_no_space};
use crate::index::SparseIndex;
use crate::stats::Counters;

/// One segment as the writer and readers share it.
#[derive(Debug)]
pub(crate) struct Segment {
    pub base: Position,
    pub path: PathBuf,
    pub index_path: PathBuf,
    /// Bytes of whole records published to readers.
    pub len: AtomicU64,
    pub records: AtomicU64,
    /// Set once the writer rolled past it (after its last `len` store).
    pub sealed: AtomicBool,
    /// Set when retention deleted it.
    pub deleted: AtomicBool,
    pub last_ms: AtomicU64,
    pub index: Mutex<SparseIndex>,
}

/// What the writer publishes.
#[derive(Debug)]
pub(crate) struct State<F: Fs> {
    /// Oldest first; the last is the active one.
    pub segments: Vec<Arc<Segment>>,
    /// One past the last record.
    pub next: Option<Position>,
    /// One past the last durable record.
    pub durable: Option<Position>,
    /// The active segment's file, for `sync` from other threads.
    pub active_file: Option<Arc<F::File>>,
    /// The first failure that poisoned the log (see [`Error::Failed`]).
    pub failure: Option<Failure>,
}

/// What the writer, the views and the readers share.
#[derive(Debug)]
pub(crate) struct Shared<F: Fs> {
    pub fs: F,
    pub dir: PathBuf,
    pub config: LogConfig,
    pub state: Mutex<State<F>>,
    pub stats: Counters,
    /// Held across every fsync and what it publishes (or the poison it sets).
    pub sync_lock: Mutex<()>,
    /// Set (under `state`) with `State::failure`, for a check without the lock.
    pub poisoned: AtomicBool,
}

impl<F: Fs> Shared<F> {
    /// Poisons the log (keeping the first failure) and returns the error to report.
    pub(crate) fn poison(&self, op: FailedOp, path: &Path, e: &io::Error) -> Error {
        let failure = Failure {
            op,
            path: path.to_path_buf(),
            error: e.to_string(),
            no_space: is_no_space(e),
        };
        let mut state = self.state.lock();
        let first = state.failure.get_or_insert(failure).clone();
        self.poisoned.store(true, Ordering::Release);
        Error::Failed(first)
    }

    pub(crate) fn failure(&self) -> Option<Failure> {
        if !self.poisoned.load(Ordering::Acquire) {
            return None;
        }
        self.state.lock().failure.clone()
    }

    pub(crate) fn check(&self) -> Result<()> {
        match self.failure() {
            Some(f) => Err(Error::Failed(f)),
            None => Ok(()),
        }
    }

    /// Fsyncs the directory (unless the policy is `Never`); a failure poisons. The caller
    /// holds `sync_lock`.
    pub(crate) fn sync_dir_locked(&self) -> Result<()> {
        if self.config.fsync == FsyncPolicy::Never {
            return Ok(());
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(|e| self.poison(FailedOp::DirSync, &self.dir, &e))
    }
}
