//! Runs the chosen subcommand with the global options: completions and `bench` need no
//! connection, `check` makes its own (one per attempt); the others connect once and call one
//! runner.

use starling_client::{Client, ClientConfig, Credentials, Trust};

use crate::args::{Cli, Command};
use crate::error::{CliError, Outcome};
use crate::{bench, cache_cmd, check_cmd, consume_cmd, pub_cmd, req_cmd, sub_cmd};

/// The client config of the global options: the credentials (at most one of `--cert/--key`,
/// `--token`, `--credentials`), the trust (`--ca`, `--insecure` or `--fingerprint`, else the
/// credentials directory's `ca.crt`) and the server (`--server`, else the directory's
/// `address`, else 127.0.0.1:7400).
pub(crate) fn config(cli: &Cli) -> Result<ClientConfig, CliError> {
    let chosen = Credentials::select(
        cli.cert.as_deref(),
        cli.key_file.as_deref(),
        cli.token.as_ref().and_then(Credentials::auth_token),
        cli.credentials.as_deref(),
    )?;
    let trust = Trust::select_or(
        cli.ca.clone(),
        cli.insecure,
        cli.fingerprint.as_deref(),
        chosen.trust,
    )?;
    let server = cli
        .server
        .clone()
        .or(chosen.address)
        .unwrap_or_else(|| DEFAULT_SERVER.to_string());
    let mut cfg = ClientConfig::new(server, trust)
        .with_credentials(chosen.credentials)
        .with_profile(cli.profile)
        .with_client_name(format!("starling-cli/{}", env!("CARGO_PKG_VERSION")));
    cfg.server_name = cli.server_name.clone();
    cfg.request_timeout = cli.timeout;
    cfg.connect_timeout = cli.timeout;
    cfg.cluster_routing = !cli.direct;
    Ok(cfg)
}

/// The server when neither `--server` nor a credentials directory names one.
const DEFAULT_SERVER: &str = "127.0.0.1:7400";

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
    if let Command::Check(args) = &cli.command {
        // It connects (again, on a failed attempt) itself.
        return check_cmd::run(&cli, args).await;
    }
    let client = Client::connect(config(&cli)?).await?;
    let outcome = match cli.command {
        Command::Pub(a) => pub_cmd::run(&client, a).await,
        Command::Sub(a) => sub_cmd::run(&client, a, cli.output).await,
        Command::Consume(a) => consume_cmd::run(&client, a, cli.output).await,
        Command::Cache(c) => cache_cmd::run(&client, c, cli.output).await,
        Command::Req(a) => req_cmd::request(&client, a, cli.timeout).await,
        Command::Reply(a) => req_cmd::reply(&client, a).await,
        Command::Bench { .. } | Command::Completions { .. } | Command::Check(_) => {
            Ok(Outcome::Done)
        }
    };
    client.close().await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn cli(args: &[&str]) -> Cli {
        Cli::try_parse_from(["starling"].iter().chain(args).copied()).unwrap()
    }

    #[test]
    fn a_credentials_directory_supplies_trust_and_server() {
        let dir = tempfile::tempdir().unwrap();
        let ca = rcgen::generate_simple_self_signed(vec!["ca".into()]).unwrap();
        let ca_pem = ca.cert.pem().into_bytes();
        std::fs::write(dir.path().join("token"), "tok\n").unwrap();
        std::fs::write(dir.path().join("ca.crt"), &ca_pem).unwrap();
        std::fs::write(dir.path().join("address"), "demo.ns.svc:7400\n").unwrap();
        let path = dir.path().to_str().unwrap();

        let cfg = config(&cli(&["--credentials", path, "sub", "t"])).unwrap();
        assert_eq!(cfg.server, "demo.ns.svc:7400");
        assert_eq!(cfg.trust, Trust::CaPem(ca_pem));
        assert_eq!(cfg.credentials, Credentials::Token("tok".into()));

        // Options on the command line win over the directory.
        let cfg = config(&cli(&[
            "--credentials",
            path,
            "--insecure",
            "--server",
            "h:1",
            "sub",
            "t",
        ]))
        .unwrap();
        assert_eq!((cfg.server.as_str(), cfg.trust), ("h:1", Trust::Insecure));
    }

    #[test]
    fn credential_options_are_exclusive_and_need_a_trust() {
        let err = config(&cli(&[
            "--insecure",
            "--token",
            "t",
            "--cert",
            "c",
            "sub",
            "x",
        ]));
        assert!(
            matches!(&err, Err(CliError::Client(starling_client::ClientError::Config(m))) if m.starts_with("choose at most one")),
            "{err:?}"
        );
        let err = config(&cli(&["--token", "t", "sub", "x"])).map(|_| ());
        assert!(
            err.as_ref()
                .is_err_and(|e| e.to_string().contains("--credentials DIR holding a ca.crt")),
            "{err:?}"
        );
        let cfg = config(&cli(&["--insecure", "--token", "t", "sub", "x"])).unwrap();
        assert_eq!(cfg.server, DEFAULT_SERVER);
        assert_eq!(cfg.credentials, Credentials::Token("t".into()));
    }
}
