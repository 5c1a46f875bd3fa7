//! Logging: `tracing` to stderr as text or one JSON object per line, filtered by an
//! `EnvFilter` directive (`--log-level`, or `RUST_LOG` when set).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Log line format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber. Fails if one is already installed or the filter is invalid.
pub fn init(format: LogFormat, level: &str) -> Result<(), String> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(v),
        _ => EnvFilter::try_new(level),
    }
    .map_err(|e| format!("invalid log filter: {e}"))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: `kubectl logs` and log collectors get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| e.to_string())
}
