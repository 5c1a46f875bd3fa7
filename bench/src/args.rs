//! Arguments of `starling bench` and its subcommands (clap derive). The
//! global options of `starling` (`--server`, `--cert`, `--key`, `--token`, `--credentials`,
//! `--ca`, `--insecure`, `--fingerprint`, `--profile`, `--server-name`, `--timeout`) apply too.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use starling_client::Credentials;
use starling_config::Profile;
use starling_config::SlowSubscriberPolicy;

/// `--output`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Output {
    /// Human-readable tables.
    #[default]
    Text,
    /// One JSON result object per line.
    Json,
}

/// The global options (those `starling` has too: `--server`, `--ca`, …) the bench uses.
#[derive(Debug, Clone)]
pub(crate) struct Globals {
    /// `--server` (else the credentials directory's `address`, else 127.0.0.1:7400).
    pub(crate) server: Option<String>,
    /// The credential options, for an external broker.
    pub(crate) identity: Identity,
    /// `--ca`.
    pub(crate) ca: Option<PathBuf>,
    /// `--insecure`.
    pub(crate) insecure: bool,
    /// `--fingerprint`.
    pub(crate) fingerprint: Option<String>,
    /// `--profile`.
    pub(crate) profile: Profile,
    /// `--server-name`.
    pub(crate) server_name: Option<String>,
    /// `--timeout`.
    pub(crate) timeout: Duration,
    /// `--output`.
    pub(crate) output: Output,
}

/// `--cert`, `--key`, `--token` and `--credentials`: who the bench is to an external broker
/// (the embedded broker runs without authentication).
#[derive(Debug, Clone, Default)]
pub(crate) struct Identity {
    /// `--cert`.
    pub(crate) cert: Option<PathBuf>,
    /// `--key`.
    pub(crate) key: Option<PathBuf>,
    /// `--token` (as [`Credentials::Token`], so `Debug` never shows it).
    pub(crate) token: Option<Credentials>,
    /// `--credentials`.
    pub(crate) dir: Option<PathBuf>,
}

impl Identity {
    /// Whether any credential option was given.
    pub(crate) fn is_given(&self) -> bool {
        self.cert.is_some() || self.key.is_some() || self.token.is_some() || self.dir.is_some()
    }
}

/// `--token`, held as [`Credentials::Token`].
pub(crate) fn parse_token(text: &str) -> Result<Credentials, String> {
    Ok(Credentials::Token(text.to_string()))
}

/// Duration arguments, in the workspace's one grammar (`30s`, `500ms`, `1m30s`).
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    starling_config::duration::parse(text).map_err(|e| e.to_string())
}

/// `starling bench`: the pub/sub workload, or one of the subcommands.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct BenchArgs {
    /// Another workload or tool (default: the pub/sub workload).
    #[command(subcommand)]
    pub(crate) command: Option<BenchCommand>,
    /// The pub/sub workload's options.
    #[command(flatten)]
    pub(crate) pubsub: PubSubArgs,
    /// Broker selection and output.
    #[command(flatten)]
    pub(crate) target: TargetArgs,
}

/// Subcommands of `starling bench`.
#[derive(Debug, Subcommand)]
pub(crate) enum BenchCommand {
    /// Cache workload: put, get-hit and get-miss phases.
    Cache {
        /// Workload options.
        #[command(flatten)]
        cache: CacheArgs,
        /// Broker selection and output.
        #[command(flatten)]
        target: TargetArgs,
    },
    /// Run the workloads of a spec file; write results JSON and SVG plots.
    Matrix(MatrixArgs),
    /// Raw quinn bulk throughput and round trip on loopback (the ceiling).
    QuicLimit(QuicLimitArgs),
    /// Medians over trials of result files: a markdown table and SVG plots.
    Report(ReportArgs),
    /// Each profile on an embedded broker, held to the reference's expected figures.
    Profiles(ProfilesArgs),
}

/// Where the broker is and where results go.
#[derive(Debug, Clone, Args)]
pub(crate) struct TargetArgs {
    /// Start a broker in this process on loopback ephemeral ports (with --profile).
    #[arg(long)]
    pub(crate) embedded: bool,
    /// Slow-subscriber policy: drop_new, drop_old or block (lossless: any loss fails the run).
    /// With --embedded it configures the broker; otherwise it is read from the broker's /config.
    #[arg(long, value_name = "POLICY")]
    pub(crate) policy: Option<SlowSubscriberPolicy>,
    /// The external broker's HTTP address (default: host of --server, port 9400).
    #[arg(long, value_name = "HOST:PORT")]
    pub(crate) metrics_addr: Option<String>,
    /// PID of an external broker on this machine: its CPU time is read from
    /// /proc (10 ms resolution) instead of /metrics (whole seconds).
    #[arg(long, value_name = "PID")]
    pub(crate) broker_pid: Option<u32>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Workload name in the results (default: derived from the options).
    #[arg(long)]
    pub(crate) name: Option<String>,
    /// Never show a progress bar.
    #[arg(long)]
    pub(crate) no_progress: bool,
}

/// The pub/sub workload.
#[derive(Debug, Clone, Args)]
pub(crate) struct PubSubArgs {
    /// Publishing tasks; producer i publishes to topic i mod --topics.
    #[arg(long, default_value_t = 1)]
    pub(crate) producers: u32,
    /// Subscribers per topic (fan-out).
    #[arg(long, default_value_t = 1)]
    pub(crate) subscribers: u32,
    /// Topics (at most --producers).
    #[arg(long, default_value_t = 1)]
    pub(crate) topics: u32,
    /// Payload bytes per message (at least 24: the timestamp/sequence header).
    #[arg(long, default_value_t = 256)]
    pub(crate) payload: usize,
    /// Messages per publish call.
    #[arg(long, default_value_t = 1)]
    pub(crate) batch: u32,
    /// All producers share one client (its pool spreads their topics over
    /// --pub-conns × --pub-streams-per-conn streams) instead of one client each.
    #[arg(long)]
    pub(crate) shared_pub_client: bool,
    /// Publish connections per client (default: the profile's pool size).
    #[arg(long)]
    pub(crate) pub_conns: Option<u32>,
    /// Publish streams per connection (default: the profile's).
    #[arg(long)]
    pub(crate) pub_streams_per_conn: Option<u32>,
    /// Measured duration, e.g. 10s (default 5s unless --count is given).
    #[arg(long, value_parser = parse_duration, conflicts_with = "count")]
    pub(crate) duration: Option<Duration>,
    /// Measured messages in all (split over the producers) instead of a duration.
    #[arg(long)]
    pub(crate) count: Option<u64>,
    /// Warm-up before measuring; its messages are checked but not measured.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub(crate) warmup: Duration,
    /// Offered load in messages/s over all producers (open loop). Without it
    /// producers publish as fast as the broker accepts (closed loop).
    #[arg(long, value_name = "MSGS_PER_S")]
    pub(crate) rate: Option<f64>,
    /// All subscribers share one client (one QUIC endpoint, the profile's
    /// event connection pool) instead of one client each.
    #[arg(long)]
    pub(crate) shared_sub_client: bool,
    /// After the producers stop, how long to wait for the last deliveries.
    #[arg(long, value_parser = parse_duration, default_value = "30s")]
    pub(crate) drain_timeout: Duration,
    /// Acked publishes (closed loop only): every publish call asks for the broker's ack (at
    /// the broker's `ack_level`), with at most this many calls unacked per producer, and the
    /// publish→ack latency is reported. Without it publishes are fire-and-forget.
    #[arg(long, value_name = "CALLS")]
    pub(crate) ack_window: Option<u32>,
    /// Publish window of each producer's client in bytes: fire-and-forget bytes one publish
    /// stream keeps unacknowledged by the broker (`ClientConfig::publish_window_bytes`);
    /// 0 turns it off. Default: the SDK's (8 MiB).
    #[arg(long, value_name = "BYTES")]
    pub(crate) publish_window: Option<u64>,
}

/// The cache workload.
#[derive(Debug, Clone, Args)]
pub(crate) struct CacheArgs {
    /// Operations in flight at once.
    #[arg(long, default_value_t = 16)]
    pub(crate) concurrency: u32,
    /// Value bytes.
    #[arg(long, default_value_t = 256)]
    pub(crate) value_size: usize,
    /// Distinct keys written by the put phase and read by the get-hit phase.
    #[arg(long, default_value_t = 10_000)]
    pub(crate) keys: u32,
    /// Measured duration of each of the three phases.
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub(crate) duration: Duration,
    /// Warm-up of each phase (not measured).
    #[arg(long, value_parser = parse_duration, default_value = "500ms")]
    pub(crate) warmup: Duration,
    /// Operations one cache stream carries before the client uses the next stream of its
    /// pool (`ClientConfig::cache_stream_depth`, 1 to 1024). Default: the SDK's (64).
    #[arg(long, value_name = "OPS")]
    pub(crate) stream_depth: Option<u32>,
}

/// `starling bench matrix`.
#[derive(Debug, Clone, Args)]
pub(crate) struct MatrixArgs {
    /// Spec file (JSON): `{"workloads": [...]}`; see docs/benchmarks.md.
    #[arg(long, value_name = "FILE")]
    pub(crate) spec: PathBuf,
    /// Directory for results.json and the plots.
    #[arg(long, value_name = "DIR", default_value = "bench-results")]
    pub(crate) out: PathBuf,
    /// Broker selection (--json and --name are ignored here).
    #[command(flatten)]
    pub(crate) target: TargetArgs,
}

/// `starling bench quic-limit`.
#[derive(Debug, Clone, Args)]
pub(crate) struct QuicLimitArgs {
    /// Bytes per write of the bulk transfer.
    #[arg(long, default_value_t = 16_384)]
    pub(crate) payload: usize,
    /// Length of the bulk transfer.
    #[arg(long, value_parser = parse_duration, default_value = "5s")]
    pub(crate) duration: Duration,
    /// Echo round trips measured.
    #[arg(long, default_value_t = 5_000)]
    pub(crate) rtt_count: u32,
    /// Bytes per echo message.
    #[arg(long, default_value_t = 256)]
    pub(crate) rtt_payload: usize,
    /// UDP socket send and receive buffer size for both endpoints (default:
    /// the OS default, as the broker and SDK use today).
    #[arg(long, value_name = "BYTES")]
    pub(crate) socket_buffer: Option<usize>,
    /// Largest UDP payload path MTU discovery probes for, on both endpoints: the broker knob
    /// `quic_max_mtu_discovery` (default: the profile's, 6550, capped by the route's MTU as
    /// `quic_max_mtu_from_route` does: on loopback, 6550). Above 1472 the endpoints also
    /// accept datagrams that large, as the broker and SDK do.
    #[arg(long, value_name = "BYTES")]
    pub(crate) max_mtu: Option<u16>,
    /// UDP payload size connections start with, on both endpoints: the broker knob
    /// `quic_initial_mtu` (default: the profile's, 1200; at most --max-mtu).
    #[arg(long, value_name = "BYTES")]
    pub(crate) initial_mtu: Option<u16>,
    /// Write the result as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Workload name in the results.
    #[arg(long, default_value = "quic-limit")]
    pub(crate) name: String,
}

/// `starling bench report`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ReportArgs {
    /// Directory of result JSON files (one run each, any system).
    #[arg(long, value_name = "DIR")]
    pub(crate) input: PathBuf,
    /// Directory for comparison.md, summary.json and the plots.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: PathBuf,
}

/// `starling bench profiles`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ProfilesArgs {
    /// Profiles to run, comma-separated (default: every profile of bench/profiles.txt).
    #[arg(long, value_delimiter = ',', value_name = "PROFILE,...")]
    pub(crate) profiles: Vec<Profile>,
    /// Measured duration of each run (a profile has a peak and a paced run per trial).
    #[arg(long, value_parser = parse_duration, default_value = "3s")]
    pub(crate) duration: Duration,
    /// Warm-up before each run.
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub(crate) warmup: Duration,
    /// Trials per profile; the table shows medians over trials.
    #[arg(long, default_value_t = 3)]
    pub(crate) trials: u32,
    /// Slow-subscriber policy of the embedded broker (block: lossless, any loss fails).
    #[arg(long, value_name = "POLICY", default_value = "block")]
    pub(crate) policy: SlowSubscriberPolicy,
    /// Directory for profiles.json and profiles.md.
    #[arg(long, value_name = "DIR", default_value = "target/bench-profiles")]
    pub(crate) out: PathBuf,
    /// Never show a progress bar.
    #[arg(long)]
    pub(crate) no_progress: bool,
}
