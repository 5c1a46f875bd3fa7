//! A log's configuration: [`LogConfig`] and its [`FsyncPolicy`].

use std::time::Duration;

use crate::error::{Error, Result};
use crate::retention::RetentionPolicy;

/// When appended records are fsynced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// Before `append` returns: an appended record is durable.
    Always,
    /// When [`LogView::sync`] runs, which the caller (or a [`crate::Flusher`]) does every
    /// interval; [`LogView::durable_next`] says how far the log is durable. Sealed segments
    /// are fsynced when the log rolls past them.
    Interval(Duration),
    /// Never: records are in the OS page cache when `append` returns; they survive a crash of
    /// the process but not of the machine.
    Never,
}

/// A log's configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogConfig {
    /// A segment is rolled before a record would take it past this many bytes (a record
    /// larger than this gets a segment of its own).
    pub segment_bytes: u64,
    /// An index checkpoint is added once this many segment bytes lie since the last one.
    pub index_interval_bytes: u64,
    /// The largest payload appended or read; a declared length beyond it is refused before
    /// anything is allocated.
    pub max_record_bytes: u32,
    /// When records are fsynced.
    pub fsync: FsyncPolicy,
    /// What [`Log::enforce_retention`] deletes.
    pub retention: RetentionPolicy,
}

impl Default for LogConfig {
    fn default() -> LogConfig {
        LogConfig {
            segment_bytes: 64 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_record_bytes: 16 * 1024 * 1024,
            fsync: FsyncPolicy::Always,
            retention: RetentionPolicy::default(),
        }
    }
}

impl LogConfig {
    pub(crate) fn validate(&self) -> Result<()> {
        if self.segment_bytes == 0 {
            return Err(Error::Config("segment_bytes must be positive"));
        }
        if self.index_interval_bytes == 0 {
            return Err(Error::Config("index_interval_bytes must be positive"));
        }
        if self.max_record_bytes == 0 {
            return Err(Error::Config("max_record_bytes must be positive"));
        }
        if matches!(self.fsync, FsyncPolicy::Interval(d) if d.is_zero()) {
            return Err(Error::Config("the fsync interval must be positive"));
        }
        Ok(())
    }
}
