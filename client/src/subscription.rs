//! [`Subscription`]: the events of one topic as a `futures::Stream`, fed by a
//! reader task (see `pump`), with gap accounting for events the broker
//! dropped because this subscriber was too slow.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use starling_proto::EventBatch;
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::pump::StopRequest;

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The message's sequence number within its topic.
    pub seq: u64,
    /// The published payload.
    pub payload: Bytes,
}

/// What the reader task hands over: a batch, or the error that ended the stream.
pub(crate) type BatchItem = Result<EventBatch, ClientError>;

/// A live subscription. Ends (`None`) when the server ends it or after
/// [`Subscription::unsubscribe`]; dropping it also ends it on the server.
pub struct Subscription {
    id: u64,
    topic: String,
    batches: mpsc::Receiver<BatchItem>,
    ready: VecDeque<Event>,
    gaps: GapCounter,
    stop: Option<oneshot::Sender<StopRequest>>,
    request_timeout: Duration,
}

impl Subscription {
    /// Wraps an accepted subscription whose batches arrive on `batches`.
    pub(crate) fn new(
        id: u64,
        topic: String,
        batches: mpsc::Receiver<BatchItem>,
        stop: oneshot::Sender<StopRequest>,
        request_timeout: Duration,
    ) -> Self {
        Subscription {
            id,
            topic,
            batches,
            ready: VecDeque::new(),
            gaps: GapCounter::default(),
            stop: Some(stop),
            request_timeout,
        }
    }

    /// The subscription id the server assigned.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The subscribed topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Events the server dropped for this subscriber so far, detected as
    /// gaps in the sequence numbers between batches.
    pub fn dropped_events(&self) -> u64 {
        self.gaps.dropped
    }

    /// The next raw batch (for the resubscribing relay, which never reads events).
    pub(crate) async fn next_batch(&mut self) -> Option<BatchItem> {
        self.batches.recv().await
    }

    /// The next event; `None` once the subscription has ended.
    pub async fn next_event(&mut self) -> Option<Result<Event, ClientError>> {
        self.next().await
    }

    /// Tells the server to end the subscription and closes the stream
    /// (waits at most the request timeout for the message to go out).
    pub async fn unsubscribe(mut self) {
        let Some(stop) = self.stop.take() else {
            return;
        };
        let (done, finished) = oneshot::channel();
        if stop.send(done).is_ok() {
            let _ = tokio::time::timeout(self.request_timeout, finished).await;
        }
    }
}

impl Stream for Subscription {
    type Item = Result<Event, ClientError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(event) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(event)));
            }
            match this.batches.poll_recv(cx) {
                Poll::Ready(Some(Ok(batch))) => {
                    this.gaps.observe(batch.first_seq, batch.events.len());
                    this.ready.extend(into_events(batch));
                }
                Poll::Ready(Some(Err(e))) => return Poll::Ready(Some(Err(e))),
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.id)
            .field("topic", &self.topic)
            .field("dropped_events", &self.gaps.dropped)
            .finish_non_exhaustive()
    }
}

/// Events of a batch with their sequence numbers.
fn into_events(batch: EventBatch) -> impl Iterator<Item = Event> {
    let first = batch.first_seq;
    batch
        .events
        .into_iter()
        .enumerate()
        .map(move |(i, payload)| Event {
            seq: first.wrapping_add(i as u64),
            payload,
        })
}

/// Counts sequence numbers skipped between consecutive batches.
#[derive(Debug, Default)]
struct GapCounter {
    next_seq: Option<u64>,
    dropped: u64,
}

impl GapCounter {
    fn observe(&mut self, first_seq: u64, len: usize) {
        if let Some(expected) = self.next_seq
            && first_seq > expected
        {
            self.dropped = self.dropped.saturating_add(first_seq - expected);
        }
        self.next_seq = Some(first_seq.wrapping_add(len as u64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_get_consecutive_sequence_numbers() {
        let batch = EventBatch {
            first_seq: 10,
            events: vec![Bytes::from_static(b"a"), Bytes::from_static(b"b")],
        };
        let seqs: Vec<u64> = into_events(batch).map(|e| e.seq).collect();
        assert_eq!(seqs, vec![10, 11]);
    }

    #[test]
    fn gaps_between_batches_count_as_drops() {
        let mut g = GapCounter::default();
        g.observe(5, 3); // 5..=7; nothing known before
        assert_eq!(g.dropped, 0);
        g.observe(8, 2); // contiguous
        assert_eq!(g.dropped, 0);
        g.observe(14, 1); // 10..=13 missing
        assert_eq!(g.dropped, 4);
        g.observe(15, 0);
        g.observe(15, 1);
        assert_eq!(g.dropped, 4);
    }
}
