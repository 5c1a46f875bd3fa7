//! The targets of the benchmark issue, evaluated from a report's cells:
//! delivered msgs/s against NATS-with-TLS, p99 at half of each system's own
//! peak, and large-payload bytes/s against the raw QUIC ceiling. Each target
//! is judged on the median of per-trial ratios (trial *i* of two systems ran
//! a minute apart, under the same machine load).

use super::progress::human;
use super::table::us;
use crate::report_cells::{Cell, LIMIT, find, median};

/// Workloads whose delivered rate must be ≥ 1.5× NATS-with-TLS.
const PEAK_TARGETS: [&str; 2] = ["1p1s-256B", "1p10s-4KB"];
/// Suffix of the open-loop runs at half of each system's own peak.
const HALF_LOAD: &str = "@50%";
/// The large-payload workload held against the raw QUIC ceiling.
const BULK_WORKLOAD: &str = "1p1s-16KB";

/// Ratios `a[i] / b[i]` of trials paired in run order (trial *i* of both
/// systems ran minutes apart at most, under the same machine load).
fn paired(a: &[f64], b: &[f64]) -> Vec<f64> {
    a.iter()
        .zip(b)
        .filter(|(_, b)| **b > 0.0)
        .map(|(a, b)| a / b)
        .collect()
}

fn list(v: &[f64], scale: f64, unit: &str) -> String {
    let decimals = if scale > 1.0 { 0 } else { 2 };
    v.iter()
        .map(|x| format!("{:.*}{unit}", decimals, x * scale))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One line per target: measured values, the per-trial ratios, their median
/// (the verdict is on that median) and the margin.
pub(crate) fn targets(cells: &[Cell]) -> Vec<String> {
    let mut lines = Vec::new();
    for w in PEAK_TARGETS {
        let (Some(s), Some(n)) = (find(cells, w, "starling"), find(cells, w, "nats-tls")) else {
            lines.push(format!("{w}: not measured"));
            continue;
        };
        let ratios = paired(&s.trial_msgs_per_s, &n.trial_msgs_per_s);
        if ratios.is_empty() {
            lines.push(format!("{w}: not measured"));
            continue;
        }
        let ratio = median(ratios.clone());
        lines.push(format!(
            "{w}: Starling {} vs NATS-TLS {} delivered msgs/s (medians); per-trial ratios {} → median {ratio:.2}× (target ≥ 1.5×): {}",
            human(s.delivered_msgs_per_s[0]),
            human(n.delivered_msgs_per_s[0]),
            list(&ratios, 1.0, "×"),
            verdict(ratio / 1.5)
        ));
    }
    for c in cells.iter().filter(|c| c.name.ends_with(HALF_LOAD)) {
        let p99 = c.latency_us[1];
        lines.push(format!(
            "{} {}: p99 {} at {} msgs/s offered (target ≤ 1 ms): {}",
            c.name,
            c.system,
            us(p99),
            human(c.rate.unwrap_or(0.0)),
            latency_verdict(p99)
        ));
    }
    let limit = cells.iter().find(|c| c.system == LIMIT && c.name == LIMIT);
    match (find(cells, BULK_WORKLOAD, "starling"), limit) {
        (Some(s), Some(l)) if !paired(&s.trial_mb_per_s, &l.trial_mb_per_s).is_empty() => {
            let shares = paired(&s.trial_mb_per_s, &l.trial_mb_per_s);
            let share = median(shares.clone());
            lines.push(format!(
                "{BULK_WORKLOAD}: Starling delivers {:.1} MB/s, raw quinn bulk {:.1} MB/s (medians); per-trial shares {} → median {:.0} % (target ≥ 70 %): {}",
                s.delivered_mb_per_s,
                l.bulk_mb_per_s.unwrap_or(0.0),
                list(&shares, 100.0, " %"),
                share * 100.0,
                verdict(share / 0.7)
            ));
        }
        _ => lines.push(format!("{BULK_WORKLOAD} vs raw quinn: not measured")),
    }
    lines
}

/// Against the 1 ms p99 goal: `met` with the headroom, or how many times over.
fn latency_verdict(p99_us: f64) -> String {
    if p99_us <= 1_000.0 {
        format!("**met** ({:.0} % under)", (1.0 - p99_us / 1_000.0) * 100.0)
    } else {
        format!("**missed** ({:.1}× the goal)", p99_us / 1_000.0)
    }
}

/// `met by 12 %` / `missed by 30 %` from measured/goal (higher is better).
fn verdict(ratio: f64) -> String {
    if ratio >= 1.0 {
        format!("**met** (by {:.0} %)", (ratio - 1.0) * 100.0)
    } else {
        format!("**missed** (by {:.0} %)", (1.0 - ratio) * 100.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(verdict(1.2), "**met** (by 20 %)");
        assert_eq!(verdict(0.75), "**missed** (by 25 %)");
        assert_eq!(latency_verdict(800.0), "**met** (20 % under)");
        assert_eq!(latency_verdict(2_500.0), "**missed** (2.5× the goal)");
    }
}
