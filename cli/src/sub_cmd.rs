//! `starling sub TOPIC_OR_PATTERN [--count N] [--from-time TIME | --group NAME]`: prints each payload as a
//! line (lossy UTF-8), or with `--output json` each event as a JSON line (with the topic it
//! came from, which a pattern such as `orders.*` makes worth printing), flushing per line.
//! With `--from-time` it starts at the first message stamped at or after TIME (see
//! `Client::subscribe_from_time`), else with live messages; with `--group` it joins that
//! queue group (`Client::subscribe_group`) and prints its share of the messages.

use starling_client::Client;

use super::args::{Output, SubArgs};
use super::error::{CliError, Outcome};
use super::lines::{line_of, print_line};

/// Prints events until `count` were printed, the subscription ends or stdout closes.
pub(crate) async fn run(
    client: &Client,
    args: SubArgs,
    output: Output,
) -> Result<Outcome, CliError> {
    let mut sub = match (args.from_time, &args.group) {
        (_, Some(group)) => client.subscribe_group(&args.topic, group).await?,
        (Some(since), None) => client.subscribe_from_time(&args.topic, since).await?,
        (None, None) => client.subscribe(&args.topic).await?,
    };
    let mut printed = 0u64;
    if args.count == Some(0) {
        return Ok(Outcome::Done);
    }
    while let Some(event) = sub.next_event().await {
        let event = event?;
        let line = line_of(output, &event.payload, || {
            super::json::event_line(&event.topic, &event)
        });
        if !print_line(&line)? {
            // The reader went away (e.g. `| head`): stop quietly.
            return Ok(Outcome::Done);
        }
        printed += 1;
        if args.count == Some(printed) {
            sub.unsubscribe().await;
            return Ok(Outcome::Done);
        }
    }
    Err(CliError::SubscriptionEnded)
}
