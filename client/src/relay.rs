//! The resubscribing relay of a routed subscription: it owns the subscription at the topic's
//! current owner and, when that ends without the user asking (the owner moved, drained or
//! died), subscribes again at the owner of the moment. Sequence numbers are rewritten so the
//! user sees one continuous sequence; events published while no subscription existed are not
//! delivered (the at-most-once window of docs/architecture.md).

use std::sync::Weak;
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::client::Inner;
use crate::pump::StopRequest;
use crate::subscription::{BatchItem, Subscription};

/// Pause between resubscription attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Relays `current`'s batches to `out` until the user stops, resubscribing as needed.
pub(crate) async fn relay(
    client: Weak<Inner>,
    topic: String,
    mut current: Subscription,
    out: mpsc::Sender<BatchItem>,
    mut stop: oneshot::Receiver<StopRequest>,
    give_up_after: Duration,
) {
    let mut seq = SeqMap::default();
    loop {
        let item = tokio::select! {
            item = current.next_batch() => item,
            req = &mut stop => {
                current.unsubscribe().await;
                if let Ok(done) = req {
                    let _ = done.send(());
                }
                return;
            }
            () = out.closed() => return,
        };
        match item {
            Some(Ok(mut batch)) => {
                batch.first_seq = seq.map(batch.first_seq, batch.events.len());
                if out.send(Ok(batch)).await.is_err() {
                    return;
                }
            }
            Some(Err(e)) if !worth_resubscribing(&e) => {
                let _ = out.send(Err(e)).await;
                return;
            }
            ended => {
                tracing::debug!(%topic, reason = ?ended.and_then(Result::err), "subscription ended; resubscribing");
                let deadline = Instant::now() + give_up_after;
                current = loop {
                    let Some(inner) = client.upgrade() else {
                        return;
                    };
                    match inner.subscribe_routed(&topic).await {
                        Ok(sub) => break sub,
                        Err(e) if Instant::now() >= deadline => {
                            let _ = out.send(Err(e)).await;
                            return;
                        }
                        Err(_) => {}
                    }
                    drop(inner);
                    tokio::select! {
                        () = tokio::time::sleep(RETRY_PAUSE) => {}
                        _ = &mut stop => return,
                    }
                };
                seq.restart();
            }
        }
    }
}

/// Errors after which a new subscription can help.
fn worth_resubscribing(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Server { .. }
            | ClientError::Connection(_)
            | ClientError::Closed
            | ClientError::Timeout
            | ClientError::Io(_)
    )
}

/// Maps each underlying subscription's sequence numbers onto one continuous sequence.
#[derive(Debug, Default)]
struct SeqMap {
    /// Added to the underlying sequence number (wrapping).
    offset: u64,
    /// The next outer sequence number.
    next: Option<u64>,
    /// A new underlying subscription started: align its first batch with `next`.
    restarted: bool,
}

impl SeqMap {
    fn map(&mut self, first_seq: u64, len: usize) -> u64 {
        if self.restarted {
            self.offset = self.next.unwrap_or(first_seq).wrapping_sub(first_seq);
            self.restarted = false;
        }
        let outer = first_seq.wrapping_add(self.offset);
        self.next = Some(outer.wrapping_add(len as u64));
        outer
    }

    fn restart(&mut self) {
        self.restarted = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_continue_across_resubscription() {
        let mut m = SeqMap::default();
        assert_eq!(m.map(10, 2), 10);
        assert_eq!(m.map(12, 3), 12);
        // A gap inside one subscription is kept.
        assert_eq!(m.map(20, 1), 20);
        m.restart();
        // The new owner numbers from 1: the user's sequence continues at 21.
        assert_eq!(m.map(1, 2), 21);
        assert_eq!(m.map(3, 1), 23);
    }

    #[test]
    fn only_transient_errors_resubscribe() {
        assert!(worth_resubscribing(&ClientError::Closed));
        assert!(!worth_resubscribing(&ClientError::InvalidTopic("x".into())));
    }
}
