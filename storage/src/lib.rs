//! Starling's durable log: the on-disk, append-only, segmented record log that a durable
//! topic's owner appends each sealed batch (one encoded `EventBatch` frame) to, numbered with
//! its [`Position`].
//!
//! - [`record`]: the record format (magic, version, position, event count, timestamp,
//!   payload, CRC-32C) and its bounded decoder.
//! - [`segment`]: segment files named by their first position, and reading records back.
//! - [`index`]: the sparse position/time → offset index beside each segment (a cache).
//! - [`log`](Log): the writer ([`Log`]) and the shared handle ([`LogView`]); `config`: the
//!   config ([`LogConfig`]) and fsync policy; `shared`: what the writer, views and readers
//!   share (the segment list, the published positions, the poison).
//! - [`recovery`](RecoveryReport): what opening a log scans, truncates, quarantines and
//!   rebuilds.
//! - [`fs`]: the file layer the log writes through ([`Fs`], [`RealFs`]), and [`fault`]: an
//!   in-memory one for tests that keeps what a power cut would and injects failed fsyncs and
//!   a full disk.
//! - [`reader`](Reader): iterators from a position or a time.
//! - [`retention`]: deleting whole segments by bytes and age.
//! - `truncate`: cutting the log's tail back ([`Log::truncate_from`]) and deleting whole
//!   segments before a position ([`Log::remove_segments_before`]), for a replicated log
//!   store whose consensus library rewrites an uncommitted suffix and purges a prefix.
//! - [`Flusher`]: the background sync for the `Interval` policy.
//! - [`LogStats`]: counters and figures for metrics.
//!
//! The layout on disk is described in `docs/architecture.md`, "Durable log".

mod config;
pub mod error;
pub mod fault;
mod flusher;
pub mod fs;
pub mod index;
mod log;
mod reader;
pub mod record;
mod recovery;
pub mod retention;
pub mod segment;
mod shared;
mod stats;
mod truncate;

pub use error::{Error, FailedOp, Failure, Malformed, Result};
pub use flusher::Flusher;
pub use fs::{Fs, FsFile, RealFs};
pub use log::{Appended, FsyncPolicy, Log, LogConfig, LogView, Synced, now_ms};
pub use reader::Reader;
pub use recovery::{QUARANTINE_SUFFIX, RecoveryReport};
pub use retention::{RetentionPolicy, RetentionReport, RetentionSource};
pub use segment::Record;
pub use starling_proto::Position;
pub use stats::LogStats;
pub use truncate::Cut;
