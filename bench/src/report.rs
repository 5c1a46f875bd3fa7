//! `starling bench report`: reads every result file of a directory (runs of
//! any system, several trials each), reduces each (workload, system) cell to
//! medians, and writes `comparison.md`, `summary.json` and SVG plots. The
//! targets of the benchmark issue are evaluated (module `targets`) from
//! well-known workload names that `bench/compare` uses; the plots are drawn
//! by `report_plots`.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use super::error::BenchError;
use super::progress::human;
use super::report_plots::plots;
use super::result::{RunResult, write_json};
use super::table::us;
use super::targets::{durable_targets, targets};
use crate::report_cells::{Cell, LIMIT, cells, is_durable};

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

/// The markdown report.
pub(crate) fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
    let core = cells.iter().any(|c| !is_durable(c));
    if core {
        core_markdown(&mut out, cells);
    }
    if cells.iter().any(is_durable) {
        if core {
            out.push('\n');
        }
        durable_markdown(&mut out, cells);
    }
    out
}

/// `1.23 ms` for a present latency, `–` for an absent one.
fn opt_us(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), us)
}

/// The durable workloads: acked publishes (`persisted` on Starling, JetStream's publish ack),
/// with the publish→ack latency beside the publish→delivery one, and issue 15's target.
fn durable_markdown(out: &mut String, cells: &[Cell]) {
    let _ = writeln!(
        out,
        "### Durable workloads, acked publishes (medians over trials)\n"
    );
    let _ = writeln!(
        out,
        "| workload | system | TLS | trials | delivered msgs/s (min–max) | delivered MB/s | acked msgs/s | delivered p50 | p99 | p99.9 | pub→ack p50 | p99 | p99.9 | broker CPU µs/msg | lost | load avg at start |"
    );
    let _ = writeln!(
        out,
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    );
    for c in cells.iter().filter(|c| is_durable(c)) {
        let [med, lo, hi] = c.delivered_msgs_per_s;
        let ack = c.ack_latency_us;
        let _ = writeln!(
            out,
            "| {} | {} | {} | {}{} | {} ({}–{}) | {:.1} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            c.name,
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
            human(c.published_msgs_per_s),
            us(c.latency_us[0]),
            us(c.latency_us[1]),
            us(c.latency_us[2]),
            opt_us(ack.map(|a| a[0])),
            opt_us(ack.map(|a| a[1])),
            opt_us(ack.map(|a| a[2])),
            c.cpu_us_per_msg
                .map(|v| format!("{v:.2}"))
                .unwrap_or_else(|| "–".into()),
            c.lost,
            c.load_avgs.join(" / "),
        );
    }
    let _ = writeln!(out, "\n### Durable targets (issue 15)\n");
    for line in durable_targets(cells) {
        let _ = writeln!(out, "- {line}");
    }
}

/// The issue-18 part: pub/sub, cache and raw QUIC tables and their targets.
fn core_markdown(out: &mut String, cells: &[Cell]) {
    let _ = writeln!(out, "### Pub/sub (medians over trials)\n");
    let _ = writeln!(
        out,
        "| workload | system | TLS | trials | delivered msgs/s (min–max) | delivered MB/s | p50 | p99 | p99.9 | broker CPU µs/msg | client CPU µs/msg | lost | load avg at start |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for c in cells
        .iter()
        .filter(|c| c.kind == "pubsub" && !is_durable(c))
    {
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
    use crate::report_cells::{find, median};

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
        // Per-trial ratios against NATS-TLS 3.00, 3.00, 10.00 → median 3.00; no plain NATS run.
        assert!(
            t[0].contains("1p1s-256B vs plaintext NATS: not measured"),
            "{t:?}"
        );
        let tls = t
            .iter()
            .find(|l| l.starts_with("1p1s-256B vs NATS-TLS"))
            .cloned()
            .unwrap_or_default();
        assert!(
            tls.contains("3.00×, 3.00×, 10.00× → median 3.00×")
                && tls.contains("**met** (by 200 %)"),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|l| l.starts_with("1p1s-256B@50%: Starling p99 2.00 ms")
                    && l.contains("**met** (0 % under)")),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|l| l.contains("1p1s-16KB vs raw quinn: not measured")),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|l| l.contains("cache-256B vs Redis: not measured")),
            "{t:?}"
        );
        assert!(
            t.iter().any(|l| l
                .contains("closed loop: Starling p99 500.0 µs vs NATS-TLS p99 80.0 µs")
                && l.contains("**missed** (by 84 %)")),
            "{t:?}"
        );
        assert!(
            t.iter()
                .any(|l| l.starts_with("zero loss") && l.ends_with("**met**")),
            "{t:?}"
        );
        let md = markdown(&c);
        assert!(
            md.contains("| 1p1s-256B | starling | yes | 3 | 330 (300–900)"),
            "{md}"
        );
        assert!(md.contains("Raw QUIC ceiling"), "{md}");
        assert!(!md.contains("Durable workloads"), "{md}");
    }

    #[test]
    fn durable_runs_get_their_own_table_and_target() {
        let mut runs = Vec::new();
        for (system, delivered, ack_p50) in [("starling", 500.0, 900.0), ("jetstream", 250.0, 80.0)]
        {
            let mut r = run("durable-1p1s-256B-fsync-always", system, delivered, 1_000.0);
            r.published_msgs_per_s = 2.0 * delivered;
            r.ack_latency_us = Some(super::super::result::Latency {
                p50: ack_p50,
                ..Default::default()
            });
            runs.push(r);
        }
        let c = cells(&runs);
        let md = markdown(&c);
        // Only the durable part: no issue-18 tables or targets.
        assert!(!md.contains("### Pub/sub"), "{md}");
        assert!(
            md.contains("| durable-1p1s-256B-fsync-always | starling | yes | 1 | 500 (500–500) | 0.1 | 1.0k |"),
            "{md}"
        );
        assert!(md.contains("| 900.0 µs |"), "{md}");
        assert!(
            md.contains("durable-1p1s-256B-fsync-always vs JetStream: Starling 500 vs 250")
                && md.contains("median 2.00×"),
            "{md}"
        );
    }
}
