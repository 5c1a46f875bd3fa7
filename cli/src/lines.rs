//! Printing one output line of `sub` and `consume`: text or a JSON line, written with its
//! newline and flushed at once (a reader sees each message as it arrives), and a reader that
//! went away (`| head`) told apart from a write error.

use std::io::Write;

use super::args::Output;

/// The line a payload prints as: lossy UTF-8 text, or the JSON line `json` builds.
pub(crate) fn line_of(output: Output, payload: &[u8], json: impl FnOnce() -> String) -> String {
    match output {
        Output::Text => String::from_utf8_lossy(payload).into_owned(),
        Output::Json => json(),
    }
}

/// Writes `line` and a newline to stdout and flushes; `Ok(false)` when the reader went away
/// (a broken pipe), so the caller stops quietly.
pub(crate) fn print_line(line: &str) -> std::io::Result<bool> {
    let mut out = std::io::stdout().lock();
    match writeln!(out, "{line}").and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e),
    }
}
