//! The topics document's file (`topics_file`): read at start ([`first_read`]: a missing or
//! invalid file stops the broker, naming the file) and re-read every
//! `auth_reload_interval_ms` through the broker's one poller ([`crate::watched`]). The file is
//! read by its path each time, so a Kubernetes ConfigMap volume's update (an atomic swap of
//! its `..data` symlink) is seen at the next read. A changed document that is valid is put in
//! force ([`Policies::install`]); one that cannot be read or is invalid is logged and counted
//! (`starling_topics_document_reloads_total{result}`) and the one in force stays
//! (`starling_topics_document_valid` shows 0 until a read succeeds again).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::Duration;

use prometheus::{IntCounterVec, IntGauge, Opts, Registry};
use starling_config::metric_names as names;
use starling_config::topics::{CompiledTopics, TopicsDocument, TopicsError};
use tokio::sync::watch;

use super::policy::Policies;
use crate::watched::{self, Watched};

/// Longest a document may be (1024 policies of a few hundred bytes each fit well within it).
pub const MAX_TOPICS_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// `result` of `starling_topics_document_reloads_total`: a changed document put in force.
pub const APPLIED: &str = "applied";
/// The file could not be read.
pub const UNREADABLE: &str = "unreadable";
/// The file was read but is not a valid document.
pub const INVALID: &str = "invalid";
/// Every result, for pre-creating the series.
pub const RESULTS: [&str; 3] = [APPLIED, UNREADABLE, INVALID];

/// Why the topics file cannot be put in force.
#[derive(Debug, thiserror::Error)]
pub enum TopicsFileError {
    /// It could not be read.
    #[error("topics_file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// It is larger than [`MAX_TOPICS_FILE_BYTES`].
    #[error("topics_file {}: {bytes} bytes, more than {MAX_TOPICS_FILE_BYTES}", path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size.
        bytes: u64,
    },
    /// It is not a valid document.
    #[error("topics_file {}: {source}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TopicsError,
    },
}

impl TopicsFileError {
    /// The `result` label it is counted under.
    pub fn result(&self) -> &'static str {
        match self {
            TopicsFileError::Read { .. } | TopicsFileError::TooLarge { .. } => UNREADABLE,
            TopicsFileError::Invalid { .. } => INVALID,
        }
    }
}

/// The topics document's series (names in `starling_config::metric_names`).
#[derive(Debug, Clone)]
pub struct TopicsMetrics {
    /// Reloads by result.
    pub reloads: IntCounterVec,
    /// Policies of the document in force.
    pub policies: IntGauge,
    /// 1 when the last read of the file gave the document in force, 0 after a failed one.
    pub valid: IntGauge,
}

impl TopicsMetrics {
    /// Creates the series and registers them in `r`.
    pub fn register(r: &Registry) -> prometheus::Result<TopicsMetrics> {
        let reloads = IntCounterVec::new(
            Opts::new(
                names::TOPICS_DOCUMENT_RELOADS,
                "Re-reads of topics_file that changed something or failed, by result (applied, unreadable, invalid).",
            ),
            &["result"],
        )?;
        r.register(Box::new(reloads.clone()))?;
        for result in RESULTS {
            reloads.with_label_values(&[result]);
        }
        let policies = IntGauge::new(
            names::TOPICS_POLICIES,
            "Per-topic durability policies in force (the topics document's).",
        )?;
        r.register(Box::new(policies.clone()))?;
        let valid = IntGauge::new(
            names::TOPICS_DOCUMENT_VALID,
            "1 when the last read of topics_file was put in force (or unchanged), 0 when it failed and an older document stays in force.",
        )?;
        r.register(Box::new(valid.clone()))?;
        Ok(TopicsMetrics {
            reloads,
            policies,
            valid,
        })
    }
}

/// Reads and validates the document at `path` (`max_frame_bytes` bounds its messages):
/// blocking-free, on the runtime's file I/O.
pub async fn read(path: &Path, max_frame_bytes: u32) -> Result<(String, TopicsDocument), TopicsFileError> {
    let read_err = |source| TopicsFileError::Read {
        path: path.to_path_buf(),
        source,
    };
    let bytes = tokio::fs::metadata(path).await.map_err(read_err)?.len();
    if bytes > MAX_TOPICS_FILE_BYTES {
        return Err(TopicsFileError::TooLarge {
            path: path.to_path_buf(),
            bytes,
        });
    }
    let text = tokio::fs::read_to_string(path).await.map_err(read_err)?;
    let doc = TopicsDocument::parse(&text, max_frame_bytes).map_err(|source| {
        TopicsFileError::Invalid {
            path: path.to_path_buf(),
            source,
        }
    })?;
    Ok((text, doc))
}

/// The document at start: `None` without `topics_file`, else the file's, or the error that
/// stops the broker.
pub async fn first_read(
    path: Option<&Path>,
    max_frame_bytes: u32,
) -> Result<Option<(String, CompiledTopics)>, TopicsFileError> {
    let Some(path) = path else {
        return Ok(None);
    };
    let (text, doc) = read(path, max_frame_bytes).await?;
    tracing::info!(file = %path.display(), policies = doc.topics.len(), "topics document loaded");
    Ok(Some((text, CompiledTopics::new(doc))))
}

/// The topics file as the poller watches it.
struct TopicsFile {
    policies: Weak<Policies>,
    path: PathBuf,
    max_frame_bytes: u32,
    metrics: TopicsMetrics,
    /// The text of the document in force.
    last: String,
}

impl Watched for TopicsFile {
    type Doc = Result<(String, TopicsDocument), TopicsFileError>;

    fn alive(&self) -> bool {
        self.policies.strong_count() > 0
    }

    async fn read(&self) -> Result<Self::Doc, String> {
        Ok(read(&self.path, self.max_frame_bytes).await)
    }

    fn apply(&mut self, read: Self::Doc) -> Result<(), String> {
        let (text, doc) = match read {
            Ok(r) => r,
            Err(e) => {
                self.metrics.reloads.with_label_values(&[e.result()]).inc();
                self.metrics.valid.set(0);
                return Err(e.to_string());
            }
        };
        self.metrics.valid.set(1);
        if text == self.last {
            return Ok(());
        }
        let Some(policies) = self.policies.upgrade() else {
            return Ok(());
        };
        let n = policies.install(CompiledTopics::new(doc));
        self.last = text;
        self.metrics.policies.set(i64::try_from(n).unwrap_or(i64::MAX));
        self.metrics.reloads.with_label_values(&[APPLIED]).inc();
        tracing::info!(file = %self.path.display(), policies = n, "topics document reloaded");
        Ok(())
    }

    fn failure(&self) -> String {
        format!(
            "cannot reload the topics document ({}); the one in force stays",
            self.path.display()
        )
    }
}

/// Polls `path` every `every` until `stop` (or until the broker is gone); `last` is the text
/// of the document in force.
pub fn poll(
    policies: &Arc<Policies>,
    path: PathBuf,
    last: String,
    max_frame_bytes: u32,
    metrics: TopicsMetrics,
    every: Duration,
    stop: watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    metrics
        .policies
        .set(i64::try_from(policies.in_force().len()).unwrap_or(i64::MAX));
    metrics.valid.set(1);
    let file = TopicsFile {
        policies: Arc::downgrade(policies),
        path,
        max_frame_bytes,
        metrics,
        last,
    };
    watched::poll(file, every, stop)
}
