//! The crate's one error type, [`Error`], and what a malformed on-disk record looks like,
//! [`Malformed`]. Every fallible operation returns [`Result`].

use std::io;
use std::path::{Path, PathBuf};

use starling_proto::Position;

/// Why bytes read from a segment are not a valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// The first four bytes are not the record magic.
    #[error("bad magic")]
    BadMagic,
    /// A record format version this build does not read.
    #[error("unknown version {0}")]
    BadVersion(u8),
    /// Reserved header bytes are not zero.
    #[error("reserved bytes set")]
    Reserved,
    /// The stream id is 0 (positions never use it).
    #[error("stream id 0")]
    ZeroStream,
    /// A record holds no event.
    #[error("zero events")]
    ZeroEvents,
    /// `seq + events` does not fit a u64.
    #[error("sequence overflows")]
    SeqOverflow,
    /// The declared payload is larger than the configured maximum.
    #[error("declared payload of {len} bytes exceeds the maximum of {max}")]
    TooLarge {
        /// Declared payload length.
        len: u32,
        /// The configured maximum.
        max: u32,
    },
    /// The CRC stored in the trailer does not match the record's bytes.
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    BadCrc {
        /// The trailer's CRC.
        stored: u32,
        /// The CRC of the header and payload read.
        computed: u32,
    },
    /// The record is shorter than its header declares.
    #[error("record cut short")]
    Incomplete,
    /// The record's position is before the previous record's end, or its timestamp before
    /// the previous record's.
    #[error("position or time before the previous record's")]
    OutOfOrder,
}

/// Errors of the durable log.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O operation on a file or directory of the log failed.
    #[error("i/o on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A record read back is invalid (a reader met corruption that recovery did not remove,
    /// for instance in the middle of a sealed segment).
    #[error("corrupt record at offset {offset} of {path}: {kind}")]
    Corrupt {
        /// The segment file.
        path: PathBuf,
        /// The record's offset in it.
        offset: u64,
        /// What is wrong.
        kind: Malformed,
    },
    /// A payload larger than `max_record_bytes` was appended, or is on disk and was read.
    #[error("record payload of {len} bytes exceeds max_record_bytes {max}")]
    RecordTooLarge {
        /// The payload's length.
        len: u64,
        /// The configured maximum.
        max: u32,
    },
    /// An append's position is not after the log's last record: neither the next sequence
    /// number of the current stream nor a stream with a larger id.
    #[error("position {got:?} out of order: the log's next position is {next:?}")]
    OutOfOrder {
        /// One past the log's last record.
        next: Position,
        /// The position given.
        got: Position,
    },
    /// An append's batch is not a valid record (stream id 0, no event, sequence overflow).
    #[error("invalid batch: {0}")]
    InvalidBatch(&'static str),
    /// The segment a reader was reading was deleted by retention: the records it would have
    /// read next are gone. The reader ends; start a new one to continue from what is left.
    #[error("segment starting at {segment:?} was deleted by retention under the reader")]
    Truncated {
        /// The deleted segment's first position.
        segment: Position,
    },
    /// An fsync (of a segment or of the directory) failed, or a failed write could not be
    /// taken back: what is on disk is unknown, so the log is poisoned for every handle. It
    /// refuses appends and reports no more durability (no `persisted` ack) until it is
    /// reopened, which recovers from what is really on disk.
    #[error("the log is stopped: {0}; it refuses appends and acks until reopened")]
    Failed(Failure),
    /// A record on disk has a format version this build does not read (written by a newer
    /// build): the log refuses to open rather than cut or remove anything.
    #[error(
        "record at offset {offset} of {path} has format version {version}, which this build does not read"
    )]
    UnknownVersion {
        /// The segment file.
        path: PathBuf,
        /// The record's offset in it.
        offset: u64,
        /// The version found.
        version: u8,
    },
    /// The configuration is unusable.
    #[error("invalid log config: {0}")]
    Config(&'static str),
    /// Segment files in the directory overlap or are not in position order.
    #[error("segment {path} does not follow the previous segment's positions")]
    SegmentOrder {
        /// The offending segment file.
        path: PathBuf,
    },
}

/// The operation whose failure poisoned a log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailedOp {
    /// An fsync of a segment's data.
    Fsync,
    /// An fsync of the log's directory (after a segment was created, renamed or removed).
    DirSync,
    /// Taking back a write that failed half-way (truncating it off again).
    Rollback,
}

impl std::fmt::Display for FailedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            FailedOp::Fsync => "fsync",
            FailedOp::DirSync => "directory fsync",
            FailedOp::Rollback => "rollback of a failed write",
        })
    }
}

/// Why a log is poisoned: the first failure, as [`Error::Failed`] and
/// `LogView::failure` report it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{op} of {} failed: {error}", path.display())]
pub struct Failure {
    /// What failed.
    pub op: FailedOp,
    /// The file or directory.
    pub path: PathBuf,
    /// The operating system's error, as text.
    pub error: String,
    /// Whether the error said the volume is full (`ENOSPC`, `EDQUOT`).
    pub no_space: bool,
}

impl Error {
    /// Whether this is an I/O error saying the volume (or a quota) is full: the append was
    /// refused and taken back, and appends succeed again once there is space.
    pub fn is_no_space(&self) -> bool {
        matches!(self, Error::Io { source, .. } if crate::fs::is_no_space(source))
    }
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

/// Wraps an I/O error with the path it happened on.
pub(crate) fn io_err(path: &Path) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}
