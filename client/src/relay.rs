//! The resubscribing relay of a subscription: it owns the subscription at the topic's current
//! owner and, when that ends without the user asking (the owner moved, drained, restarted or
//! died, or the connection broke), subscribes again at the owner of the moment, resuming from
//! one past the last event it relayed (or, before any event arrived, from where the
//! subscription started: a position or a time). The broker then first replays what it
//! retained since (`replay_window_ms`), so nothing published meanwhile is missed; the user's
//! [`Subscription`] drops the events a replay repeats and keeps one continuous sequence.

use std::sync::Weak;
use std::time::{Duration, Instant};

use starling_proto::{Position, StartAt};
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::feed::{BatchItem, StopRequest};
use crate::subscription::Subscription;

/// Pause between resubscription attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// What the relay needs of its client: a new subscription at the topic's owner of the moment.
pub(crate) trait Resubscribe: Send + Sync + 'static {
    /// Subscribes to `topic` from `start` (in queue group `group`, if any) at the owner the
    /// client knows now.
    fn resubscribe(
        &self,
        topic: &str,
        start: StartAt,
        group: Option<&str>,
    ) -> impl Future<Output = Result<Subscription, ClientError>> + Send;
}

/// Relays `current`'s batches to `out` until the user stops, resubscribing as needed.
/// `start` is where `current` was opened; `group` the queue group it joined, if any.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn relay<C: Resubscribe>(
    client: Weak<C>,
    topic: String,
    mut current: Subscription,
    out: mpsc::Sender<BatchItem>,
    mut stop: oneshot::Receiver<StopRequest>,
    give_up_after: Duration,
    start: StartAt,
    group: Option<String>,
) {
    let mut resume = ResumePoint(start.position());
    // A wildcard subscription is live only: it resubscribes live (its topics' positions are
    // not one resume point). So does a queue-group member: the events between its batches
    // went to other members, and a resume point would replay them to it.
    let wildcard = starling_proto::is_subscription_pattern(&topic) || group.is_some();
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
            Some(Ok(delivery)) => {
                if !wildcard {
                    let batch = &delivery.batch;
                    resume.advance(batch.stream, batch.first_seq, batch.events.len());
                }
                if out.send(Ok(delivery)).await.is_err() {
                    return;
                }
            }
            Some(Err(e)) if !e.is_transient() => {
                let _ = out.send(Err(e)).await;
                return;
            }
            ended => {
                let from = resume.or(start);
                tracing::debug!(%topic, reason = ?ended.and_then(Result::err), ?from, "subscription ended; resubscribing");
                let deadline = Instant::now() + give_up_after;
                current = loop {
                    let Some(inner) = client.upgrade() else {
                        return;
                    };
                    match inner.resubscribe(&topic, from, group.as_deref()).await {
                        Ok(sub) => break sub,
                        Err(e) if Instant::now() >= deadline || !e.is_transient() => {
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
            }
        }
    }
}

/// One past the last event relayed, in the newest stream seen (stream ids grow with their
/// start time).
#[derive(Debug, Clone, Copy, Default)]
struct ResumePoint(Option<Position>);

impl ResumePoint {
    /// Where a resubscription starts: one past the last event relayed, else `start` (where
    /// the subscription was opened: nothing relayed yet, so a start time still holds).
    fn or(self, start: StartAt) -> StartAt {
        self.0.map_or(start, StartAt::Position)
    }

    fn advance(&mut self, stream: u64, first_seq: u64, len: usize) {
        let end = first_seq.wrapping_add(len as u64);
        self.0 = Some(match self.0 {
            // A replay repeating events never moves the point back.
            Some(p) if p.stream == stream => Position {
                stream,
                seq: p.seq.max(end),
            },
            Some(p) if p.stream > stream => p,
            _ => Position { stream, seq: end },
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resume_point_follows_the_newest_stream() {
        let mut r = ResumePoint::default();
        r.advance(1, 10, 2);
        assert_eq!(r.0, Some(Position { stream: 1, seq: 12 }));
        r.advance(1, 5, 3); // a replay of what was relayed
        assert_eq!(r.0, Some(Position { stream: 1, seq: 12 }));
        r.advance(2, 0, 4); // the owner moved
        assert_eq!(r.0, Some(Position { stream: 2, seq: 4 }));
        r.advance(1, 12, 1); // a late batch of the older stream
        assert_eq!(r.0, Some(Position { stream: 2, seq: 4 }));
    }

    #[test]
    fn a_start_time_holds_until_an_event_was_relayed() {
        let mut r = ResumePoint(StartAt::TimeMs(42).position());
        assert_eq!(r.or(StartAt::TimeMs(42)), StartAt::TimeMs(42));
        r.advance(3, 0, 2);
        assert_eq!(
            r.or(StartAt::TimeMs(42)),
            StartAt::Position(Position { stream: 3, seq: 2 })
        );
        assert_eq!(ResumePoint::default().or(StartAt::Live), StartAt::Live);
    }

    #[test]
    fn only_transient_errors_resubscribe() {
        assert!(ClientError::Closed.is_transient());
        assert!(ClientError::Connect("refused".into()).is_transient());
        assert!(!ClientError::InvalidTopic("x".into()).is_transient());
    }
}
