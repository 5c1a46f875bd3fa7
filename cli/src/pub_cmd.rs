//! `starling pub TOPIC MSG [--ack] [--count N] [-H KEY=VALUE]... [--msg-id ID]`; MSG `-`
//! publishes each line of stdin. With headers, each message is published with all of them;
//! with `--msg-id`, each carries that message id (a repeat within the topic's window is
//! dropped by the broker and acked like the original).

use starling_client::{Client, Message};
use tokio::io::{AsyncBufReadExt, BufReader};

use super::args::PubArgs;
use super::error::{CliError, Outcome};

/// Publishes the message (or every stdin line) `count` times each.
pub(crate) async fn run(client: &Client, args: PubArgs) -> Result<Outcome, CliError> {
    if args.message == "-" {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Some(line) = lines.next_line().await? {
            publish(client, &args, line.into_bytes()).await?;
        }
    } else {
        publish(client, &args, args.message.clone().into_bytes()).await?;
    }
    Ok(Outcome::Done)
}

async fn publish(client: &Client, args: &PubArgs, payload: Vec<u8>) -> Result<(), CliError> {
    let payload = bytes::Bytes::from(payload);
    for _ in 0..args.count {
        if !args.headers.is_empty() || args.msg_id.is_some() {
            let mut message = Message {
                payload: payload.clone(),
                headers: args.headers.clone(),
            };
            if let Some(id) = &args.msg_id {
                message = message.with_msg_id(id.clone());
            }
            client
                .publish_message(&args.topic, message, args.ack)
                .await?;
        } else if args.ack {
            client.publish_acked(&args.topic, payload.clone()).await?;
        } else {
            client.publish(&args.topic, payload.clone()).await?;
        }
    }
    Ok(())
}
