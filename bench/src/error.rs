//! [`BenchError`]: every way a benchmark run can fail, including the loud
//! failure of a lossless run that lost messages.

use std::path::PathBuf;

use starling_client::ClientError;

/// Why `starling bench` failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum BenchError {
    /// Bad option or spec value.
    #[error("{0}")]
    Usage(String),
    /// An SDK call failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The in-process broker did not start.
    #[error("embedded broker: {0}")]
    Broker(String),
    /// Raw QUIC set-up or transfer failed (`quic-limit`).
    #[error("quic: {0}")]
    Quic(String),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A spec or results file is not valid JSON of the expected shape.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
    /// Drawing a plot failed.
    #[error("plot {path}: {message}")]
    Plot {
        /// The SVG file.
        path: PathBuf,
        /// What the plotting backend said.
        message: String,
    },
    /// A task of the run panicked or was cancelled.
    #[error("benchmark task failed: {0}")]
    Task(String),
    /// A lossless run (`--policy block`) lost, duplicated or reordered messages.
    #[error("{0}")]
    Integrity(String),
}

impl BenchError {
    /// A [`BenchError::File`] for `path`.
    pub(crate) fn file(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BenchError::File {
            path: path.into(),
            source,
        }
    }

    /// A [`BenchError::Json`] for `path`.
    pub(crate) fn json(path: impl Into<PathBuf>, source: serde_json::Error) -> Self {
        BenchError::Json {
            path: path.into(),
            source,
        }
    }
}
