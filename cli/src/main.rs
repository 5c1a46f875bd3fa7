//! `starling`: the command-line client of the Starling broker. Parses the
//! arguments, runs one subcommand and turns its outcome into an exit code
//! (0 done, 1 `cache get` found nothing, 2 error, 3 unauthorized, 4 forbidden, 5 `req` found
//! no responders: see `starling --help`); every error is a single line on stderr.
//!
//! | module | job |
//! | --- | --- |
//! | `args` | clap definitions of the command line |
//! | `commands` | runs the chosen subcommand |
//! | `pub_cmd`, `sub_cmd`, `consume_cmd`, `cache_cmd`, `req_cmd`, `check_cmd` | one runner per subcommand (`req_cmd`: `req` and `reply`) |
//! | `bench` | `starling bench`: runs the separate `starling-bench` harness |
//! | `json` | the `--output json` lines |
//! | `duration` | duration arguments |
//! | `time_arg` | time arguments (`sub --from-time`: RFC 3339 or Unix milliseconds) |
//! | `error` | how a subcommand ends |

mod args;
mod bench;
mod cache_cmd;
mod check_cmd;
mod commands;
mod consume_cmd;
mod duration;
mod error;
mod json;
mod lines;
mod pub_cmd;
mod req_cmd;
mod sub_cmd;
mod time_arg;

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;

use args::Cli;
use error::{CliError, Outcome};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return clap_exit(e),
    };
    init_tracing();
    match run(cli) {
        Ok(Outcome::Done) => ExitCode::SUCCESS,
        Ok(Outcome::NotFound) => {
            eprintln!("not found");
            ExitCode::from(1)
        }
        Err(e) => {
            // The harness printed its own error; its exit code is ours.
            #[cfg(not(unix))]
            if let Some(CliError::Bench(code)) = e.downcast_ref::<CliError>() {
                return ExitCode::from(u8::try_from(*code).unwrap_or(2));
            }
            eprintln!("error: {}", one_line(&format!("{e:#}")));
            ExitCode::from(exit_code(&e))
        }
    }
}

/// The exit code of a failed run: 3 when the broker refused the credentials, 4 when it refused
/// the operation, 5 when a request found no responders, 2 for anything else (documented in
/// `args::EXIT_CODES`).
fn exit_code(e: &anyhow::Error) -> u8 {
    use starling_client::ClientError;
    match e.downcast_ref::<CliError>() {
        Some(CliError::Client(ClientError::Unauthorized(_))) => 3,
        Some(CliError::Client(ClientError::Forbidden { .. })) => 4,
        Some(CliError::Client(ClientError::NoResponders(_))) => 5,
        _ => 2,
    }
}

fn run(cli: Cli) -> anyhow::Result<Outcome> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(commands::run(cli))?)
}

/// Help and version go to stdout as usual; usage errors become one line.
fn clap_exit(e: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            let _ = e.print();
            ExitCode::SUCCESS
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        _ => {
            eprintln!("{}", clap_one_line(&e.render().to_string()));
            ExitCode::from(2)
        }
    }
}

/// The message part of a clap error (before its usage and help hints), on one line.
fn clap_one_line(text: &str) -> String {
    let message = text
        .split("\n\n")
        .take_while(|part| !part.starts_with("Usage:") && !part.starts_with("For more"))
        .collect::<Vec<_>>()
        .join(" ");
    let line = one_line(&message);
    if line.is_empty() {
        "error: invalid arguments".to_string()
    } else {
        line
    }
}

/// Logs (warnings and up by default, `RUST_LOG` to change) go to stderr.
fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .without_time()
        .with_target(false)
        .init();
}

/// Collapses any line breaks inside an error message.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_have_their_own_exit_codes() {
        use starling_client::ClientError;
        let err = |e: ClientError| anyhow::Error::from(CliError::Client(e));
        assert_eq!(exit_code(&err(ClientError::Unauthorized("no".into()))), 3);
        let forbidden = ClientError::Forbidden {
            op: "publish".into(),
            name: "y".into(),
            message: "user \"x\" may not publish topic \"y\"".into(),
        };
        let e = err(forbidden);
        assert_eq!(exit_code(&e), 4);
        assert_eq!(
            one_line(&format!("{e:#}")),
            "forbidden: user \"x\" may not publish topic \"y\""
        );
        assert_eq!(exit_code(&err(ClientError::NoResponders("t".into()))), 5);
        assert_eq!(exit_code(&err(ClientError::Timeout)), 2);
        assert_eq!(exit_code(&anyhow::anyhow!("other")), 2);
    }

    #[test]
    fn clap_errors_become_one_line() {
        let text = "error: the following required arguments were not provided:\n  <TOPIC>\n  <MSG>\n\nUsage: starling pub <TOPIC> <MSG>\n\nFor more information, try '--help'.\n";
        assert_eq!(
            clap_one_line(text),
            "error: the following required arguments were not provided: <TOPIC> <MSG>"
        );
        assert_eq!(clap_one_line(""), "error: invalid arguments");
    }
}
