//! Durable consumers (docs/consumers.md): [`ConsumerConfig`], the [`Consumer`] stream a
//! member reads its deliveries from, and each [`Delivery`] with its `ack`, `nak`,
//! `in_progress` and `term`. One consumer stream is one member: the broker shares the
//! consumer's messages among its members, redelivers what a member does not ack within
//! `ack_wait` (or at once when its stream ends), and resumes at the ack floor after a
//! restart. The stream does not reopen itself: when it ends (the broker restarted, the
//! connection broke) [`Consumer::next`] returns the error, and the caller opens the consumer
//! again (what this member held is redelivered).

use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{
    ConsumerAck, ConsumerAckOp, ConsumerOpen, ConsumerStart, Frame, Header, Position, features,
    read_frame,
};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::ClientError;
use crate::connector::Conn;
use crate::error::ProtocolError;

/// Deliveries buffered in the SDK before the stream's reader waits (the broker's window,
/// `max_ack_pending`, bounds what it sends anyway).
const BUFFER: usize = 1024;

/// How long [`Consumer::close`] waits for the broker to receive the answers already given.
const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// A durable consumer's settings. Every member of one consumer must give the same ones (the
/// broker refuses a member whose settings differ from the consumer's, `InvalidRequest`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// The consumer's name: 1 to 64 of `A-Z a-z 0-9 - _ .`.
    pub name: String,
    /// How long a delivery may stay unacked before it is redelivered (default 30 s).
    pub ack_wait: Duration,
    /// Most deliveries of one message, 0 for no limit (default 0). Past it the message goes
    /// to `dead_letter`, if set, and is not delivered again.
    pub max_deliver: u32,
    /// Most messages the consumer holds from its ack floor on (default 1,000; at most the
    /// broker's `max_consumer_ack_pending`).
    pub max_ack_pending: u32,
    /// Redelivery delays after the 1st, 2nd, ... failed delivery; the last repeats (default
    /// none: at once). At most 16.
    pub backoff: Vec<Duration>,
    /// The topic messages past `max_deliver` are published to.
    pub dead_letter: Option<String>,
    /// Where a new consumer starts (default: the first message the log holds); ignored when
    /// the consumer exists.
    pub start: ConsumerStart,
}

impl ConsumerConfig {
    /// The defaults, for consumer `name`.
    pub fn new(name: impl Into<String>) -> ConsumerConfig {
        ConsumerConfig {
            name: name.into(),
            ack_wait: Duration::from_secs(30),
            max_deliver: 0,
            max_ack_pending: 1_000,
            backoff: Vec::new(),
            dead_letter: None,
            start: ConsumerStart::First,
        }
    }

    pub(crate) fn open(&self, topic: &str) -> Result<ConsumerOpen, ClientError> {
        let invalid = |why: String| ClientError::Config(format!("consumer {:?}: {why}", self.name));
        starling_proto::validate_consumer(&self.name).map_err(|w| invalid(w.into()))?;
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if self.ack_wait.is_zero() {
            return Err(invalid("ack_wait is 0".into()));
        }
        if self.max_ack_pending == 0 {
            return Err(invalid("max_ack_pending is 0".into()));
        }
        if self.backoff.len() > starling_proto::MAX_BACKOFF_STEPS {
            return Err(invalid("more than 16 backoff steps".into()));
        }
        if let Some(dl) = &self.dead_letter {
            starling_proto::validate_topic(dl)
                .map_err(|w| invalid(format!("dead-letter topic: {w}")))?;
        }
        Ok(ConsumerOpen {
            request_id: 1,
            topic: topic.to_string(),
            consumer: self.name.clone(),
            ack_wait_ms: ms(self.ack_wait),
            max_deliver: self.max_deliver,
            max_ack_pending: self.max_ack_pending,
            start: self.start,
            dead_letter: self.dead_letter.clone(),
            backoff_ms: self.backoff.iter().map(|d| ms(*d)).collect(),
        })
    }
}

/// One delivery of a consumer's message. Answer it once: [`Delivery::ack`],
/// [`Delivery::nak`], [`Delivery::term`] (or [`Delivery::in_progress`] first, any number of
/// times); unanswered, it is redelivered after `ack_wait`.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// The message's position in its topic.
    pub position: Position,
    /// Which delivery of the message this is (1 for the first).
    pub delivery: u32,
    /// When the message was written to the topic's log, Unix ms.
    pub timestamp_ms: u64,
    /// The message.
    pub payload: Bytes,
    /// The message's headers as it was published (empty for none).
    pub headers: Vec<Header>,
    acks: mpsc::UnboundedSender<ConsumerAck>,
}

impl Delivery {
    /// The trace context the publisher sent with the message ([`Event::trace_context`](crate::Event::trace_context)).
    pub fn trace_context(&self) -> opentelemetry::Context {
        crate::trace::context_of(&self.headers)
    }

    fn answer(&self, op: ConsumerAckOp) -> Result<(), ClientError> {
        self.acks
            .send(ConsumerAck {
                position: self.position,
                op,
            })
            .map_err(|_| ClientError::Closed)
    }

    /// Processed: never delivered again.
    pub fn ack(&self) -> Result<(), ClientError> {
        self.answer(ConsumerAckOp::Ack)
    }

    /// Not processed: redelivered after `delay` (`None`: the consumer's backoff schedule).
    pub fn nak(&self, delay: Option<Duration>) -> Result<(), ClientError> {
        // u64::MAX on the wire means "the backoff schedule".
        let delay_ms = delay
            .map(|d| u64::try_from(d.as_millis()).map_or(u64::MAX - 1, |d| d.min(u64::MAX - 1)));
        self.answer(ConsumerAckOp::Nak { delay_ms })
    }

    /// Still working on it: its deadline is `ack_wait` from now again.
    pub fn in_progress(&self) -> Result<(), ClientError> {
        self.answer(ConsumerAckOp::InProgress)
    }

    /// Never deliver it again, unprocessed.
    pub fn term(&self) -> Result<(), ClientError> {
        self.answer(ConsumerAckOp::Term)
    }
}

/// A member of a durable consumer: its deliveries, in the order the broker sends them.
pub struct Consumer {
    topic: String,
    member_id: u64,
    rx: mpsc::Receiver<Result<Delivery, ClientError>>,
    _acks: mpsc::UnboundedSender<ConsumerAck>,
    /// Tells the writer to send what is queued and finish, even while deliveries are held.
    closing: Option<oneshot::Sender<()>>,
    writer: JoinHandle<()>,
}

impl Consumer {
    /// The next delivery; `None` once the broker finished the stream, an error if it ended
    /// otherwise (open the consumer again to go on).
    pub async fn next(&mut self) -> Option<Result<Delivery, ClientError>> {
        self.rx.recv().await
    }

    /// The topic.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// The broker's id of this member.
    pub fn member_id(&self) -> u64 {
        self.member_id
    }

    /// Leaves the consumer: sends the answers already given, finishes the stream and waits
    /// (up to 5 s) until the broker has received them, so an `ack` given just before is not
    /// lost to a process that exits or a connection closed right after. What is delivered
    /// and unanswered is redelivered to the other members; an answer given afterwards
    /// through a held [`Delivery`] fails with [`ClientError::Closed`]. Dropping the
    /// `Consumer` (and every `Delivery`) instead finishes the stream without waiting.
    pub async fn close(mut self) {
        self.rx.close();
        if let Some(closing) = self.closing.take() {
            let _ = closing.send(());
        }
        let _ = tokio::time::timeout(CLOSE_WAIT, &mut self.writer).await;
    }
}

/// Opens a member stream on `conn`.
pub(crate) async fn open(
    conn: &Conn,
    open: ConsumerOpen,
    timeout: Duration,
) -> Result<Consumer, ClientError> {
    if conn.info.features & features::CONSUMERS == 0 {
        return Err(ClientError::Unsupported(
            "durable consumers (the broker did not grant CONSUMERS; it is older than this client)"
                .into(),
        ));
    }
    let topic = open.topic.clone();
    let decoder = conn.info.decoder();
    let opened = async {
        let (mut send, mut recv) = conn.quic.open_bi().await?;
        send.write_all(&Frame::ConsumerOpen(open).to_bytes())
            .await?;
        let mut buf = BytesMut::new();
        match read_frame(&mut recv, &mut buf, &decoder, 4096).await? {
            Some(Frame::ConsumerOk(ok)) => Ok((send, recv, buf, ok.member_id)),
            Some(Frame::Error(e)) => Err(ClientError::server(e)),
            Some(Frame::Moved(m)) => Err(ClientError::moved(m)),
            Some(other) => Err(ProtocolError::UnexpectedFrame {
                expected: "consumer_ok",
                got: other.name(),
            }
            .into()),
            None => Err(ProtocolError::EndedEarly("consumer_ok").into()),
        }
    };
    let (mut send, mut recv, mut buf, member_id) = tokio::time::timeout(timeout, opened)
        .await
        .map_err(|_| ClientError::Timeout)??;
    let (acks, mut ack_rx) = mpsc::unbounded_channel::<ConsumerAck>();
    let (tx, rx) = mpsc::channel(BUFFER);
    let (closing, mut closed) = oneshot::channel::<()>();
    // The writer: every answer, in order; it ends when every Delivery and the Consumer are
    // gone, or at `Consumer::close` (after the answers already queued), finishing the stream
    // (the broker then redelivers what was not answered). On close it waits until the broker
    // has acknowledged the stream's data, so the answers survive a connection closed next.
    let writer = tokio::spawn(async move {
        let (mut closing, mut heard) = (false, false);
        loop {
            let ack = tokio::select! {
                biased;
                ack = ack_rx.recv() => ack,
                asked = &mut closed, if !heard => {
                    heard = true;
                    // Err: the Consumer was dropped, not closed; held deliveries may still
                    // answer.
                    if asked.is_ok() {
                        closing = true;
                        ack_rx.close(); // queued answers are still received, new ones refused
                    }
                    continue;
                }
            };
            let Some(ack) = ack else { break };
            if send
                .write_all(&Frame::ConsumerAck(ack).to_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
        if send.finish().is_ok() && closing {
            let _ = send.stopped().await;
        }
    });
    // Weak, so dropping the Consumer and its deliveries ends the writer (and the member).
    let reader_acks = acks.downgrade();
    tokio::spawn(async move {
        loop {
            let item = match read_frame(&mut recv, &mut buf, &decoder, 64 * 1024).await {
                Ok(Some(Frame::ConsumerMessage(m))) => {
                    let Some(acks) = reader_acks.upgrade() else {
                        return;
                    };
                    Ok(Delivery {
                        position: m.position,
                        delivery: m.delivery,
                        timestamp_ms: m.timestamp_ms,
                        payload: m.payload,
                        headers: m.headers,
                        acks,
                    })
                }
                Ok(Some(Frame::Error(e))) => Err(ClientError::server(e)),
                Ok(Some(other)) => Err(ProtocolError::UnexpectedFrame {
                    expected: "consumer_message",
                    got: other.name(),
                }
                .into()),
                Ok(None) => return,
                Err(e) => Err(e.into()),
            };
            let end = item.is_err();
            if tx.send(item).await.is_err() || end {
                return;
            }
        }
    });
    Ok(Consumer {
        topic,
        member_id,
        rx,
        _acks: acks,
        closing: Some(closing),
        writer,
    })
}
