//! Acknowledged publishes to a replicated durable topic and reading them back, as the cluster
//! tests of replicated topics do (`broker/tests/cluster/`): publish `payload(i)` with a
//! `persisted` ack until it is acked, and read numbered events with their positions.

use std::time::Duration;

use starling_client::{Client, Message, Position, Subscription};

use crate::payload::{index64 as index, payload64 as payload};

/// The first position of a replicated topic (stream 1, index 0): everything its replica keeps.
pub const FROM_THE_START: Position = Position { stream: 1, seq: 0 };

/// How long one publish may take to be acked (a topic being created or electing a leader
/// refuses it as retryable meanwhile).
pub const ACK_DEADLINE: Duration = Duration::from_secs(20);

/// How long reading waits for the next event before failing.
pub const NEXT_EVENT: Duration = Duration::from_secs(10);

/// Publishes `payload(i)` to `topic` with a `persisted` ack, again on every refusal (a
/// retryable `Unavailable` while the topic is created or elects a leader) until acked,
/// failing the test after [`ACK_DEADLINE`].
pub async fn publish_until_acked(client: &Client, topic: &str, i: u64) {
    publish_message_until_acked(client, topic, Message::new(payload(i))).await;
}

/// [`publish_until_acked`] of a whole message (headers, a message id).
pub async fn publish_message_until_acked(client: &Client, topic: &str, message: Message) {
    let deadline = tokio::time::Instant::now() + ACK_DEADLINE;
    loop {
        match client.publish_message(topic, message.clone(), true).await {
            Ok(()) => return,
            Err(e) => {
                assert!(
                    tokio::time::Instant::now() < deadline,
                    "publish {} to {topic} never acked: {e}",
                    index(&message.payload)
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// The next `n` events of `sub`: each one's number (`payload(i)`) and position, failing the
/// test when one takes longer than [`NEXT_EVENT`].
pub async fn read(sub: &mut Subscription, n: usize) -> Vec<(u64, Position)> {
    let mut got = Vec::new();
    while got.len() < n {
        match tokio::time::timeout(NEXT_EVENT, sub.next_event()).await {
            Ok(Some(Ok(ev))) => got.push((index(&ev.payload), ev.position)),
            other => panic!("delivery stopped after {} events: {other:?}", got.len()),
        }
    }
    got
}

/// The numbers of [`read`].
pub async fn read_indexes(sub: &mut Subscription, n: usize) -> Vec<u64> {
    read(sub, n).await.into_iter().map(|(i, _)| i).collect()
}
