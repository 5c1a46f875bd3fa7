//! `starling req TOPIC MSG [--timeout D]` (prints the reply; exit 5 when nothing subscribes to
//! TOPIC) and `starling reply TOPIC_OR_PATTERN MSG [--count N]` (answers every request with MSG
//! until interrupted, or until N were answered).

use std::io::Write;

use starling_client::{Client, ClientError};

use super::args::{ReplyArgs, ReqArgs};
use super::error::{CliError, Outcome};

/// Sends one request and prints its reply's payload as a line.
/// Waits `timeout` (the global `--timeout`) for it.
pub(crate) async fn request(
    client: &Client,
    args: ReqArgs,
    timeout: std::time::Duration,
) -> Result<Outcome, CliError> {
    let reply = client
        .request(&args.topic, args.message.into_bytes(), timeout)
        .await?;
    let mut out = std::io::stdout().lock();
    out.write_all(&reply.payload)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// Answers each request on TOPIC_OR_PATTERN with MSG; an event that is not a request is
/// skipped.
pub(crate) async fn reply(client: &Client, args: ReplyArgs) -> Result<Outcome, CliError> {
    let mut sub = client.subscribe(&args.topic).await?;
    let mut answered = 0u64;
    while args.count.is_none_or(|n| answered < n) {
        let Some(event) = sub.next_event().await else {
            return Err(CliError::SubscriptionEnded);
        };
        let event = event?;
        match client
            .reply(&event, args.message.clone().into_bytes())
            .await
        {
            Ok(()) => answered += 1,
            Err(ClientError::NotARequest) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Outcome::Done)
}
