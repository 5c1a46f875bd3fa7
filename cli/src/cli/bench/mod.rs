//! `starling bench`: Starling's benchmark harness.
//!
//! | subcommand | what it does |
//! | --- | --- |
//! | *(none)* | pub/sub workload: producers → topics → subscribers, closed or open loop |
//! | `cache` | cache put / get-hit / get-miss phases |
//! | `matrix --spec FILE` | a list of workloads → `results.json` and SVG plots |
//! | `quic-limit` | raw quinn bulk throughput and round trip: the ceiling |
//! | `report` | medians of many result files → markdown table and plots |
//!
//! Every run prints a human summary and can write a [`result::RunResult`] as
//! JSON (`--json FILE`); the Go load program for NATS (`bench/nats/load`)
//! writes the same schema, and `bench/compare` drives all of them.
//!
//! # Module map
//! | module | job |
//! | --- | --- |
//! | `args` | clap definitions |
//! | `target` | embedded or external broker, client config, broker CPU clock |
//! | `embedded`, `probe` | in-process broker; `/metrics`, `/config`, `/proc` readers |
//! | `clock`, `payload` | run epoch and open-loop schedule; the 24-byte message header |
//! | `producer`, `subscriber`, `tracker`, `summary` | the pub/sub workload's two ends, its bookkeeping and its figures |
//! | `pubsub`, `cache`, `quic_limit`, `matrix`, `report` | one per subcommand |
//! | `targets`, `report_plots` | the report's target verdicts and plots |
//! | `result`, `table`, `plot`, `progress` | JSON schema, human summary, SVG plots, progress bar |

mod args;
mod cache;
mod clock;
mod embedded;
mod error;
mod matrix;
mod payload;
mod plot;
mod probe;
mod producer;
mod progress;
mod pubsub;
mod quic_limit;
mod report;
mod report_plots;
mod result;
mod subscriber;
mod summary;
mod table;
mod target;
mod targets;
mod tracker;

#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use starling_client::Profile;

pub(crate) use self::args::BenchArgs;
use self::args::{BenchCommand, TargetArgs};
pub(crate) use self::error::BenchError;
use self::result::RunResult;
use self::target::Target;
use super::args::Output;

/// The global `starling` options the bench uses.
#[derive(Debug, Clone)]
pub(crate) struct Globals {
    /// `--server`.
    pub(crate) server: String,
    /// `--ca`.
    pub(crate) ca: Option<PathBuf>,
    /// `--insecure`.
    pub(crate) insecure: bool,
    /// `--fingerprint`.
    pub(crate) fingerprint: Option<String>,
    /// `--profile`.
    pub(crate) profile: Profile,
    /// `--server-name`.
    pub(crate) server_name: Option<String>,
    /// `--timeout`.
    pub(crate) timeout: Duration,
    /// `--output`.
    pub(crate) output: Output,
}

/// Runs `starling bench …`. A run that lost messages under `block` (or
/// reordered or duplicated any) fails after its results are printed and written.
pub(crate) async fn run(g: Globals, args: BenchArgs) -> Result<(), BenchError> {
    match args.command {
        None => {
            let plan = pubsub::PubSubPlan::new(args.pubsub)?;
            let target = Target::open(&g, &args.target).await?;
            let name = args
                .target
                .name
                .clone()
                .unwrap_or_else(|| plan.default_name());
            let result = pubsub::run(&target, &plan, &name, progress(&args.target)).await;
            target.close().await;
            finish(result?, &args.target, g.output)
        }
        Some(BenchCommand::Cache {
            cache: a,
            target: t,
        }) => {
            let target = Target::open(&g, &t).await?;
            let name = t.name.clone().unwrap_or_else(|| cache::default_name(&a));
            let result = cache::run(&target, &a, &name, progress(&t)).await;
            target.close().await;
            finish(result?, &t, g.output)
        }
        Some(BenchCommand::Matrix(m)) => {
            let spec = matrix::load(&m.spec)?;
            let target = Target::open(&g, &m.target).await?;
            let results = matrix::run(&target, &spec, &m.out, progress(&m.target)).await;
            target.close().await;
            let results = results?;
            println!("results and plots in {}", m.out.display());
            let failed: Vec<String> = results
                .iter()
                .filter_map(|r| Some(format!("{}: {}", r.name, r.failure.as_ref()?)))
                .collect();
            if failed.is_empty() {
                Ok(())
            } else {
                Err(BenchError::Integrity(failed.join("; ")))
            }
        }
        Some(BenchCommand::QuicLimit(q)) => {
            let result = quic_limit::run(&q, g.profile).await?;
            print_result(&result, g.output)?;
            if let Some(path) = &q.json {
                result.write_json(path)?;
            }
            Ok(())
        }
        Some(BenchCommand::Report(r)) => {
            print!("{}", report::run(&r.input, &r.out)?);
            Ok(())
        }
    }
}

/// Prints a result: the table, or with `--output json` the result as one JSON line.
fn print_result(result: &RunResult, output: Output) -> Result<(), BenchError> {
    match output {
        Output::Text => print!("{}", table::render(result)),
        Output::Json => println!(
            "{}",
            serde_json::to_string(result).map_err(|e| BenchError::json("stdout", e))?
        ),
    }
    Ok(())
}

/// Prints and writes a result, then fails if the run is not valid.
fn finish(result: RunResult, t: &TargetArgs, output: Output) -> Result<(), BenchError> {
    print_result(&result, output)?;
    if let Some(path) = &t.json {
        result.write_json(path)?;
    }
    match result.failure {
        Some(f) => Err(BenchError::Integrity(format!("{}: {f}", result.name))),
        None => Ok(()),
    }
}

fn progress(t: &TargetArgs) -> bool {
    !t.no_progress && std::io::stderr().is_terminal()
}
