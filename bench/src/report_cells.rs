//! The cells of a report: every run of one (workload, system) pair reduced to medians, in
//! table order. Pure; the report, its plots and its target verdicts all read them.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::result::RunResult;

/// System name of the ceiling.
pub(crate) const LIMIT: &str = "quic-limit";
/// Starling with `quic_max_mtu_discovery: 6550`, and its raw ceiling's run name.
pub(crate) const JUMBO: (&str, &str) = ("starling-mtu6550", "quic-limit-mtu6550");
/// Starling with the latency profile (broker and client), and its open-loop run's name.
pub(crate) const LATENCY_PROFILE: (&str, &str) = ("starling-latency", "latency-profile-1p1s-256B");
/// System order in tables and plots.
pub(crate) const SYSTEM_ORDER: [&str; 11] = [
    "starling",
    JUMBO.0,
    LATENCY_PROFILE.0,
    "nats-tls",
    "nats",
    "jetstream-tls",
    "jetstream",
    "nsq-tls",
    "nsq",
    "redis",
    LIMIT,
];
/// Prefix of the durable workloads' names (acked at `persisted` / JetStream publish acks).
pub(crate) const DURABLE_PREFIX: &str = "durable-";

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
    /// Median published msgs/s (with acked publishes: acked by the broker).
    pub(crate) published_msgs_per_s: f64,
    /// Median p50, p99 and p99.9 latency (µs).
    pub(crate) latency_us: [f64; 3],
    /// Median p50, p99 and p99.9 publish→ack latency (µs), for acked publishes.
    pub(crate) ack_latency_us: Option<[f64; 3]>,
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
    /// Put, get-hit and get-miss ops/s of each trial, in run order (cache).
    pub(crate) trial_cache_ops: Vec<[f64; 3]>,
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
    let acks: Vec<_> = g.iter().filter_map(|r| r.ack_latency_us).collect();
    let ack_m = |f: &dyn Fn(&super::result::Latency) -> f64| median(acks.iter().map(f).collect());
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
        published_msgs_per_s: m(&|r| r.published_msgs_per_s),
        latency_us: [
            m(&|r| r.latency_us.p50),
            m(&|r| r.latency_us.p99),
            m(&|r| r.latency_us.p999),
        ],
        ack_latency_us: (!acks.is_empty())
            .then(|| [ack_m(&|l| l.p50), ack_m(&|l| l.p99), ack_m(&|l| l.p999)]),
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
        trial_cache_ops: caches
            .iter()
            .map(|c| [c.put.ops_per_s, c.get_hit.ops_per_s, c.get_miss.ops_per_s])
            .collect(),
    }
}

/// Whether `c` is a durable workload's cell.
pub(crate) fn is_durable(c: &Cell) -> bool {
    c.name.starts_with(DURABLE_PREFIX)
}

/// The cell of `name` run by `system`.
pub(crate) fn find<'a>(cells: &'a [Cell], name: &str, system: &str) -> Option<&'a Cell> {
    cells.iter().find(|c| c.name == name && c.system == system)
}
