//! `starling bench report`: reads every result file of a directory (runs of
//! any system, several trials each), reduces each (workload, system) cell to
//! medians, and writes `comparison.md`, `summary.json` and SVG plots. The
//! targets of the benchmark issue are evaluated (module `targets`) from
//! well-known workload names that `bench/compare` uses; the plots are drawn
//! by `report_plots`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use super::error::BenchError;
use super::progress::human;
use super::report_plots::plots;
use super::result::{RunResult, write_json};
use super::table::us;
use super::targets::targets;

/// System name of the ceiling.
pub(crate) const LIMIT: &str = "quic-limit";
/// System order in tables and plots.
pub(crate) const SYSTEM_ORDER: [&str; 4] = ["starling", "nats-tls", "nats", LIMIT];

/// Medians of one (workload, system) cell.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Cell {
    /// Workload name.
    pub(crate) name: String,
    /// System.
    pub(crate) system: String,
    /// Kind of run.
    pub(crate) kind: String,
    /// Encrypted traffic.
    pub(crate) tls: bool,
    /// Trials found.
    pub(crate) trials: usize,
    /// Trials that reported a failure.
    pub(crate) failed: usize,
    /// Median offered rate (open loop), msgs/s.
    pub(crate) rate: Option<f64>,
    /// Payload bytes.
    pub(crate) payload: Option<usize>,
    /// Median, min and max delivered msgs/s.
    pub(crate) delivered_msgs_per_s: [f64; 3],
    /// Median delivered MB/s.
    pub(crate) delivered_mb_per_s: f64,
    /// Median p50, p99 and p99.9 latency (µs).
    pub(crate) latency_us: [f64; 3],
    /// Median broker CPU µs per delivered message.
    pub(crate) cpu_us_per_msg: Option<f64>,
    /// Median load-generator CPU µs per delivered message.
    pub(crate) client_cpu_us_per_msg: Option<f64>,
    /// Lost deliveries summed over trials.
    pub(crate) lost: u64,
    /// Median ops/s of put, get-hit and get-miss (cache).
    pub(crate) cache_ops_per_s: Option<[f64; 3]>,
    /// Median p99 of put, get-hit and get-miss in µs (cache).
    pub(crate) cache_p99_us: Option<[f64; 3]>,
    /// Median bulk MB/s (quic-limit).
    pub(crate) bulk_mb_per_s: Option<f64>,
    /// Load averages seen at the start of each trial.
    pub(crate) load_avgs: Vec<String>,
    /// Delivered msgs/s of each trial, in run order.
    pub(crate) trial_msgs_per_s: Vec<f64>,
    /// Delivered MB/s (bulk MB/s for quic-limit) of each trial, in run order.
    pub(crate) trial_mb_per_s: Vec<f64>,
}

/// The median of `v` (0 when empty).
pub(crate) fn median(mut v: Vec<f64>) -> f64 {
    v.retain(|x| x.is_finite());
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// Reads every `*.json` file of `dir` that holds one run.
pub(crate) fn read_runs(dir: &Path) -> Result<Vec<RunResult>, BenchError> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| BenchError::file(dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let mut runs: Vec<RunResult> = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| BenchError::file(&f, e))?;
        runs.push(serde_json::from_str(&text).map_err(|e| BenchError::json(&f, e))?);
    }
    // Run order, so tables list workloads in the order they were run.
    runs.sort_by_key(|r| r.started_unix);
    Ok(runs)
}

/// Groups runs into cells ordered by first appearance of the workload, then system.
pub(crate) fn cells(runs: &[RunResult]) -> Vec<Cell> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<(usize, usize, String), Vec<&RunResult>> = BTreeMap::new();
    for r in runs {
        if !order.contains(&r.name) {
            order.push(r.name.clone());
        }
        let w = order.iter().position(|n| n == &r.name).unwrap_or(0);
        let s = SYSTEM_ORDER
            .iter()
            .position(|s| *s == r.system)
            .unwrap_or(SYSTEM_ORDER.len());
        groups.entry((w, s, r.system.clone())).or_default().push(r);
    }
    groups.into_values().map(|g| cell(&g)).collect()
}

fn cell(g: &[&RunResult]) -> Cell {
    let m = |f: &dyn Fn(&RunResult) -> f64| median(g.iter().map(|r| f(r)).collect());
    let rates: Vec<f64> = g.iter().map(|r| r.delivered_msgs_per_s).collect();
    let first = g.first().copied().cloned().unwrap_or_default();
    let per_msg = |cpu: &dyn Fn(&RunResult) -> Option<f64>| -> Option<f64> {
        let v: Vec<f64> = g
            .iter()
            .filter_map(|r| Some(cpu(r)? / (r.delivered.max(1) as f64) * 1e6))
            .collect();
        (!v.is_empty()).then(|| median(v))
    };
    let caches: Vec<_> = g.iter().filter_map(|r| r.cache.as_ref()).collect();
    let cache_m = |f: &dyn Fn(&super::result::CacheStats) -> f64| {
        median(caches.iter().map(|c| f(c)).collect())
    };
    let bulk: Vec<f64> = g
        .iter()
        .filter_map(|r| Some(r.quic.as_ref()?.bulk_mb_per_s))
        .collect();
    Cell {
        name: first.name.clone(),
        system: first.system.clone(),
        kind: first.kind.clone(),
        tls: first.tls,
        trials: g.len(),
        failed: g.iter().filter(|r| r.failure.is_some()).count(),
        rate: first
            .config
            .rate
            .map(|_| m(&|r| r.config.rate.unwrap_or(0.0))),
        payload: first.config.payload,
        delivered_msgs_per_s: [
            median(rates.clone()),
            rates.iter().copied().fold(f64::INFINITY, f64::min),
            rates.iter().copied().fold(0.0, f64::max),
        ],
        delivered_mb_per_s: m(&|r| r.delivered_mb_per_s),
        latency_us: [
            m(&|r| r.latency_us.p50),
            m(&|r| r.latency_us.p99),
            m(&|r| r.latency_us.p999),
        ],
        cpu_us_per_msg: per_msg(&|r| r.broker_cpu_s),
        client_cpu_us_per_msg: per_msg(&|r| r.client_cpu_s),
        lost: g.iter().map(|r| r.lost).sum(),
        cache_ops_per_s: (!caches.is_empty()).then(|| {
            [
                cache_m(&|c| c.put.ops_per_s),
                cache_m(&|c| c.get_hit.ops_per_s),
                cache_m(&|c| c.get_miss.ops_per_s),
            ]
        }),
        cache_p99_us: (!caches.is_empty()).then(|| {
            [
                cache_m(&|c| c.put.latency_us.p99),
                cache_m(&|c| c.get_hit.latency_us.p99),
                cache_m(&|c| c.get_miss.latency_us.p99),
            ]
        }),
        bulk_mb_per_s: (!bulk.is_empty()).then(|| median(bulk)),
        load_avgs: g.iter().map(|r| r.load_avg.clone()).collect(),
        trial_msgs_per_s: rates.clone(),
        trial_mb_per_s: g
            .iter()
            .map(|r| {
                r.quic
                    .as_ref()
                    .map_or(r.delivered_mb_per_s, |q| q.bulk_mb_per_s)
            })
            .collect(),
    }
}

/// The markdown report.
pub(crate) fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### Pub/sub (medians over trials)\n");
    let _ = writeln!(
        out,
        "| workload | system | TLS | trials | delivered msgs/s (min–max) | delivered MB/s | p50 | p99 | p99.9 | broker CPU µs/msg | client CPU µs/msg | lost | load avg at start |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in cells.iter().filter(|c| c.kind == "pubsub") {
        let [med, lo, hi] = c.delivered_msgs_per_s;
        let _ = writeln!(
            out,
            "| {}{} | {} | {} | {}{} | {} ({}–{}) | {:.1} | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
            c.rate
                .map(|r| format!(" ({} msgs/s offered)", human(r)))
                .unwrap_or_default(),
            c.system,
            if c.tls { "yes" } else { "no" },
            c.trials,
            if c.failed > 0 {
                format!(" ({} failed)", c.failed)
            } else {
                String::new()
            },
            human(med),
            human(lo),
            human(hi),
            c.delivered_mb_per_s,
            us(c.latency_us[0]),
            us(c.latency_us[1]),
            us(c.latency_us[2]),
            c.cpu_us_per_msg
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "–".into()),
            c.client_cpu_us_per_msg
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "–".into()),
            c.lost,
            c.load_avgs.join(" / "),
        );
    }
    let caches: Vec<&Cell> = cells.iter().filter(|c| c.kind == "cache").collect();
    if !caches.is_empty() {
        let _ = writeln!(out, "\n### Cache (medians over trials)\n");
        let _ = writeln!(
            out,
            "| workload | system | trials | put ops/s | get-hit ops/s | get-miss ops/s | put p99 | get-hit p99 | get-miss p99 |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
        for c in caches {
            let ops = c.cache_ops_per_s.unwrap_or_default();
            let p99 = c.cache_p99_us.unwrap_or_default();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                c.name,
                c.system,
                c.trials,
                human(ops[0]),
                human(ops[1]),
                human(ops[2]),
                us(p99[0]),
                us(p99[1]),
                us(p99[2])
            );
        }
    }
    let limits: Vec<&Cell> = cells.iter().filter(|c| c.kind == LIMIT).collect();
    if !limits.is_empty() {
        let _ = writeln!(
            out,
            "\n### Raw QUIC ceiling (quinn, same TLS, loopback; medians)\n"
        );
        let _ = writeln!(
            out,
            "| workload | trials | bulk MB/s | echo RTT p50 | p99 | p99.9 |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|");
        for c in limits {
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} | {} | {} |",
                c.name,
                c.trials,
                c.bulk_mb_per_s.unwrap_or(0.0),
                us(c.latency_us[0]),
                us(c.latency_us[1]),
                us(c.latency_us[2])
            );
        }
    }
    let _ = writeln!(out, "\n### Targets\n");
    for line in targets(cells) {
        let _ = writeln!(out, "- {line}");
    }
    out
}

pub(crate) fn find<'a>(cells: &'a [Cell], name: &str, system: &str) -> Option<&'a Cell> {
    cells.iter().find(|c| c.name == name && c.system == system)
}

/// Runs the report: reads `input`, writes into `out`; returns the markdown.
pub(crate) fn run(input: &Path, out: &Path) -> Result<String, BenchError> {
    let runs = read_runs(input)?;
    if runs.is_empty() {
        return Err(BenchError::Usage(format!(
            "{}: no result files",
            input.display()
        )));
    }
    let cells = cells(&runs);
    std::fs::create_dir_all(out).map_err(|e| BenchError::file(out, e))?;
    let md = markdown(&cells);
    std::fs::write(out.join("comparison.md"), &md)
        .map_err(|e| BenchError::file(out.join("comparison.md"), e))?;
    write_json(&out.join("summary.json"), &cells)?;
    plots(&cells, out)?;
    Ok(md)
}

#[cfg(test)]
mod tests {
    use super::super::result::{QuicStats, RunConfig};
    use super::*;

    fn run(name: &str, system: &str, delivered: f64, p99: f64) -> RunResult {
        let mut r = RunResult::new(system, true, name, "pubsub", RunConfig::default());
        r.delivered_msgs_per_s = delivered;
        r.delivered_mb_per_s = delivered * 256.0 / 1e6;
        r.latency_us.p99 = p99;
        r
    }

    #[test]
    fn medians() {
        assert_eq!(median(vec![]), 0.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![f64::NAN, 5.0]), 5.0);
    }

    #[test]
    fn cells_take_medians_and_targets_compare_systems() {
        let mut runs = Vec::new();
        for (s, n) in [(300.0, 100.0), (330.0, 110.0), (900.0, 90.0)] {
            runs.push(run("1p1s-256B", "starling", s, 500.0));
            runs.push(run("1p1s-256B", "nats-tls", n, 80.0));
        }
        let mut half = run("1p1s-256B@50%", "starling", 150.0, 2_000.0);
        half.config.rate = Some(165.0);
        runs.push(half);
        let mut limit = RunResult::new(
            "quic-limit",
            true,
            "quic-limit-x",
            "quic-limit",
            RunConfig::default(),
        );
        limit.quic = Some(QuicStats {
            bulk_mb_per_s: 1_000.0,
            ..QuicStats::default()
        });
        runs.push(limit);
        let c = cells(&runs);
        let s = find(&c, "1p1s-256B", "starling")
            .cloned()
            .unwrap_or_default();
        assert_eq!(s.delivered_msgs_per_s, [330.0, 300.0, 900.0]);
        assert_eq!(s.trials, 3);
        let t = targets(&c);
        // Per-trial ratios 3.00, 3.00, 10.00 → median 3.00.
        assert!(
            t[0].contains("3.00×, 3.00×, 10.00× → median 3.00×")
                && t[0].contains("**met** (by 100 %)"),
            "{t:?}"
        );
        assert!(t[1].contains("not measured"), "{t:?}");
        assert!(t[2].contains("**missed** (2.0× the goal)"), "{t:?}");
        assert!(t[3].contains("not measured"), "{t:?}");
        let md = markdown(&c);
        assert!(
            md.contains("| 1p1s-256B | starling | yes | 3 | 330 (300–900)"),
            "{md}"
        );
        assert!(md.contains("Raw QUIC ceiling"), "{md}");
    }
}
