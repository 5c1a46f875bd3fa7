//! Errors of the config crate. Every message names the field, file or variable at fault.

use std::fmt;
use std::path::PathBuf;

/// One rejected field with the reason, e.g. `event_batch_max_events: must be at least 1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// Knob name as written in YAML.
    pub field: &'static str,
    /// Why the value is refused.
    pub reason: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// Why a configuration could not be loaded or was refused.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The config file could not be read.
    #[error("cannot read config file {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The YAML did not match the schema (unknown key, wrong type, bad enum value…).
    #[error("{origin}: {message}")]
    Parse {
        /// Where the text came from: a file path or an environment variable name.
        origin: String,
        /// The parser's message, folded onto one line.
        message: String,
    },
    /// The values parse but cannot work together.
    #[error("invalid config: {}", join(.0))]
    Invalid(Vec<FieldError>),
}

fn join(errors: &[FieldError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl ConfigError {
    pub(crate) fn parse(origin: impl Into<String>, message: impl fmt::Display) -> Self {
        let message = message
            .to_string()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        ConfigError::Parse {
            origin: origin.into(),
            message,
        }
    }
}
