//! Runs one `starling-bench` command: the pub/sub workload or a subcommand, then prints (or
//! writes) its result and fails a lossless run that lost messages.

use std::io::IsTerminal;

pub(crate) use crate::args::BenchArgs;
use crate::args::{BenchCommand, TargetArgs};
use crate::args::{Globals, Output};
pub(crate) use crate::error::BenchError;
use crate::result::RunResult;
use crate::target::Target;
use crate::{cache, matrix, profiles, profiles_report, pubsub, quic_limit, report, table};

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
        Some(BenchCommand::Profiles(p)) => {
            let text = g.output == Output::Text;
            let progress = !p.no_progress && std::io::stderr().is_terminal();
            let report = profiles::run(&g, &p, progress, text).await?;
            let md = profiles_report::write(&p.out, &report)?;
            if text {
                print!("\n{md}");
                println!("\nwritten: {}", p.out.display());
            } else {
                println!(
                    "{}",
                    serde_json::to_string(&report).map_err(|e| BenchError::json("stdout", e))?
                );
            }
            let failed = report.failures();
            if failed.is_empty() {
                Ok(())
            } else {
                Err(BenchError::Integrity(failed.join("; ")))
            }
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
