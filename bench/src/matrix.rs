//! `starling bench matrix --spec FILE`: runs a list of workloads against one
//! broker and writes `results.json` plus two plots — delivered throughput vs
//! payload (closed-loop runs) and latency percentiles vs offered load
//! (open-loop runs).
//!
//! The spec is JSON. Each workload gives the same options as the command
//! line, so a spec means exactly what the equivalent commands mean:
//!
//! ```json
//! {"workloads": [
//!   {"name": "fanout", "args": ["--subscribers", "10", "--duration", "3s"],
//!    "payloads": [256, 1024, 4096], "load_fractions": [0.25, 0.5, 0.75]},
//!   {"name": "cache", "kind": "cache", "args": ["--concurrency", "16"]}
//! ]}
//! ```
//! `payloads` repeats a pub/sub workload per payload size; `rates` adds
//! open-loop runs at fixed rates; `load_fractions` adds open-loop runs at
//! fractions of the peak publish rate the closed-loop run just measured.

use std::path::Path;

use clap::Parser;
use serde::Deserialize;

use super::args::{CacheArgs, PubSubArgs};
use super::error::BenchError;
use super::plot::{self, Axes, Corner, Scale, Series};
use super::pubsub::{self, PubSubPlan};
use super::result::{RunResult, write_json};
use super::target::Target;
use super::{cache, table};

/// The spec file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Spec {
    /// Workloads, run in order.
    pub(crate) workloads: Vec<WorkloadSpec>,
}

/// One entry of the spec.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkloadSpec {
    /// Name in the results (suffixed with the payload and rate).
    pub(crate) name: String,
    /// `pubsub` (default) or `cache`.
    #[serde(default = "pubsub_kind")]
    pub(crate) kind: String,
    /// Command-line options of `starling bench` (or `bench cache`).
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// Payload sizes to repeat the workload with (pub/sub).
    #[serde(default)]
    pub(crate) payloads: Vec<usize>,
    /// Fixed open-loop rates, messages/s (pub/sub).
    #[serde(default)]
    pub(crate) rates: Vec<f64>,
    /// Open-loop rates as fractions of the measured closed-loop peak (pub/sub).
    #[serde(default)]
    pub(crate) load_fractions: Vec<f64>,
}

fn pubsub_kind() -> String {
    "pubsub".into()
}

#[derive(Parser)]
struct PubSubCli {
    #[command(flatten)]
    a: PubSubArgs,
}

#[derive(Parser)]
struct CacheCli {
    #[command(flatten)]
    a: CacheArgs,
}

/// Reads and checks a spec file.
pub(crate) fn load(path: &Path) -> Result<Spec, BenchError> {
    let text = std::fs::read_to_string(path).map_err(|e| BenchError::file(path, e))?;
    let spec: Spec = serde_json::from_str(&text).map_err(|e| BenchError::json(path, e))?;
    for w in &spec.workloads {
        match w.kind.as_str() {
            "pubsub" => {
                pubsub_args(w)?;
            }
            "cache" => {
                parse::<CacheCli>(&w.name, &w.args)?;
            }
            other => {
                return Err(BenchError::Usage(format!(
                    "workload {}: unknown kind `{other}` (pubsub or cache)",
                    w.name
                )));
            }
        }
        if w.load_fractions.iter().any(|f| !(*f > 0.0 && *f <= 2.0)) {
            return Err(BenchError::Usage(format!(
                "workload {}: load_fractions must be in (0, 2]",
                w.name
            )));
        }
    }
    Ok(spec)
}

fn parse<P: Parser>(name: &str, args: &[String]) -> Result<P, BenchError> {
    P::try_parse_from(std::iter::once("bench").chain(args.iter().map(String::as_str))).map_err(
        |e| {
            BenchError::Usage(format!(
                "workload {name}: {}",
                e.render().to_string().lines().next().unwrap_or("")
            ))
        },
    )
}

fn pubsub_args(w: &WorkloadSpec) -> Result<PubSubArgs, BenchError> {
    let a = parse::<PubSubCli>(&w.name, &w.args)?.a;
    PubSubPlan::new(a.clone())?;
    Ok(a)
}

/// Runs every workload of `spec`, printing each result, and writes the
/// results and plots into `out`. Returns the results.
pub(crate) async fn run(
    target: &Target,
    spec: &Spec,
    out: &Path,
    progress: bool,
) -> Result<Vec<RunResult>, BenchError> {
    let mut results = Vec::new();
    for w in &spec.workloads {
        if w.kind == "cache" {
            let a = parse::<CacheCli>(&w.name, &w.args)?.a;
            let r = cache::run(target, &a, &w.name, progress).await?;
            print!("{}", table::render(&r));
            results.push(r);
            continue;
        }
        let base = pubsub_args(w)?;
        let payloads = if w.payloads.is_empty() {
            vec![base.payload]
        } else {
            w.payloads.clone()
        };
        for payload in payloads {
            let mut a = base.clone();
            a.payload = payload;
            let name = format!("{}-{payload}B", w.name);
            let closed = a.rate.is_none() && (w.rates.is_empty() || !w.load_fractions.is_empty());
            let mut peak = None;
            if a.rate.is_some() || closed {
                let r = pubsub::run(target, &PubSubPlan::new(a.clone())?, &name, progress).await?;
                print!("{}", table::render(&r));
                peak = Some(r.delivered_msgs_per_s / f64::from(a.subscribers.max(1)));
                results.push(r);
            }
            let fractions = w.load_fractions.iter().filter_map(|f| Some(f * peak?));
            for rate in w.rates.iter().copied().chain(fractions) {
                let mut open = a.clone();
                open.rate = Some(rate.max(1.0));
                let name = format!("{name}@{rate:.0}/s");
                let r = pubsub::run(target, &PubSubPlan::new(open)?, &name, progress).await?;
                print!("{}", table::render(&r));
                results.push(r);
            }
        }
    }
    write_json(&out.join("results.json"), &results)?;
    plots(&results, out)?;
    Ok(results)
}

/// `throughput_vs_payload.svg` and `latency_vs_load.svg`.
fn plots(results: &[RunResult], out: &Path) -> Result<(), BenchError> {
    let mut throughput: Vec<Series> = Vec::new();
    let mut latency: Vec<Series> = Vec::new();
    for r in results.iter().filter(|r| r.kind == "pubsub") {
        let c = &r.config;
        let payload = c.payload.unwrap_or(0);
        // Runs are named `<workload>-<payload>B[@<rate>/s]`: one series per workload.
        let base = r.name.split('@').next().unwrap_or(&r.name);
        let workload = base.strip_suffix(&format!("-{payload}B")).unwrap_or(base);
        match c.rate {
            None => push(
                &mut throughput,
                workload,
                (payload as f64, r.delivered_mb_per_s),
            ),
            Some(rate) => {
                for (q, v) in [
                    ("p50", r.latency_us.p50),
                    ("p99", r.latency_us.p99),
                    ("p99.9", r.latency_us.p999),
                ] {
                    push(&mut latency, &format!("{base} {q}"), (rate, v));
                }
            }
        }
    }
    plot::lines(
        &out.join("throughput_vs_payload.svg"),
        Axes {
            title: "Delivered throughput vs payload (closed loop)",
            x: "payload bytes",
            y: "delivered MB/s",
            x_scale: Scale::Log,
            y_scale: Scale::Linear,
            legend: Corner::UpperLeft,
        },
        &throughput,
    )?;
    plot::lines(
        &out.join("latency_vs_load.svg"),
        Axes {
            title: "Publish→receive latency vs offered load (open loop)",
            x: "offered msgs/s",
            y: "latency µs",
            x_scale: Scale::Linear,
            y_scale: Scale::Log,
            legend: Corner::UpperLeft,
        },
        &latency,
    )
}

fn push(series: &mut Vec<Series>, name: &str, point: (f64, f64)) {
    match series.iter_mut().find(|s| s.name == name) {
        Some(s) => s.points.push(point),
        None => series.push(Series {
            name: name.to_string(),
            points: vec![point],
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("starling-spec-{}-{name}", std::process::id()));
        std::fs::write(&p, text).ok();
        p
    }

    #[test]
    fn loads_a_valid_spec() {
        let p = write(
            "ok.json",
            r#"{"workloads": [
                {"name": "a", "args": ["--subscribers", "2"], "payloads": [64, 256], "load_fractions": [0.5]},
                {"name": "c", "kind": "cache", "args": ["--concurrency", "4"]}
            ]}"#,
        );
        let spec = load(&p);
        assert!(
            spec.as_ref().is_ok_and(|s| s.workloads.len() == 2),
            "{spec:?}"
        );
    }

    #[test]
    fn rejects_bad_specs_with_the_workload_name() {
        for (file, text, needle) in [
            (
                "kind.json",
                r#"{"workloads": [{"name": "x", "kind": "kv"}]}"#,
                "unknown kind",
            ),
            (
                "args.json",
                r#"{"workloads": [{"name": "y", "args": ["--bogus"]}]}"#,
                "workload y",
            ),
            (
                "plan.json",
                r#"{"workloads": [{"name": "z", "args": ["--payload", "4"]}]}"#,
                "--payload",
            ),
            (
                "frac.json",
                r#"{"workloads": [{"name": "f", "load_fractions": [0]}]}"#,
                "load_fractions",
            ),
            ("field.json", r#"{"workloads": [], "extra": 1}"#, "extra"),
        ] {
            let err = load(&write(file, text))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(needle), "{file}: {err}");
        }
    }

    #[test]
    fn plots_group_runs_into_series() {
        let mut a = RunResult {
            kind: "pubsub".into(),
            ..RunResult::default()
        };
        a.config.payload = Some(256);
        a.config.producers = Some(1);
        let mut b = a.clone();
        b.config.rate = Some(1_000.0);
        let dir = std::env::temp_dir().join(format!("starling-matrix-{}", std::process::id()));
        std::fs::create_dir_all(&dir).ok();
        assert!(plots(&[a, b], &dir).is_ok());
        assert!(dir.join("latency_vs_load.svg").exists());
    }
}
