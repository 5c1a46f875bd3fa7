//! [`CliError`] and [`Outcome`]: how a subcommand ends.

use starling_client::ClientError;

/// A successful subcommand's result, mapped to the exit code by `main`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Exit 0.
    Done,
    /// `cache get` on a missing key: "not found", exit 1.
    NotFound,
}

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CliError {
    /// Bad combination of options.
    #[error("{0}")]
    Usage(String),
    /// The SDK call failed.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// Reading stdin or writing stdout failed.
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The broker ended the subscription before `--count` messages arrived.
    #[error("subscription ended by the server")]
    SubscriptionEnded,
    /// `check`: the messages were published (and acked) but not all came back in time.
    #[error(
        "published {published} message(s) to {topic} (acked by the broker) but received {received} of them back within {waited:?}"
    )]
    CheckIncomplete {
        /// The topic.
        topic: String,
        /// Messages published.
        published: u64,
        /// Messages received back.
        received: u64,
        /// How long it waited after the last publish.
        waited: std::time::Duration,
    },
    /// The `starling-bench` harness failed with this exit code (it printed why). Only where
    /// the harness runs as a child: on Unix it replaces the `starling` process.
    #[cfg(not(unix))]
    #[error("starling-bench exited with code {0}")]
    Bench(i32),
}
