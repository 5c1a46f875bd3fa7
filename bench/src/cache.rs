//! The cache workload: `--concurrency` workers sharing one client run three
//! timed phases — put (cycling over `--keys` keys), get-hit (random keys the
//! put phase wrote) and get-miss (keys never written) — each with a warm-up,
//! recording per-operation latency in HDR histograms.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use starling_client::{Client, MAX_CACHE_STREAM_DEPTH};

use super::args::CacheArgs;
use super::error::BenchError;
use super::progress::{Counters, Progress};
use super::result::{CacheStats, Latency, OpStats, RunConfig, RunResult, new_histogram};
use super::target::Target;

/// The three phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Put,
    GetHit,
    GetMiss,
}

/// What one worker did in one phase.
struct WorkerReport {
    ops: u64,
    errors: u64,
    latency: Histogram<u64>,
    first_error: Option<String>,
}

/// Shared, read-only inputs of the workers.
struct Keys {
    present: Vec<Bytes>,
    absent: Vec<Bytes>,
    value: Bytes,
}

/// A name such as `cache-c16-256B`.
pub(crate) fn default_name(a: &CacheArgs) -> String {
    format!("cache-c{}-{}B", a.concurrency, a.value_size)
}

/// Runs the three phases against `target`.
pub(crate) async fn run(
    target: &Target,
    a: &CacheArgs,
    name: &str,
    progress: bool,
) -> Result<RunResult, BenchError> {
    if a.concurrency == 0 || a.keys == 0 || a.duration.is_zero() {
        return Err(BenchError::Usage(
            "--concurrency, --keys and --duration must be greater than zero".into(),
        ));
    }
    if a.stream_depth
        .is_some_and(|d| !(1..=MAX_CACHE_STREAM_DEPTH).contains(&d))
    {
        return Err(BenchError::Usage(format!(
            "--stream-depth must be between 1 and {MAX_CACHE_STREAM_DEPTH}"
        )));
    }
    let mut client_config = target.client_config();
    if let Some(depth) = a.stream_depth {
        client_config = client_config.with_cache_stream_depth(depth);
    }
    let config = RunConfig {
        concurrency: Some(a.concurrency),
        payload: Some(a.value_size),
        duration_s: Some(a.duration.as_secs_f64()),
        warmup_s: Some(a.warmup.as_secs_f64()),
        profile: Some(target.profile.to_string()),
        cache_stream_depth: Some(client_config.cache_stream_depth),
        ..RunConfig::default()
    };
    let mut result = RunResult::new("starling", true, name, "cache", config);
    let client = Client::connect(client_config).await?;
    let prefix = format!("bench:{}:{}", std::process::id(), result.started_unix);
    let keys = Arc::new(Keys {
        present: (0..a.keys)
            .map(|i| Bytes::from(format!("{prefix}:k{i}")))
            .collect(),
        absent: (0..a.keys)
            .map(|i| Bytes::from(format!("{prefix}:miss{i}")))
            .collect(),
        value: Bytes::from(vec![b'v'; a.value_size]),
    });
    let ops = Arc::new(AtomicU64::new(0));
    let counters = Counters {
        sent: vec![Arc::clone(&ops)],
        received: vec![Arc::clone(&ops)],
    };
    let planned = (a.duration + a.warmup) * 3;
    let bar = Progress::start(progress, name, Some(planned), counters);
    let cpu_before = target.cpu().await;
    let started = Instant::now();
    let mut stats = CacheStats::default();
    let mut failure = None;
    // Make sure every key exists before the get-hit phase.
    fill(&client, &keys).await?;
    for phase in [Phase::Put, Phase::GetHit, Phase::GetMiss] {
        let (s, err) = run_phase(&client, &keys, a, phase, &ops).await?;
        failure = failure.or(err);
        match phase {
            Phase::Put => stats.put = s,
            Phase::GetHit => stats.get_hit = s,
            Phase::GetMiss => stats.get_miss = s,
        }
    }
    result.elapsed_s = started.elapsed().as_secs_f64();
    let cpu_after = target.cpu().await;
    bar.finish();
    client.close().await;
    let (cpu, source) = Target::cpu_used(cpu_before, cpu_after);
    result.broker_cpu_s = cpu;
    result.broker_cpu_source = source;
    result.client_cpu_s = Target::client_cpu_used(cpu_before, cpu_after);
    result.latency_us = stats.get_hit.latency_us;
    result.failure = failure;
    result.cache = Some(stats);
    Ok(result)
}

async fn fill(client: &Client, keys: &Keys) -> Result<(), BenchError> {
    for chunk in keys.present.chunks(64) {
        let puts = chunk
            .iter()
            .map(|k| client.cache_put(k.clone(), keys.value.clone(), None));
        for r in futures::future::join_all(puts).await {
            r?;
        }
    }
    Ok(())
}

async fn run_phase(
    client: &Client,
    keys: &Arc<Keys>,
    a: &CacheArgs,
    phase: Phase,
    ops: &Arc<AtomicU64>,
) -> Result<(OpStats, Option<String>), BenchError> {
    let start = Instant::now();
    let measure_from = start + a.warmup;
    let end = measure_from + a.duration;
    let workers = (0..a.concurrency).map(|w| {
        let (client, keys, ops) = (client.clone(), Arc::clone(keys), Arc::clone(ops));
        tokio::spawn(async move { worker(client, keys, phase, w, measure_from, end, ops).await })
    });
    let mut latency = new_histogram();
    let (mut total, mut errors, mut first_error) = (0, 0, None);
    for r in futures::future::join_all(workers).await {
        let r = r.map_err(|e| BenchError::Task(e.to_string()))?;
        total += r.ops;
        errors += r.errors;
        first_error = first_error.or(r.first_error);
        let _ = latency.add(&r.latency);
    }
    let secs = end.saturating_duration_since(measure_from).as_secs_f64();
    let stats = OpStats {
        ops: total,
        ops_per_s: if secs > 0.0 { total as f64 / secs } else { 0.0 },
        errors,
        latency_us: Latency::from_ns(&latency),
    };
    Ok((stats, first_error))
}

async fn worker(
    client: Client,
    keys: Arc<Keys>,
    phase: Phase,
    worker: u32,
    measure_from: Instant,
    end: Instant,
    ops: Arc<AtomicU64>,
) -> WorkerReport {
    let mut report = WorkerReport {
        ops: 0,
        errors: 0,
        latency: new_histogram(),
        first_error: None,
    };
    let n = keys.present.len();
    let mut rng = XorShift::new(u64::from(worker) + 1);
    let mut i = worker as usize;
    loop {
        let t0 = Instant::now();
        if t0 >= end {
            break;
        }
        let outcome = match phase {
            Phase::Put => {
                i = (i + 1) % n;
                let key = keys.present[i].clone();
                client
                    .cache_put(key, keys.value.clone(), None)
                    .await
                    .map(|_replaced| true)
            }
            Phase::GetHit => {
                let key = keys.present[rng.below(n)].clone();
                client.cache_get(key).await.map(|v| v.is_some())
            }
            Phase::GetMiss => {
                let key = keys.absent[rng.below(n)].clone();
                client.cache_get(key).await.map(|v| v.is_none())
            }
        };
        let t1 = Instant::now();
        ops.fetch_add(1, Ordering::Relaxed);
        if t0 < measure_from {
            continue;
        }
        report.ops += 1;
        match outcome {
            Ok(true) => {
                let ns = u64::try_from(t1.duration_since(t0).as_nanos()).unwrap_or(u64::MAX);
                report.latency.saturating_record(ns.max(1));
            }
            Ok(false) => {
                report.errors += 1;
                report
                    .first_error
                    .get_or_insert_with(|| format!("{phase:?}: wrong answer (hit/miss)"));
            }
            Err(e) => {
                report.errors += 1;
                report
                    .first_error
                    .get_or_insert_with(|| format!("{phase:?}: {e}"));
                if matches!(e, starling_client::ClientError::Closed) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    report
}

/// A small, fast, seedable random number generator (xorshift64*).
struct XorShift(u64);

impl XorShift {
    fn new(seed: u64) -> Self {
        XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// A number in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1) as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xorshift_stays_in_range_and_varies() {
        let mut r = XorShift::new(1);
        let draws: Vec<usize> = (0..1_000).map(|_| r.below(10)).collect();
        assert!(draws.iter().all(|&d| d < 10));
        assert!((0..10).all(|v| draws.contains(&v)));
    }
}
