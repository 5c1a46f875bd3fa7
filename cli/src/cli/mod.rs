//! The `starling` command line: argument definitions, trust selection,
//! duration parsing and one runner per subcommand.

pub(crate) mod args;
pub(crate) mod bench;
pub(crate) mod cache_cmd;
pub(crate) mod duration;
pub(crate) mod error;
pub(crate) mod json;
pub(crate) mod pub_cmd;
pub(crate) mod sub_cmd;
pub(crate) mod trust;

use starling_client::{Client, ClientConfig};

use self::args::{Cli, Command};
use self::error::{CliError, Outcome};

/// Connects with the global options and runs the chosen subcommand.
pub(crate) async fn run(cli: Cli) -> Result<Outcome, CliError> {
    if let Command::Completions { shell } = cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(shell, &mut command, "starling", &mut std::io::stdout());
        return Ok(Outcome::Done);
    }
    if let Command::Bench(args) = cli.command {
        let globals = bench::Globals {
            server: cli.server,
            ca: cli.ca,
            insecure: cli.insecure,
            fingerprint: cli.fingerprint,
            profile: cli.profile,
            server_name: cli.server_name,
            timeout: cli.timeout,
            output: cli.output,
        };
        bench::run(globals, *args).await?;
        return Ok(Outcome::Done);
    }
    let trust = trust::select(cli.ca.clone(), cli.insecure, cli.fingerprint.as_deref())?;
    let mut cfg = ClientConfig::new(cli.server.clone(), trust)
        .with_profile(cli.profile)
        .with_client_name(format!("starling-cli/{}", env!("CARGO_PKG_VERSION")));
    cfg.server_name = cli.server_name.clone();
    cfg.request_timeout = cli.timeout;
    cfg.connect_timeout = cli.timeout;
    cfg.cluster_routing = !cli.direct;
    let client = Client::connect(cfg).await?;
    let outcome = match cli.command {
        Command::Pub(a) => pub_cmd::run(&client, a).await,
        Command::Sub(a) => sub_cmd::run(&client, a, cli.output).await,
        Command::Cache(c) => cache_cmd::run(&client, c, cli.output).await,
        Command::Bench(_) | Command::Completions { .. } => Ok(Outcome::Done),
    };
    client.close().await;
    outcome
}
