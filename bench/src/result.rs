//! The results schema (`starling-bench/1`) shared by `starling bench`, the Go
//! load program for NATS and `bench compare`'s report. One run is one
//! [`RunResult`]; fields that do not apply to a kind of run are left out. Also the
//! [`Provenance`] of a multi-run output (machine, commit, command line).

use std::path::Path;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use super::error::BenchError;

/// Value of [`RunResult::schema`].
pub(crate) const SCHEMA: &str = "starling-bench/1";

/// Latency percentiles in microseconds. A percentile a peer's own tool does not report
/// (redis-benchmark's CSV has no p90 or p99.9) is absent from its file and reads as 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub(crate) struct Latency {
    /// Number of samples.
    pub(crate) count: u64,
    /// Mean.
    pub(crate) mean: f64,
    /// Median.
    pub(crate) p50: f64,
    /// 90th percentile.
    pub(crate) p90: f64,
    /// 99th percentile.
    pub(crate) p99: f64,
    /// 99.9th percentile.
    pub(crate) p999: f64,
    /// Largest sample.
    pub(crate) max: f64,
}

impl Latency {
    /// Summarises a histogram of nanoseconds.
    pub(crate) fn from_ns(h: &Histogram<u64>) -> Self {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1_000.0;
        Latency {
            count: h.len(),
            mean: h.mean() / 1_000.0,
            p50: us(h.value_at_quantile(0.50)),
            p90: us(h.value_at_quantile(0.90)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

/// A histogram of nanoseconds from 1 ns to 100 s at 3 significant digits.
pub(crate) fn new_histogram() -> Histogram<u64> {
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("constant histogram bounds are valid")
}

/// What was run: the union of every kind's parameters.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunConfig {
    /// Producers (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) producers: Option<u32>,
    /// Subscribers per topic (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) subscribers: Option<u32>,
    /// Topics (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) topics: Option<u32>,
    /// Payload or value bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) payload: Option<usize>,
    /// Messages per publish call (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) batch: Option<u32>,
    /// Publish connections (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pub_conns: Option<u32>,
    /// Publish streams per connection (pubsub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) pub_streams_per_conn: Option<u32>,
    /// Concurrent operations (cache).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) concurrency: Option<u32>,
    /// Measured duration in seconds (duration mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) duration_s: Option<f64>,
    /// Measured messages (count mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) count: Option<u64>,
    /// Warm-up seconds before measuring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) warmup_s: Option<f64>,
    /// Offered rate in messages/s (open loop); absent means closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) rate: Option<f64>,
    /// Starling profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) profile: Option<String>,
    /// Slow-subscriber policy in force (`block` means lossless).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) policy: Option<String>,
    /// Acked publishes: publish calls (Starling) or messages (JetStream) each producer keeps
    /// unacked at most; absent means fire-and-forget publishes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ack_window: Option<u32>,
    /// Starling's publish window per stream in bytes (`ClientConfig::publish_window_bytes`);
    /// absent means none (or a run recorded before the window existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) publish_window: Option<u64>,
    /// Starling's cache operations per stream before the next stream is used
    /// (`ClientConfig::cache_stream_depth`); absent in runs recorded before it existed, when
    /// operations went round-robin over the pool's streams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache_stream_depth: Option<u32>,
}

/// One operation kind of the cache workload.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct OpStats {
    /// Operations completed in the measured phase.
    pub(crate) ops: u64,
    /// Operations per second.
    pub(crate) ops_per_s: f64,
    /// Operations that failed or answered wrongly (a miss on get-hit, a hit on get-miss).
    pub(crate) errors: u64,
    /// Per-operation latency.
    pub(crate) latency_us: Latency,
}

/// The cache workload's three phases.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct CacheStats {
    /// Puts.
    pub(crate) put: OpStats,
    /// Gets of present keys.
    pub(crate) get_hit: OpStats,
    /// Gets of absent keys.
    pub(crate) get_miss: OpStats,
}

/// The raw QUIC ceiling.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct QuicStats {
    /// Bytes moved by the bulk transfer.
    pub(crate) bulk_bytes: u64,
    /// Bulk throughput in MB/s (10^6 bytes).
    pub(crate) bulk_mb_per_s: f64,
    /// Write size of the bulk transfer.
    pub(crate) write_bytes: usize,
    /// Echo round trips of `rtt_payload` bytes.
    pub(crate) rtt_us: Latency,
    /// Size of one echo message.
    pub(crate) rtt_payload: usize,
    /// UDP socket buffer size set on both endpoints (`None`: the OS default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) socket_buffer: Option<usize>,
    /// `quic_initial_mtu` of both endpoints (0 in results from before it was recorded).
    #[serde(default)]
    pub(crate) initial_mtu: u16,
    /// `quic_max_mtu_discovery` of both endpoints (0 in results from before it was recorded).
    #[serde(default)]
    pub(crate) max_mtu: u16,
    /// What quinn reported of the bulk connection when the bulk transfer ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) bulk_path: Option<QuicPathStats>,
}

/// quinn's view of a connection's path (`Connection::stats()`), sender and receiver side.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct QuicPathStats {
    /// Largest UDP payload the sender's path supports now (where MTU discovery got to).
    pub(crate) current_mtu: u16,
    /// Packets the sender sent.
    pub(crate) sent_packets: u64,
    /// Packets the sender declared lost (MTU probes not included).
    pub(crate) lost_packets: u64,
    /// Bytes the sender declared lost.
    pub(crate) lost_bytes: u64,
    /// Congestion events of the sender.
    pub(crate) congestion_events: u64,
    /// The sender's congestion window at the end (bytes).
    pub(crate) cwnd: u64,
    /// The sender's smoothed RTT at the end (µs).
    pub(crate) rtt_us: f64,
    /// MTU probes sent.
    pub(crate) mtu_probes_sent: u64,
    /// MTU probes lost.
    pub(crate) mtu_probes_lost: u64,
    /// Black holes detected (each one drops the MTU back to the base).
    pub(crate) black_holes: u64,
    /// UDP datagrams the sender sent.
    pub(crate) tx_datagrams: u64,
    /// Send system calls of the sender (below `tx_datagrams` with GSO).
    pub(crate) tx_ios: u64,
    /// UDP payload bytes the sender sent.
    pub(crate) tx_bytes: u64,
    /// UDP datagrams the receiver received.
    pub(crate) rx_datagrams: u64,
    /// Packets the receiver declared lost (its ACK-only and echo traffic).
    pub(crate) rx_side_lost_packets: u64,
    /// Every change of the sender's `current_mtu` during the bulk transfer (sampled every
    /// 5 ms): where discovery went and when a black hole sent it back.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) mtu_changes: Vec<MtuChange>,
}

/// The sender's MTU changed (seen by sampling `Connection::stats()`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct MtuChange {
    /// Milliseconds since the bulk transfer started.
    pub(crate) ms: f64,
    /// The new `current_mtu`.
    pub(crate) mtu: u16,
    /// Packets declared lost so far.
    pub(crate) lost_packets: u64,
    /// Black holes detected so far.
    pub(crate) black_holes: u64,
    /// UDP payload bytes sent so far (the throughput of each MTU phase is the difference).
    pub(crate) tx_bytes: u64,
}

/// One benchmark run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunResult {
    /// Always [`SCHEMA`].
    pub(crate) schema: String,
    /// `starling`, `nats`, `nats-tls`, `redis` or `quic-limit`.
    pub(crate) system: String,
    /// Whether the traffic was encrypted.
    pub(crate) tls: bool,
    /// Workload name; runs with the same name and system are trials of one cell.
    pub(crate) name: String,
    /// `pubsub`, `cache` or `quic-limit`.
    pub(crate) kind: String,
    /// Parameters.
    pub(crate) config: RunConfig,
    /// Wall time of the measured phase (publish start to last delivery), seconds.
    pub(crate) elapsed_s: f64,
    /// Messages published in the measured phase.
    #[serde(default)]
    pub(crate) published: u64,
    /// Messages delivered in the measured phase (summed over subscribers).
    #[serde(default)]
    pub(crate) delivered: u64,
    /// Deliveries expected over the whole run (warm-up included).
    #[serde(default)]
    pub(crate) expected: u64,
    /// Deliveries that never arrived (whole run).
    #[serde(default)]
    pub(crate) lost: u64,
    /// Messages that arrived after a later one of the same producer.
    #[serde(default)]
    pub(crate) reordered: u64,
    /// Deliveries beyond what was published.
    #[serde(default)]
    pub(crate) duplicates: u64,
    /// Events the broker reported dropping (sequence gaps) for slow subscribers.
    #[serde(default)]
    pub(crate) dropped: u64,
    /// Published messages per second.
    #[serde(default)]
    pub(crate) published_msgs_per_s: f64,
    /// Delivered messages per second (all subscribers).
    #[serde(default)]
    pub(crate) delivered_msgs_per_s: f64,
    /// Delivered payload MB/s (10^6 bytes, all subscribers).
    #[serde(default)]
    pub(crate) delivered_mb_per_s: f64,
    /// Publish-to-receive latency of measured messages.
    #[serde(default)]
    pub(crate) latency_us: Latency,
    /// Publish-to-ack latency of measured messages (acked publishes only): from the time a
    /// message was stamped to the broker's ack of its publish call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) ack_latency_us: Option<Latency>,
    /// Cache workload figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) cache: Option<CacheStats>,
    /// Raw QUIC figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) quic: Option<QuicStats>,
    /// CPU seconds the broker process used over the measured phase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) broker_cpu_s: Option<f64>,
    /// Where `broker_cpu_s` came from: `metrics`, `threads` or `proc`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) broker_cpu_source: Option<String>,
    /// CPU seconds the load generator used over the same window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_cpu_s: Option<f64>,
    /// `/proc/loadavg` when the run started.
    #[serde(default)]
    pub(crate) load_avg: String,
    /// Online CPUs.
    #[serde(default)]
    pub(crate) cores: usize,
    /// Unix time the run started.
    #[serde(default)]
    pub(crate) started_unix: u64,
    /// Why the run is not valid, if it is not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) failure: Option<String>,
}

impl RunResult {
    /// An empty result stamped with the machine's state.
    pub(crate) fn new(system: &str, tls: bool, name: &str, kind: &str, config: RunConfig) -> Self {
        RunResult {
            schema: SCHEMA.to_string(),
            system: system.to_string(),
            tls,
            name: name.to_string(),
            kind: kind.to_string(),
            config,
            load_avg: load_avg(),
            cores: cores(),
            started_unix: unix_now(),
            ..RunResult::default()
        }
    }

    /// Writes `self` as pretty JSON.
    pub(crate) fn write_json(&self, path: &Path) -> Result<(), BenchError> {
        write_json(path, self)
    }
}

/// Writes any serialisable value as pretty JSON, creating parent directories.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), BenchError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| BenchError::file(dir, e))?;
    }
    let text = serde_json::to_string_pretty(value).map_err(|e| BenchError::json(path, e))?;
    std::fs::write(path, text + "\n").map_err(|e| BenchError::file(path, e))
}

/// Where and how a multi-run output (`bench profiles`) was made: the machine at its start and
/// end, the code and the command line.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Provenance {
    /// Online CPUs.
    pub(crate) cores: usize,
    /// `/proc/loadavg` (first three fields) before the first run.
    pub(crate) load_avg_start: String,
    /// `/proc/loadavg` after the last run.
    pub(crate) load_avg_end: String,
    /// `git rev-parse HEAD` in the working directory, or `unknown`.
    pub(crate) commit: String,
    /// This process's command line.
    pub(crate) command: String,
    /// Unix time at the start.
    pub(crate) started_unix: u64,
}

impl Provenance {
    /// Stamps the start: machine, commit, command line.
    pub(crate) fn start() -> Self {
        Provenance {
            cores: cores(),
            load_avg_start: load_avg(),
            load_avg_end: String::new(),
            commit: git_commit(),
            command: command_line(std::env::args_os().map(|a| a.to_string_lossy().into_owned())),
            started_unix: unix_now(),
        }
    }

    /// Stamps the end (the load average after the runs).
    pub(crate) fn finish(&mut self) {
        self.load_avg_end = load_avg();
    }
}

/// Online CPUs (1 where unknown).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub(crate) fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The commit checked out in the working directory (`git rev-parse HEAD`), or `unknown` when
/// git or a repository is not there.
pub(crate) fn git_commit() -> String {
    std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

/// A command line as one string; words with spaces or quotes are single-quoted.
pub(crate) fn command_line(args: impl IntoIterator<Item = String>) -> String {
    args.into_iter()
        .map(|a| {
            if !a.is_empty() && !a.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first three fields of `/proc/loadavg` (empty where unavailable).
pub(crate) fn load_avg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_summary_is_in_microseconds() {
        let mut h = new_histogram();
        for ns in [1_000u64, 2_000, 3_000, 1_000_000] {
            h.record(ns).ok();
        }
        let l = Latency::from_ns(&h);
        assert_eq!(l.count, 4);
        assert!((l.p50 - 2.0).abs() < 0.01, "{l:?}");
        assert!((l.max - 1_000.0).abs() < 1.0, "{l:?}");
        assert_eq!(Latency::from_ns(&new_histogram()), Latency::default());
    }

    #[test]
    fn command_lines_quote_only_what_needs_it() {
        let args = ["starling-bench", "profiles", "--out", "a dir", "it's", ""].map(String::from);
        assert_eq!(
            command_line(args),
            r"starling-bench profiles --out 'a dir' 'it'\''s' ''"
        );
        let p = Provenance::start();
        assert!(!p.commit.is_empty() && p.cores >= 1, "{p:?}");
    }

    #[test]
    fn results_round_trip_and_skip_absent_fields() {
        let mut r = RunResult::new("starling", true, "w", "pubsub", RunConfig::default());
        r.config.payload = Some(256);
        let text = serde_json::to_string(&r).unwrap_or_default();
        assert!(!text.contains("cache"), "{text}");
        assert!(!text.contains("rate"), "{text}");
        let back: RunResult = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, r);
    }
}
