//! The human-readable summary of one [`RunResult`], printed to stdout.

use std::fmt::Write;

use super::progress::human;
use super::result::{Latency, OpStats, RunResult};

/// A multi-line summary of `r`.
pub(crate) fn render(r: &RunResult) -> String {
    let mut out = String::new();
    let c = &r.config;
    let mode = match c.rate {
        Some(rate) => format!("open loop at {} msgs/s", human(rate)),
        None => "closed loop".to_string(),
    };
    let profile = c.profile.as_deref().unwrap_or("-");
    let header = match r.kind.as_str() {
        "pubsub" => format!(
            "{} · {} · {} · profile {} · policy {}",
            r.system,
            r.name,
            mode,
            profile,
            c.policy.as_deref().unwrap_or("unknown"),
        ),
        kind => format!("{} · {} · {kind} · profile {profile}", r.system, r.name),
    };
    let _ = writeln!(out, "{header}");
    match r.kind.as_str() {
        "cache" => cache_rows(&mut out, r),
        "quic-limit" => quic_rows(&mut out, r),
        _ => pubsub_rows(&mut out, r),
    }
    if let Some(cpu) = r.broker_cpu_s {
        let share = if r.elapsed_s > 0.0 {
            format!(" ({:.0} % of one core)", cpu / r.elapsed_s * 100.0)
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "  broker CPU   {cpu:.2} s over {:.2} s{share} [{}]",
            r.elapsed_s,
            r.broker_cpu_source.as_deref().unwrap_or("?")
        );
    }
    if let Some(cpu) = r.client_cpu_s {
        let _ = writeln!(out, "  client CPU   {cpu:.2} s (the load generator)");
    }
    let _ = writeln!(
        out,
        "  machine      {} cores · load {}",
        r.cores, r.load_avg
    );
    if let Some(f) = &r.failure {
        let _ = writeln!(out, "  FAILED       {f}");
    }
    out
}

fn pubsub_rows(out: &mut String, r: &RunResult) {
    let _ = writeln!(
        out,
        "  published    {:>12} msgs  {:>9} msgs/s",
        r.published,
        human(r.published_msgs_per_s)
    );
    let _ = writeln!(
        out,
        "  delivered    {:>12} msgs  {:>9} msgs/s  {:.2} MB/s",
        r.delivered,
        human(r.delivered_msgs_per_s),
        r.delivered_mb_per_s
    );
    let _ = writeln!(out, "  latency      {}", latency(&r.latency_us));
    if let Some(ack) = &r.ack_latency_us {
        let _ = writeln!(out, "  pub→ack      {}", latency(ack));
    }
    let _ = writeln!(
        out,
        "  integrity    {} lost of {} expected · {} reordered · {} duplicates · {} dropped by the broker",
        r.lost, r.expected, r.reordered, r.duplicates, r.dropped
    );
}

fn cache_rows(out: &mut String, r: &RunResult) {
    let Some(cache) = &r.cache else { return };
    let row = |out: &mut String, name: &str, s: &OpStats| {
        let _ = writeln!(
            out,
            "  {name:<12} {:>9} ops/s  {}  ({} errors)",
            human(s.ops_per_s),
            latency(&s.latency_us),
            s.errors
        );
    };
    row(out, "put", &cache.put);
    row(out, "get hit", &cache.get_hit);
    row(out, "get miss", &cache.get_miss);
}

fn quic_rows(out: &mut String, r: &RunResult) {
    let Some(q) = &r.quic else { return };
    let buffers = match q.socket_buffer {
        Some(b) => format!("{b}-byte socket buffers"),
        None => "default socket buffers".to_string(),
    };
    let _ = writeln!(
        out,
        "  bulk         {:.1} MB/s in {}-byte writes ({} bytes, {buffers})",
        q.bulk_mb_per_s, q.write_bytes, q.bulk_bytes
    );
    let _ = writeln!(out, "  rtt {:>5} B  {}", q.rtt_payload, latency(&q.rtt_us));
}

/// `p50 12.3 µs · p90 … · max …`.
pub(crate) fn latency(l: &Latency) -> String {
    format!(
        "p50 {} · p90 {} · p99 {} · p99.9 {} · max {}",
        us(l.p50),
        us(l.p90),
        us(l.p99),
        us(l.p999),
        us(l.max)
    )
}

/// Microseconds with a unit that keeps 3 significant digits.
pub(crate) fn us(v: f64) -> String {
    if v >= 1_000_000.0 {
        format!("{:.2} s", v / 1e6)
    } else if v >= 1_000.0 {
        format!("{:.2} ms", v / 1e3)
    } else {
        format!("{v:.1} µs")
    }
}

#[cfg(test)]
mod tests {
    use super::super::result::RunConfig;
    use super::*;

    #[test]
    fn renders_pubsub_and_failures() {
        let mut r = RunResult::new("starling", true, "w", "pubsub", RunConfig::default());
        r.delivered = 10;
        r.broker_cpu_s = Some(0.5);
        r.elapsed_s = 1.0;
        r.failure = Some("lost 1".into());
        let text = render(&r);
        assert!(text.contains("closed loop"), "{text}");
        assert!(text.contains("50 % of one core"), "{text}");
        assert!(text.contains("FAILED       lost 1"), "{text}");
    }

    #[test]
    fn microseconds_pick_a_unit() {
        assert_eq!(us(12.34), "12.3 µs");
        assert_eq!(us(1_500.0), "1.50 ms");
        assert_eq!(us(2_500_000.0), "2.50 s");
    }
}
