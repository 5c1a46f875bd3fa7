//! The host `starling` CLI, as the suite runs it: `STARLING_CLI` (set by `make e2e`), else
//! `release/starling` in the cargo target directory.

use std::time::Duration;

/// The `starling` CLI: `STARLING_CLI`, else `release/starling` in the cargo target directory
/// (`CARGO_TARGET_DIR` when set, as a shared target directory is).
pub fn cli() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("STARLING_CLI") {
        return p.into();
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    target.join("release/starling")
}

/// Runs the CLI with `args` to completion (at most 60 s) and returns its output.
pub async fn run_cli(args: &[String]) -> std::process::Output {
    let run = tokio::process::Command::new(cli())
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .unwrap_or_else(|_| panic!("starling {args:?} did not finish within 60 s"))
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", cli().display()))
}
