//! Logging set-up: `tracing` to stderr as text or JSON, filtered by `log_level` (or `RUST_LOG`
//! when set).

use starling_config::LogFormat;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber. Calling it twice is harmless (the second call is ignored).
pub fn init(format: LogFormat, level: &str) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only on a terminal: `kubectl logs` and log collectors get plain text.
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
