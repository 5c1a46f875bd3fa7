//! `starling-bench`: Starling's benchmark harness, its own crate and binary so that the
//! user-facing `starling` binary links neither the broker (for `--embedded`) nor the plotting
//! and histogram stacks. `starling bench ARGS` runs this binary with the same arguments.
//!
//! | subcommand | what it does |
//! | --- | --- |
//! | *(none)* | pub/sub workload: producers → topics → subscribers, closed or open loop |
//! | `cache` | cache put / get-hit / get-miss phases |
//! | `matrix --spec FILE` | a list of workloads → `results.json` and SVG plots |
//! | `quic-limit` | raw quinn bulk throughput and round trip: the ceiling |
//! | `report` | medians of many result files → markdown table and plots |
//! | `profiles` | each profile on an embedded broker against the reference's expected figures |
//!
//! Every run prints a human summary and can write a [`result::RunResult`] as
//! JSON (`--json FILE`); the Go load program for NATS (`bench/nats/load`)
//! writes the same schema, and `bench/compare` drives all of them.
//!
//! # Module map
//! | module | job |
//! | --- | --- |
//! | `args` | clap definitions |
//! | `harness` | runs one command and reports its result |
//! | `target` | embedded or external broker, client config, broker CPU clock |
//! | `embedded`, `probe` | in-process broker; `/metrics`, `/config`, `/proc` readers |
//! | `clock`, `payload` | run epoch and open-loop schedule; the 24-byte message header |
//! | `producer`, `subscriber`, `tracker`, `summary` | the pub/sub workload's two ends, its bookkeeping and its figures |
//! | `pubsub`, `cache`, `quic_limit`, `matrix`, `report` | one per subcommand |
//! | `report_cells`, `targets`, `report_plots` | the report's medians, target verdicts and plots |
//! | `profiles`, `profiles_report`, `reference` | `profiles`: its runs, its verdicts and table, the promises of `bench/profiles.txt` |
//! | `result`, `table`, `plot`, `progress` | JSON schema, human summary, SVG plots, progress bar |

mod args;
mod cache;
mod clock;
mod embedded;
mod error;
mod harness;
mod matrix;
mod payload;
mod plot;
mod probe;
mod producer;
mod profiles;
mod profiles_report;
mod progress;
mod pubsub;
mod quic_limit;
mod reference;
mod report;
mod report_cells;
mod report_plots;
mod result;
mod subscriber;
mod summary;
mod table;
mod target;
mod targets;
mod tracker;

#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use starling_client::Credentials;
use starling_config::Profile;

use crate::args::{BenchArgs, Output, parse_duration};

/// `starling-bench [global options] [workload options] [SUBCOMMAND]`.
#[derive(Debug, Parser)]
#[command(
    name = "starling-bench",
    version,
    about = "Starling's benchmark harness"
)]
struct Cli {
    /// Broker address (host:port) [default: the `address` of --credentials DIR, else
    /// 127.0.0.1:7400].
    #[arg(long, env = "STARLING_SERVER", global = true)]
    server: Option<String>,
    /// External broker: authenticate with this client certificate (PEM; needs --key).
    #[arg(long, value_name = "FILE", global = true)]
    cert: Option<PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(long = "key", id = "key_file", value_name = "FILE", global = true)]
    key_file: Option<PathBuf>,
    /// External broker: authenticate as a token user with this token.
    #[arg(
        long,
        env = "STARLING_TOKEN",
        value_name = "TOKEN",
        value_parser = args::parse_token,
        hide_env_values = true,
        global = true
    )]
    token: Option<Credentials>,
    /// External broker: read the credentials from a directory laid out like a BrokerUser's
    /// Secret (`token`, or `tls.crt` and `tls.key`; optional `ca.crt` and `address`).
    #[arg(long, value_name = "DIR", global = true)]
    credentials: Option<PathBuf>,
    /// Trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE", global = true)]
    ca: Option<PathBuf>,
    /// Do not verify the server certificate (development only).
    #[arg(long, global = true)]
    insecure: bool,
    /// Accept only a server certificate with this SHA-256 fingerprint (hex).
    #[arg(long, value_name = "HEX", global = true)]
    fingerprint: Option<String>,
    /// Performance profile: balanced, latency or throughput.
    #[arg(long, default_value = "balanced", global = true)]
    profile: Profile,
    /// TLS server name (default: the host of --server, or localhost for IPs).
    #[arg(long, value_name = "NAME", global = true)]
    server_name: Option<String>,
    /// Connect and request timeout, e.g. 10s or 500ms.
    #[arg(long, value_parser = parse_duration, default_value = "10s", global = true)]
    timeout: Duration,
    /// text (tables) or json (one result object per line).
    #[arg(long, value_enum, default_value = "text", global = true)]
    output: Output,
    #[command(flatten)]
    bench: BenchArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    let globals = args::Globals {
        server: cli.server,
        identity: args::Identity {
            cert: cli.cert,
            key: cli.key_file,
            token: cli.token,
            dir: cli.credentials,
        },
        ca: cli.ca,
        insecure: cli.insecure,
        fingerprint: cli.fingerprint,
        profile: cli.profile,
        server_name: cli.server_name,
        timeout: cli.timeout,
        output: cli.output,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(harness::run(globals, cli.bench)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let text = e.to_string();
            eprintln!(
                "error: {}",
                text.split_whitespace().collect::<Vec<_>>().join(" ")
            );
            ExitCode::from(2)
        }
    }
}

/// Logs (warnings and up by default, `RUST_LOG` to change) go to stderr.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .without_time()
        .with_target(false)
        .init();
}
