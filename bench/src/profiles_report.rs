//! The output of `starling-bench profiles`: per profile, the reference's promise, the medians
//! measured here and a verdict per promised figure; rendered as a Markdown table and written
//! as JSON. Owns the verdict rules (pure functions, no I/O but [`write`]).
//!
//! Verdicts read a promised range at its most lenient end: a latency *meets* when the median
//! over trials is at most the range's upper end, a throughput when it is at least the range's
//! lower end. The ratio shown is measured ÷ that bound.

use std::fmt::Write as _;
use std::path::Path;

use serde::Serialize;

use crate::error::BenchError;
use crate::progress::human;
use crate::reference::{Promise, Range};
use crate::report_cells::median;
use crate::result::{Provenance, RunResult, write_json};
use crate::table::us;

/// Value of [`ProfilesReport::schema`].
pub(crate) const SCHEMA: &str = "starling-bench-profiles/1";

/// One promised figure held against its measurement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Verdict {
    /// Whether the measurement keeps the promise.
    pub(crate) meets: bool,
    /// Measured ÷ `bound`.
    pub(crate) ratio: f64,
    /// The end of the promised range the measurement is held to.
    pub(crate) bound: f64,
}

impl Verdict {
    /// A latency promise: measured at most the range's upper end.
    pub(crate) fn at_most(measured: f64, promised: Range) -> Option<Self> {
        Self::new(measured, promised.high, |r| r <= 1.0)
    }

    /// A throughput promise: measured at least the range's lower end.
    pub(crate) fn at_least(measured: f64, promised: Range) -> Option<Self> {
        Self::new(measured, promised.low, |r| r >= 1.0)
    }

    fn new(measured: f64, bound: f64, keeps: fn(f64) -> bool) -> Option<Self> {
        if !(measured.is_finite() && measured >= 0.0 && bound > 0.0) {
            return None;
        }
        let ratio = measured / bound;
        Some(Verdict {
            meets: keeps(ratio),
            ratio,
            bound,
        })
    }

    /// `meets (0.62×)` or `misses (3.10×)`.
    pub(crate) fn text(&self) -> String {
        let word = if self.meets { "meets" } else { "misses" };
        format!("{word} ({:.2}×)", self.ratio)
    }
}

/// What one profile's runs measured: medians over its trials.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub(crate) struct Measured {
    /// Trials whose runs completed.
    pub(crate) trials: usize,
    /// Peak (closed-loop) delivered messages per second.
    pub(crate) msgs_per_s: f64,
    /// The paced (open-loop) run's offered publish rate.
    pub(crate) paced_publish_rate: f64,
    /// The paced run's delivered messages per second.
    pub(crate) paced_delivered_msgs_per_s: f64,
    /// The paced run's median latency, µs (`None`: nothing measured).
    pub(crate) p50_us: Option<f64>,
    /// The paced run's 99th percentile, µs.
    pub(crate) p99_us: Option<f64>,
    /// The paced run's 99.9th percentile, µs.
    pub(crate) p999_us: Option<f64>,
}

impl Measured {
    /// Medians over trials of the peak runs' throughput and the paced runs' latency (paced
    /// runs that measured no message are left out of the latency medians).
    pub(crate) fn from_runs(peaks: &[RunResult], paced: &[RunResult], rate: f64) -> Self {
        let latency = |f: fn(&RunResult) -> f64| {
            let v: Vec<f64> = paced
                .iter()
                .filter(|r| r.latency_us.count > 0)
                .map(f)
                .collect();
            (!v.is_empty()).then(|| median(v))
        };
        Measured {
            trials: peaks.len().min(paced.len()),
            msgs_per_s: median(peaks.iter().map(|r| r.delivered_msgs_per_s).collect()),
            paced_publish_rate: rate,
            paced_delivered_msgs_per_s: median(
                paced.iter().map(|r| r.delivered_msgs_per_s).collect(),
            ),
            p50_us: latency(|r| r.latency_us.p50),
            p99_us: latency(|r| r.latency_us.p99),
            p999_us: latency(|r| r.latency_us.p999),
        }
    }
}

/// The verdicts of one row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub(crate) struct Verdicts {
    /// Median latency against the promised p50.
    pub(crate) p50: Option<Verdict>,
    /// 99th percentile against the promised p99.
    pub(crate) p99: Option<Verdict>,
    /// Peak throughput against the promised msgs/s.
    pub(crate) msgs_per_s: Option<Verdict>,
}

/// One profile: promise, measurement, verdicts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Row {
    /// The promise and its workload.
    pub(crate) expected: Promise,
    /// The measurement.
    pub(crate) measured: Measured,
    /// Its verdicts.
    pub(crate) verdicts: Verdicts,
    /// Runs that failed (loss under `block`, reordering, duplicates, an error).
    pub(crate) failures: Vec<String>,
}

impl Row {
    /// Judges `measured` against `expected`.
    pub(crate) fn judge(expected: Promise, measured: Measured, failures: Vec<String>) -> Self {
        let verdicts = Verdicts {
            p50: measured
                .p50_us
                .and_then(|v| Verdict::at_most(v, expected.p50_us)),
            p99: measured
                .p99_us
                .and_then(|v| Verdict::at_most(v, expected.p99_us)),
            msgs_per_s: (measured.trials > 0)
                .then(|| Verdict::at_least(measured.msgs_per_s, expected.msgs_per_s))
                .flatten(),
        };
        Row {
            expected,
            measured,
            verdicts,
            failures,
        }
    }
}

/// The whole output of one `starling-bench profiles` run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct ProfilesReport {
    /// Always [`SCHEMA`].
    pub(crate) schema: &'static str,
    /// Machine, commit, command line.
    pub(crate) provenance: Provenance,
    /// Measured seconds per run.
    pub(crate) duration_s: f64,
    /// Warm-up seconds per run.
    pub(crate) warmup_s: f64,
    /// Trials per profile.
    pub(crate) trials: u32,
    /// The embedded broker's slow-subscriber policy.
    pub(crate) policy: String,
    /// One row per profile.
    pub(crate) rows: Vec<Row>,
    /// Every run, in the order run.
    pub(crate) runs: Vec<RunResult>,
}

impl ProfilesReport {
    /// Every failure of every row, prefixed with its profile.
    pub(crate) fn failures(&self) -> Vec<String> {
        self.rows
            .iter()
            .flat_map(|r| {
                r.failures
                    .iter()
                    .map(move |f| format!("{}: {f}", r.expected.profile))
            })
            .collect()
    }
}

/// The workload cell: `1→10 · 4096 B · batch 64 / paced 15.0k msgs/s`.
pub(crate) fn workload(p: &Promise) -> String {
    format!(
        "1→{} · {} B · batch {} / paced {} msgs/s",
        p.fanout,
        p.payload,
        p.batch,
        human(p.paced_publish_rate())
    )
}

fn latency_range(r: Range) -> String {
    format!("{}–{}", us(r.low), us(r.high))
}

fn cell(value: Option<String>, verdict: Option<Verdict>) -> String {
    match (value, verdict) {
        (Some(v), Some(verdict)) => format!("{v}: {}", verdict.text()),
        (Some(v), None) => v,
        (None, _) => "not measured".to_string(),
    }
}

/// The Markdown page: how it was made, the table, and how to read it.
pub(crate) fn render(report: &ProfilesReport) -> String {
    let p = &report.provenance;
    let mut out = String::new();
    let _ = writeln!(out, "# Profiles against the reference\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    let _ = writeln!(out, "| commit | `{}` |", p.commit);
    let _ = writeln!(out, "| command | `{}` |", p.command);
    let _ = writeln!(
        out,
        "| machine | {} cores · load average {} at start, {} at end |",
        p.cores, p.load_avg_start, p.load_avg_end
    );
    let _ = writeln!(
        out,
        "| runs | {} trial(s) per profile · {} s measured after {} s warm-up · embedded broker, policy `{}` |\n",
        report.trials, report.duration_s, report.warmup_s, report.policy
    );
    out.push_str(&table(&report.rows));
    let _ = writeln!(
        out,
        "\nmsgs/s is the peak (closed-loop) run's delivered rate; p50, p99 and p99.9 come from \
         the paced (open-loop) run, one message per publish call at the promised throughput's \
         lower end. Medians over trials. A latency meets its promise at or under the range's \
         upper end, a throughput at or over its lower end; the ratio is measured ÷ that bound."
    );
    let failures = report.failures();
    if !failures.is_empty() {
        let _ = writeln!(out, "\n**Failed runs:**\n");
        for f in failures {
            let _ = writeln!(out, "- {f}");
        }
    }
    out
}

/// The table alone.
pub(crate) fn table(rows: &[Row]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| profile | workload | expected p50 | expected p99 | expected msgs/s | p50 | p99 | p99.9 | msgs/s | trials |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let e = &r.expected;
        let m = &r.measured;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}–{} | {} | {} | {} | {} | {} |",
            e.profile,
            workload(e),
            latency_range(e.p50_us),
            latency_range(e.p99_us),
            human(e.msgs_per_s.low),
            human(e.msgs_per_s.high),
            cell(m.p50_us.map(us), r.verdicts.p50),
            cell(m.p99_us.map(us), r.verdicts.p99),
            cell(m.p999_us.map(us), None),
            cell(
                (m.trials > 0).then(|| human(m.msgs_per_s)),
                r.verdicts.msgs_per_s
            ),
            m.trials,
        );
    }
    out
}

/// Writes `profiles.json` and `profiles.md` into `dir`; returns the Markdown.
pub(crate) fn write(dir: &Path, report: &ProfilesReport) -> Result<String, BenchError> {
    write_json(&dir.join("profiles.json"), report)?;
    let md = render(report);
    let path = dir.join("profiles.md");
    std::fs::write(&path, &md).map_err(|e| BenchError::file(path, e))?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference::parse;
    use crate::result::{Latency, RunConfig};

    fn promise() -> Promise {
        let text = "balanced fanout=10 batch=64 payload=4096 p50_us=400-800 p99_us=2000-4000 msgs_per_s=150000-200000";
        match parse(text) {
            Ok(mut v) => v.remove(0),
            Err(e) => panic!("{e}"),
        }
    }

    fn run(msgs_per_s: f64, p50: f64, p99: f64, count: u64) -> RunResult {
        let mut r = RunResult::new("starling", true, "w", "pubsub", RunConfig::default());
        r.delivered_msgs_per_s = msgs_per_s;
        r.latency_us = Latency {
            count,
            p50,
            p99,
            p999: p99 * 2.0,
            ..Latency::default()
        };
        r
    }

    /// The promises alone, as `docs/benchmarks.md` shows them (a test keeps the two equal).
    fn promise_table(promises: &[Promise]) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "| profile | workload | expected p50 | expected p99 | expected msgs/s |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|");
        for e in promises {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} | {}–{} |",
                e.profile,
                workload(e),
                latency_range(e.p50_us),
                latency_range(e.p99_us),
                human(e.msgs_per_s.low),
                human(e.msgs_per_s.high),
            );
        }
        out
    }

    #[test]
    fn the_docs_show_the_promises_of_profiles_txt() {
        let docs = include_str!("../../docs/benchmarks.md");
        let table = promise_table(&crate::reference::promises().unwrap_or_default());
        assert!(
            docs.contains(&table),
            "docs/benchmarks.md should contain:\n{table}"
        );
    }

    #[test]
    fn latency_meets_at_or_under_the_upper_end() {
        let r = Range {
            low: 400.0,
            high: 800.0,
        };
        let v = Verdict::at_most(800.0, r);
        assert_eq!(v.map(|v| (v.meets, v.bound)), Some((true, 800.0)));
        let v = Verdict::at_most(1_000.0, r);
        assert_eq!(v.map(|v| v.text()).as_deref(), Some("misses (1.25×)"));
        assert_eq!(
            Verdict::at_most(200.0, r).map(|v| v.text()).as_deref(),
            Some("meets (0.25×)")
        );
        assert_eq!(Verdict::at_most(f64::NAN, r), None);
    }

    #[test]
    fn throughput_meets_at_or_over_the_lower_end() {
        let r = Range {
            low: 150_000.0,
            high: 200_000.0,
        };
        assert_eq!(
            Verdict::at_least(150_000.0, r).map(|v| v.text()).as_deref(),
            Some("meets (1.00×)")
        );
        assert_eq!(
            Verdict::at_least(120_000.0, r).map(|v| v.text()).as_deref(),
            Some("misses (0.80×)")
        );
    }

    #[test]
    fn medians_over_trials_feed_the_verdicts() {
        let peaks = [
            run(100e3, 0.0, 0.0, 0),
            run(160e3, 0.0, 0.0, 0),
            run(170e3, 0.0, 0.0, 0),
        ];
        let paced = [
            run(150e3, 500.0, 3_000.0, 10),
            run(150e3, 900.0, 5_000.0, 10),
            run(150e3, 700.0, 1_000.0, 10),
        ];
        let m = Measured::from_runs(&peaks, &paced, 15_000.0);
        assert_eq!(m.trials, 3);
        assert_eq!(
            (m.msgs_per_s, m.p50_us, m.p99_us, m.p999_us),
            (160e3, Some(700.0), Some(3_000.0), Some(6_000.0))
        );
        let row = Row::judge(promise(), m, Vec::new());
        let meets = |v: Option<Verdict>| v.map(|v| v.meets);
        assert_eq!(meets(row.verdicts.p50), Some(true));
        assert_eq!(meets(row.verdicts.p99), Some(true));
        assert_eq!(meets(row.verdicts.msgs_per_s), Some(true));
    }

    #[test]
    fn nothing_measured_gives_no_verdict() {
        let m = Measured::from_runs(&[], &[run(0.0, 0.0, 0.0, 0)], 15_000.0);
        let row = Row::judge(promise(), m, vec!["trial 1: lost 3".into()]);
        assert_eq!(row.verdicts, Verdicts::default());
        let text = table(std::slice::from_ref(&row));
        assert!(text.contains("not measured"), "{text}");
    }

    #[test]
    fn the_table_shows_promise_measurement_and_verdict() {
        let m = Measured::from_runs(
            &[run(120e3, 0.0, 0.0, 0)],
            &[run(149e3, 1_200.0, 2_400.0, 10)],
            15_000.0,
        );
        let report = ProfilesReport {
            schema: SCHEMA,
            provenance: Provenance {
                commit: "abc".into(),
                command: "starling-bench profiles".into(),
                cores: 2,
                ..Provenance::default()
            },
            duration_s: 1.0,
            warmup_s: 0.2,
            trials: 1,
            policy: "block".into(),
            rows: vec![Row::judge(promise(), m, vec!["lost 1".into()])],
            runs: Vec::new(),
        };
        let md = render(&report);
        let line = md
            .lines()
            .find(|l| l.starts_with("| balanced"))
            .unwrap_or_default();
        assert_eq!(
            line,
            "| balanced | 1→10 · 4096 B · batch 64 / paced 15.0k msgs/s | 400.0 µs–800.0 µs | \
             2.00 ms–4.00 ms | 150.0k–200.0k | 1.20 ms: misses (1.50×) | 2.40 ms: meets (0.60×) | \
             4.80 ms | 120.0k: misses (0.80×) | 1 |"
        );
        assert!(md.contains("| commit | `abc` |"), "{md}");
        assert!(md.contains("- balanced: lost 1"), "{md}");
        assert_eq!(report.failures(), ["balanced: lost 1"]);
    }
}
