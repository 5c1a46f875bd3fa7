//! [`Subscription`]: the events of one topic (or, for a wildcard subscription such as
//! `orders.*`, of every topic its pattern matches) as a `futures::Stream`, fed by a
//! reader task (see `pump`) or a resubscribing relay (see `relay`). It drops events a replay
//! sends twice, numbers events with one continuous sequence (per topic on a wildcard
//! subscription), counts the events the broker dropped because this subscriber was too slow,
//! and knows its resume point (a wildcard subscription has none: it is live only).

use std::collections::{HashMap, VecDeque};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use starling_proto::{EventBatch, Header, IndexedHeaders, Position, SeenStreams};
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::error::Operation;
use crate::feed::{BatchItem, Delivery, StopRequest};

/// Topics a wildcard subscription numbers separately at most; past it their numberings start
/// afresh (the next event of each is numbered as if it were its topic's first).
const MAX_TOPICS_NUMBERED: usize = 4096;

/// One delivered message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The topic it was published to: the subscription's, or on a wildcard subscription the
    /// matching topic it came from.
    pub topic: Arc<str>,
    /// This subscription's sequence number of the event: consecutive, except that events the
    /// broker dropped for this subscriber leave a gap. It starts at the broker's number of the
    /// first event received. On a wildcard subscription, per topic.
    pub seq: u64,
    /// Where the event sits in the topic's streams, as numbered by the topic's owner; the same
    /// wherever the event is delivered. One past it is the resume point for
    /// [`Client::subscribe_from`](crate::Client::subscribe_from).
    pub position: Position,
    /// The topic or pattern of the subscription that received it (the same as `topic` on a
    /// plain subscription). [`Client::reply`](crate::Client::reply) answers a request through
    /// the broker the subscription is at, which knows the request was delivered.
    pub subscription: Arc<str>,
    /// The published payload.
    pub payload: Bytes,
    /// The message's headers, in the order published (empty when it had none, and always on a
    /// connection the broker did not grant `HEADERS`). Events replayed to a resuming
    /// subscription from a durable topic's log (single-copy or replicated) keep their
    /// headers; those replayed from a topic's retained tail in memory come without them.
    pub headers: Vec<Header>,
}

impl Event {
    /// The trace context the publisher sent with the message (its `traceparent` and
    /// `tracestate`, read by the global text-map propagator), to start the span that
    /// handles it under: `tracer.start_with_context("handle", &event.trace_context())`. An
    /// empty context when it carries none.
    pub fn trace_context(&self) -> opentelemetry::Context {
        crate::trace::context_of(&self.headers)
    }
}

/// A live subscription. Ends (`None`) when the server ends it or after
/// [`Subscription::unsubscribe`]; dropping it also ends it on the server.
pub struct Subscription {
    id: u64,
    topic: Arc<str>,
    batches: mpsc::Receiver<BatchItem>,
    ready: VecDeque<Event>,
    numbering: Numbering,
    /// On a wildcard subscription, each topic's numbering (at most [`MAX_TOPICS_NUMBERED`]),
    /// and the drops counted by numberings since forgotten.
    by_topic: Option<(HashMap<Arc<str>, Numbering>, u64)>,
    resume: Option<Position>,
    /// A queue-group member: the gaps between its batches are the other members' events.
    grouped: bool,
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
        resume: Option<Position>,
    ) -> Self {
        let wildcard = starling_proto::is_subscription_pattern(&topic);
        Subscription {
            id,
            topic: Arc::from(topic),
            batches,
            ready: VecDeque::new(),
            numbering: Numbering::from(resume),
            by_topic: wildcard.then(|| (HashMap::new(), 0)),
            resume,
            grouped: false,
            stop: Some(stop),
            request_timeout,
        }
    }

    /// Marks a queue-group member's subscription (its gaps are not drops).
    pub(crate) fn in_group(mut self) -> Self {
        self.grouped = true;
        self
    }

    /// The subscription id the server assigned.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The subscribed topic (a pattern, for a wildcard subscription).
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Events the server dropped for this subscriber so far, detected as
    /// gaps in the sequence numbers between batches. Always 0 for a queue-group member
    /// ([`Client::subscribe_group`](crate::Client::subscribe_group)): its gaps are the events
    /// the other members got.
    pub fn dropped_events(&self) -> u64 {
        if self.grouped {
            return 0;
        }
        let wildcard = self.by_topic.as_ref().map_or(0, |(topics, forgotten)| {
            topics.values().map(|n| n.dropped).sum::<u64>() + forgotten
        });
        self.numbering.dropped + wildcard
    }

    /// Numbers a delivered batch into `ready`.
    fn take(&mut self, delivery: Delivery) {
        let Delivery {
            topic,
            batch,
            headers,
        } = delivery;
        let topic = topic.unwrap_or_else(|| Arc::clone(&self.topic));
        let subscription = Arc::clone(&self.topic);
        let numbering = match &mut self.by_topic {
            None => &mut self.numbering,
            Some((topics, forgotten)) => {
                if !topics.contains_key(&topic) && topics.len() >= MAX_TOPICS_NUMBERED {
                    *forgotten += topics.values().map(|n| n.dropped).sum::<u64>();
                    topics.clear();
                }
                topics.entry(Arc::clone(&topic)).or_default()
            }
        };
        self.ready
            .extend(numbering.number(batch, headers, &topic, &subscription));
    }

    /// One past the last event this subscription returned (or the position it was opened
    /// with): pass it to [`Client::subscribe_from`](crate::Client::subscribe_from) to continue
    /// where this subscription stopped. `None` before any event of a live-only subscription or
    /// of one opened from a time, and always on a wildcard subscription.
    pub fn resume_point(&self) -> Option<Position> {
        self.resume
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
                if this.by_topic.is_none() {
                    this.resume = Some(Position {
                        stream: event.position.stream,
                        seq: event.position.seq.wrapping_add(1),
                    });
                }
                return Poll::Ready(Some(Ok(event)));
            }
            match this.batches.poll_recv(cx) {
                Poll::Ready(Some(Ok(delivery))) => this.take(delivery),
                // A subscription the broker ends with `Forbidden` (its user's permissions were
                // narrowed by a reload) names the operation and the topic.
                Poll::Ready(Some(Err(e))) => {
                    let e = e.in_operation(Operation::Subscribe, this.topic.as_bytes());
                    return Poll::Ready(Some(Err(e)));
                }
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
            .field("dropped_events", &self.dropped_events())
            .finish_non_exhaustive()
    }
}

/// Turns batches into events: drops what was already received (a replay overlapping what
/// came before), and numbers the rest.
#[derive(Debug, Default)]
struct Numbering {
    seen: SeenStreams,
    /// One past the last event numbered, in the broker's numbering.
    last: Option<Position>,
    /// The next `Event::seq`.
    next_seq: Option<u64>,
    dropped: u64,
}

impl From<Option<Position>> for Numbering {
    fn from(resume: Option<Position>) -> Numbering {
        let mut n = Numbering::default();
        if let Some(p) = resume {
            // Everything before the resume point counts as received.
            let start = Position {
                stream: p.stream,
                seq: 0,
            };
            n.seen
                .skip(start, usize::try_from(p.seq).unwrap_or(usize::MAX));
            n.last = Some(p);
        }
        n
    }
}

impl Numbering {
    fn number(
        &mut self,
        batch: EventBatch,
        headers: Vec<IndexedHeaders>,
        topic: &Arc<str>,
        subscription: &Arc<str>,
    ) -> impl Iterator<Item = Event> + use<> {
        let EventBatch {
            stream,
            first_seq,
            mut events,
        } = batch;
        let skip = self.seen.skip(
            Position {
                stream,
                seq: first_seq,
            },
            events.len(),
        );
        let skip = skip.min(events.len());
        let events: Vec<Bytes> = events.split_off(skip);
        // Each event's headers, by its index in what is left after the repeats.
        let mut own: Vec<Vec<Header>> = vec![Vec::new(); events.len()];
        for h in headers {
            let at = usize::try_from(h.index)
                .ok()
                .and_then(|i| i.checked_sub(skip));
            if let Some(slot) = at.and_then(|i| own.get_mut(i)) {
                *slot = h.headers;
            }
        }
        let first = first_seq.wrapping_add(skip as u64);
        if events.is_empty() {
            return Vec::new().into_iter();
        }
        // A gap inside one stream: the broker dropped events for this subscriber.
        let gap = match self.last {
            Some(last) if last.stream == stream && first > last.seq => first - last.seq,
            _ => 0,
        };
        self.dropped = self.dropped.saturating_add(gap);
        let seq0 = self.next_seq.map_or(first, |s| s.wrapping_add(gap));
        let n = events.len() as u64;
        self.last = Some(Position {
            stream,
            seq: first.wrapping_add(n),
        });
        self.next_seq = Some(seq0.wrapping_add(n));
        events
            .into_iter()
            .zip(own)
            .enumerate()
            .map(|(i, (payload, headers))| Event {
                topic: Arc::clone(topic),
                subscription: Arc::clone(subscription),
                seq: seq0.wrapping_add(i as u64),
                position: Position {
                    stream,
                    seq: first.wrapping_add(i as u64),
                },
                payload,
                headers,
            })
            .collect::<Vec<_>>()
            .into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(stream: u64, first_seq: u64, n: u8) -> EventBatch {
        EventBatch {
            stream,
            first_seq,
            events: (0..n).map(|i| Bytes::from(vec![i])).collect(),
        }
    }

    impl Numbering {
        fn number_in(&mut self, b: EventBatch) -> impl Iterator<Item = Event> + use<> {
            self.number(b, Vec::new(), &Arc::from("t"), &Arc::from("t"))
        }
    }

    #[test]
    fn headers_follow_their_events_past_repeats() {
        let mut n = Numbering::default();
        n.number_in(batch(7, 0, 2)).count(); // seq 0 and 1
        // A batch from seq 1: its first event repeats and is dropped; the headers of its
        // index 2 belong to seq 3, the second event left.
        let headers = vec![
            IndexedHeaders {
                index: 0,
                headers: vec![Header::new("dup", "")],
            },
            IndexedHeaders {
                index: 2,
                headers: vec![Header::new("k", "v")],
            },
        ];
        let got: Vec<(u64, Vec<Header>)> = n
            .number(batch(7, 1, 3), headers, &Arc::from("t"), &Arc::from("t"))
            .map(|e| (e.position.seq, e.headers))
            .collect();
        assert_eq!(got, [(2, vec![]), (3, vec![Header::new("k", "v")])]);
    }

    fn seqs(events: impl Iterator<Item = Event>) -> Vec<(u64, u64)> {
        events.map(|e| (e.seq, e.position.seq)).collect()
    }

    #[test]
    fn events_are_numbered_from_the_first_received() {
        let mut n = Numbering::default();
        assert_eq!(seqs(n.number_in(batch(7, 10, 2))), [(10, 10), (11, 11)]);
        assert_eq!(seqs(n.number_in(batch(7, 12, 1))), [(12, 12)]);
        assert_eq!(n.dropped, 0);
    }

    #[test]
    fn gaps_within_a_stream_count_as_drops() {
        let mut n = Numbering::default();
        n.number_in(batch(7, 5, 3)).count(); // 5..=7
        assert_eq!(seqs(n.number_in(batch(7, 12, 1))), [(12, 12)]); // 8..=11 dropped
        assert_eq!(n.dropped, 4);
    }

    #[test]
    fn a_new_stream_continues_the_sequence_and_replays_are_trimmed() {
        let mut n = Numbering::default();
        n.number_in(batch(1, 0, 5)).count(); // seq 0..=4
        // The topic moved: stream 2 starts at 0; the user's sequence goes on at 5.
        assert_eq!(seqs(n.number_in(batch(2, 0, 2))), [(5, 0), (6, 1)]);
        // A replay of stream 2 overlapping what was received: only 2..4 are new.
        assert_eq!(seqs(n.number_in(batch(2, 0, 4))), [(7, 2), (8, 3)]);
        // A late replay of stream 1: all seen.
        assert_eq!(n.number_in(batch(1, 2, 3)).count(), 0);
        assert_eq!(n.dropped, 0);
    }

    #[test]
    fn a_resume_point_drops_what_came_before_it() {
        let mut n = Numbering::from(Some(Position { stream: 3, seq: 10 }));
        // The broker replays whole batches: 8 and 9 were received before.
        assert_eq!(seqs(n.number_in(batch(3, 8, 4))), [(10, 10), (11, 11)]);
    }
}
