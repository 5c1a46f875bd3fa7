//! Micro benchmark of `Log::append`: appends/s and fsync p50/p99 for 256 B and 1 KiB records
//! under each fsync policy (`interval` is 10 ms, synced by a `Flusher`), on this machine's
//! temp directory (or the directory given as the first argument).
//!
//! `cargo run --release -p starling-storage --example append_bench [DIR] [SECONDS]`

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use starling_storage::{Flusher, FsyncPolicy, Log, LogConfig, Position};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn main() -> Result<(), Box<dyn Error>> {
    let mut args = std::env::args().skip(1);
    let root = args.next().map_or_else(std::env::temp_dir, Into::into);
    let seconds: f64 = args.next().map_or(Ok(2.0), |s| s.parse())?;
    let dir = tempfile::Builder::new()
        .prefix("starling-append-bench")
        .tempdir_in(root)?;
    println!(
        "{:<14} {:>6} {:>12} {:>10} {:>9} {:>12} {:>12}",
        "policy", "size", "appends/s", "MiB/s", "fsyncs", "fsync p50", "fsync p99"
    );
    let policies = [
        ("always", FsyncPolicy::Always),
        (
            "interval 10ms",
            FsyncPolicy::Interval(Duration::from_millis(10)),
        ),
        ("never", FsyncPolicy::Never),
    ];
    for (name, fsync) in policies {
        for size in [256usize, 1024] {
            let path = dir
                .path()
                .join(format!("{}-{size}", name.replace(' ', "-")));
            let config = LogConfig {
                fsync,
                ..LogConfig::default()
            };
            let (mut log, _) = Log::open(&path, config)?;
            let fsyncs = Arc::new(Mutex::new(Vec::new()));
            let flusher = match fsync {
                FsyncPolicy::Interval(every) => {
                    let sink = Arc::clone(&fsyncs);
                    Some(Flusher::spawn(log.view(), every, move |s| {
                        if let Ok(Some(took)) = s.map(|s| s.took)
                            && let Ok(mut v) = sink.lock()
                        {
                            v.push(took);
                        }
                    })?)
                }
                _ => None,
            };
            let payload = vec![0x5a; size];
            let mut at = Position { stream: 1, seq: 0 };
            let mut appends = 0u64;
            let mut synced = Vec::new();
            let started = Instant::now();
            let budget = Duration::from_secs_f64(seconds);
            while started.elapsed() < budget {
                for _ in 0..64 {
                    let a = log.append(at, 1, &payload)?;
                    if let Some(took) = a.fsync {
                        synced.push(took);
                    }
                    at = a.next;
                    appends += 1;
                }
            }
            let elapsed = started.elapsed().as_secs_f64();
            if let Some(f) = flusher {
                f.stop();
            }
            if let Ok(v) = fsyncs.lock() {
                synced.extend(v.iter().copied());
            }
            synced.sort();
            let stats = log.stats();
            println!(
                "{:<14} {:>6} {:>12.0} {:>10.1} {:>9} {:>12?} {:>12?}",
                name,
                size,
                appends as f64 / elapsed,
                stats.bytes_appended as f64 / elapsed / (1024.0 * 1024.0),
                synced.len(),
                percentile(&synced, 0.50),
                percentile(&synced, 0.99),
            );
        }
    }
    Ok(())
}
