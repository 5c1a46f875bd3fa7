//! `starling bench ARGS`: runs the benchmark harness, the separate `starling-bench` binary, with
//! this command line minus the word `bench` (the harness takes the same global options), so
//! `starling bench` keeps its command line while this binary links neither the broker nor the
//! plotting stack. The harness is looked for in `STARLING_BENCH_BIN`, then next to this
//! executable (where cargo and an install put it), then on `PATH`. On Unix it replaces this
//! process, so its exit code and signals are ours.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

use crate::error::{CliError, Outcome};

/// The harness binary's name.
const BINARY: &str = "starling-bench";

/// Global options of `starling` that take a value as the next argument.
const VALUED: [&str; 11] = [
    "--server",
    "--cert",
    "--key",
    "--token",
    "--credentials",
    "--ca",
    "--fingerprint",
    "--profile",
    "--server-name",
    "--timeout",
    "--output",
];

/// The harness's arguments: `argv` (without the program name) minus the `bench` subcommand
/// word and minus `--direct` (cluster routing, which the harness does not take). When a
/// harness subcommand follows `bench` (`cache`, `quic-limit`, `profiles`, ...: the first word
/// after it that is not an option), the global options given before `bench` go after that
/// subcommand, since the harness takes options either before a subcommand or after it, not
/// both: `starling --profile latency bench cache` runs `starling-bench cache --profile
/// latency`. Pure.
pub(crate) fn harness_args(argv: &[OsString]) -> Vec<OsString> {
    let mut globals = Vec::with_capacity(argv.len());
    let mut rest: Option<Vec<OsString>> = None;
    let mut value_next = false;
    for a in argv {
        if let Some(rest) = rest.as_mut() {
            rest.push(a.clone());
            continue;
        }
        if value_next {
            value_next = false;
            globals.push(a.clone());
            continue;
        }
        match a.to_str() {
            Some("bench") => rest = Some(Vec::new()),
            Some("--direct") => {}
            Some(flag) if VALUED.contains(&flag) => {
                value_next = true;
                globals.push(a.clone());
            }
            _ => globals.push(a.clone()),
        }
    }
    let rest = rest.unwrap_or_default();
    let subcommand = rest
        .first()
        .filter(|w| !w.to_string_lossy().starts_with('-'));
    match subcommand {
        Some(sub) => std::iter::once(sub.clone())
            .chain(globals)
            .chain(rest.iter().skip(1).cloned())
            .collect(),
        None => globals.into_iter().chain(rest).collect(),
    }
}

/// Where the harness is.
fn locate() -> PathBuf {
    if let Some(p) = std::env::var_os("STARLING_BENCH_BIN") {
        return p.into();
    }
    std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(BINARY))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(BINARY))
}

/// Runs the harness with this process's arguments. On Unix the harness replaces this process
/// (`exec`), so a signal sent to `starling bench` (a caller's kill, Ctrl-C) reaches the harness
/// itself instead of leaving it running as an orphan; elsewhere it runs as a child.
pub(crate) fn exec() -> Result<Outcome, CliError> {
    let program = locate();
    let argv: Vec<OsString> = std::env::args_os().skip(1).collect();
    let mut command = Command::new(&program);
    command.args(harness_args(&argv));
    let not_found = |e: std::io::Error| {
        CliError::Usage(format!(
            "`starling bench` runs {} ({e}); build it with `cargo build -p starling-bench` \
             (it is installed next to `starling`) or set STARLING_BENCH_BIN",
            program.display()
        ))
    };
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Returns only when the harness could not be started.
        Err(not_found(command.exec()))
    }
    #[cfg(not(unix))]
    {
        let status = command.status().map_err(not_found)?;
        match status.code() {
            Some(0) => Ok(Outcome::Done),
            Some(code) => Err(CliError::Bench(code)),
            None => Err(CliError::Bench(2)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<OsString> {
        list.iter().map(OsString::from).collect()
    }

    #[test]
    fn drops_the_subcommand_word_and_cluster_routing_only() {
        assert_eq!(
            harness_args(&args(&[
                "--profile",
                "latency",
                "bench",
                "--server",
                "x:1",
                "--rate",
                "5"
            ])),
            args(&["--profile", "latency", "--server", "x:1", "--rate", "5"])
        );
        // A value that happens to read `bench` is a value, and later words stay; the globals
        // go after the harness's subcommand.
        assert_eq!(
            harness_args(&args(&[
                "--server", "bench", "--direct", "bench", "cache", "bench"
            ])),
            args(&["cache", "--server", "bench", "bench"])
        );
        assert_eq!(
            harness_args(&args(&[
                "--profile",
                "latency",
                "bench",
                "quic-limit",
                "--payload",
                "16384"
            ])),
            args(&["quic-limit", "--profile", "latency", "--payload", "16384"])
        );
        // Credential options carry their values (a token may read `bench` too).
        assert_eq!(
            harness_args(&args(&[
                "--token",
                "bench",
                "--credentials",
                "d",
                "bench",
                "--embedded"
            ])),
            args(&["--token", "bench", "--credentials", "d", "--embedded"])
        );
        assert_eq!(
            harness_args(&args(&["bench", "--direct", "--help"])),
            args(&["--direct", "--help"])
        );
    }
}
