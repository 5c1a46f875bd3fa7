//! Runs the chosen subcommand with the global options: completions and `bench` need no
//! connection; the others connect once and call one runner.

use starling_client::{Client, ClientConfig, Trust};

use crate::args::{Cli, Command};
use crate::error::{CliError, Outcome};
use crate::{bench, cache_cmd, pub_cmd, sub_cmd};

/// Connects with the global options and runs the chosen subcommand.
pub(crate) async fn run(cli: Cli) -> Result<Outcome, CliError> {
    if let Command::Completions { shell } = cli.command {
        let mut command = <Cli as clap::CommandFactory>::command();
        clap_complete::generate(shell, &mut command, "starling", &mut std::io::stdout());
        return Ok(Outcome::Done);
    }
    if let Command::Bench { .. } = cli.command {
        return bench::exec();
    }
    let trust = Trust::select(cli.ca.clone(), cli.insecure, cli.fingerprint.as_deref())?;
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
        Command::Bench { .. } | Command::Completions { .. } => Ok(Outcome::Done),
    };
    client.close().await;
    outcome
}
