//! `starling check TOPIC [--count N] [--retry-for D]`: an end-to-end check of a broker as a
//! client sees it. One attempt connects with the global options, subscribes to TOPIC,
//! publishes N messages (each acked) whose payloads name this run, and waits (at most the
//! global `--timeout` after the last publish) until each has come back through the
//! subscription; messages of anyone else on TOPIC are ignored. Success prints one `ok:` line
//! on stdout. A failed attempt is reported on stderr and, within `--retry-for`, run again
//! from the connection on (a forbidden operation is not retried: permissions do not change by
//! waiting); the last attempt's error is the command's.

use std::collections::BTreeSet;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use starling_client::{Client, ClientError};

use super::args::{CheckArgs, Cli};
use super::commands::config;
use super::error::{CliError, Outcome};
use super::lines::print_line;

/// Pause between two attempts.
const RETRY_PAUSE: Duration = Duration::from_secs(2);

/// Runs attempts until one succeeds, one fails for good, or `--retry-for` has passed.
pub(crate) async fn run(cli: &Cli, args: &CheckArgs) -> Result<Outcome, CliError> {
    let start = Instant::now();
    let run_id = run_id();
    let mut attempt = 1u32;
    loop {
        let began = Instant::now();
        let result = attempt_once(cli, args, &run_id).await;
        let error = match result {
            Ok(()) => {
                let line = format!(
                    "ok: published {n} message(s) to {topic} and received them back in {ms} ms (attempt {attempt})",
                    n = args.count,
                    topic = args.topic,
                    ms = began.elapsed().as_millis(),
                );
                print_line(&line)?;
                return Ok(Outcome::Done);
            }
            Err(e) => e,
        };
        let elapsed = start.elapsed();
        if !retryable(&error) || elapsed + RETRY_PAUSE > args.retry_for {
            if attempt > 1 {
                eprintln!(
                    "check: giving up after {attempt} attempts in {}s",
                    elapsed.as_secs()
                );
            }
            return Err(error);
        }
        eprintln!(
            "check: attempt {attempt} failed: {}; retrying",
            one_line(&error)
        );
        tokio::time::sleep(RETRY_PAUSE).await;
        attempt += 1;
    }
}

/// One attempt: its own connection, subscription and messages.
async fn attempt_once(cli: &Cli, args: &CheckArgs, run_id: &str) -> Result<(), CliError> {
    let client = Client::connect(config(cli)?).await?;
    let result = round_trip(&client, cli.timeout, args, run_id).await;
    client.close().await;
    result
}

async fn round_trip(
    client: &Client,
    timeout: Duration,
    args: &CheckArgs,
    run_id: &str,
) -> Result<(), CliError> {
    let mut sub = client.subscribe(&args.topic).await?;
    let mut pending = BTreeSet::new();
    for i in 0..args.count {
        let payload = format!("starling check {run_id} {i}");
        client
            .publish_acked(&args.topic, payload.clone().into_bytes())
            .await?;
        pending.insert(payload);
    }
    let deadline = tokio::time::Instant::now() + timeout;
    while !pending.is_empty() {
        let event = match tokio::time::timeout_at(deadline, sub.next_event()).await {
            Err(_) => break,
            Ok(None) => return Err(CliError::SubscriptionEnded),
            Ok(Some(event)) => event?,
        };
        if let Ok(text) = std::str::from_utf8(&event.payload) {
            pending.remove(text);
        }
    }
    sub.unsubscribe().await;
    if pending.is_empty() {
        return Ok(());
    }
    Err(CliError::CheckIncomplete {
        topic: args.topic.clone(),
        published: args.count,
        received: args.count - pending.len() as u64,
        waited: timeout,
    })
}

/// Whether another attempt may succeed: not after the broker refused the operation itself.
fn retryable(e: &CliError) -> bool {
    !matches!(
        e,
        CliError::Usage(_) | CliError::Client(ClientError::Forbidden { .. })
    )
}

/// Names this run in the payloads: the time and the process id.
fn run_id() -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos:x}-{}", std::process::id())
}

fn one_line(e: &CliError) -> String {
    e.to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forbidden_topic_is_not_retried_but_a_refused_login_is() {
        let forbidden = CliError::Client(ClientError::Forbidden {
            op: "publish".into(),
            name: "t".into(),
            message: "no".into(),
        });
        assert!(!retryable(&forbidden));
        assert!(retryable(&CliError::Client(ClientError::Unauthorized(
            "unknown user".into()
        ))));
        assert!(retryable(&CliError::Client(ClientError::Timeout)));
        assert!(retryable(&CliError::SubscriptionEnded));
    }

    #[test]
    fn run_ids_differ_between_processes_and_times() {
        assert_ne!(run_id(), "");
        assert!(run_id().ends_with(&format!("-{}", std::process::id())));
    }
}
