//! `starling consume TOPIC --consumer NAME [--count N] [--ack-wait D] [--max-deliver N]
//! [--max-ack-pending N] [--backoff D,…] [--dead-letter TOPIC] [--start WHERE] [--nak]`: joins
//! durable consumer NAME of a durable topic as one member (`Client::consume`) and prints each
//! delivery as a line (lossy UTF-8), or with `--output json` as a JSON line with its position
//! and delivery count. Each delivery is acked once its line is written and flushed, so a
//! message whose line never reached stdout is redelivered (to this or another member); with
//! `--nak` each one is refused instead, for watching redelivery and the dead-letter topic (the
//! last one of `--count` is left unanswered instead: leaving makes it ready again at once).

use std::time::UNIX_EPOCH;

use starling_client::{Client, ConsumerConfig, ConsumerStart, Position};

use super::args::{ConsumeArgs, Output, StartArg};
use super::error::{CliError, Outcome};
use super::lines::{line_of, print_line};

/// The consumer settings the arguments give.
pub(crate) fn consumer_config(args: &ConsumeArgs) -> ConsumerConfig {
    let mut cfg = ConsumerConfig::new(args.name.clone());
    if let Some(d) = args.ack_wait {
        cfg.ack_wait = d;
    }
    if let Some(n) = args.max_deliver {
        cfg.max_deliver = n;
    }
    if let Some(n) = args.max_ack_pending {
        cfg.max_ack_pending = n;
    }
    cfg.backoff = args.backoff.clone();
    cfg.dead_letter = args.dead_letter.clone();
    cfg.start = match args.start {
        StartArg::First => ConsumerStart::First,
        StartArg::Last => ConsumerStart::Last,
        StartArg::Position(stream, seq) => ConsumerStart::Position(Position { stream, seq }),
        StartArg::Time(t) => ConsumerStart::TimeMs(
            t.duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        ),
    };
    cfg
}

/// Prints and answers deliveries until `count` were printed, the stream ends or stdout
/// closes.
pub(crate) async fn run(
    client: &Client,
    args: ConsumeArgs,
    output: Output,
) -> Result<Outcome, CliError> {
    if args.count == Some(0) {
        return Ok(Outcome::Done);
    }
    let mut consumer = client.consume(&args.topic, consumer_config(&args)).await?;
    let mut printed = 0u64;
    while let Some(delivery) = consumer.next().await {
        let delivery = delivery?;
        let line = line_of(output, &delivery.payload, || {
            super::json::delivery_line(&args.topic, &delivery)
        });
        if !print_line(&line)? {
            // The reader went away (e.g. `| head`): stop quietly, this delivery unanswered
            // (redelivered: its line was not shown).
            return Ok(Outcome::Done);
        }
        printed += 1;
        let last = args.count == Some(printed);
        if args.nak && last {
            // Leaving with the last delivery unanswered makes it ready again at once, as a nak
            // would; a nak here could be redelivered to this member before its stream ends,
            // spending one of the message's `max_deliver` attempts on a member that is leaving.
            consumer.close().await;
            return Ok(Outcome::Done);
        }
        if args.nak {
            delivery.nak(None)?;
        } else {
            delivery.ack()?;
        }
        if last {
            // Finishes the stream after the answers already queued.
            consumer.close().await;
            return Ok(Outcome::Done);
        }
    }
    Err(CliError::SubscriptionEnded)
}
