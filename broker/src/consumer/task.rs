//! One durable consumer's task: it owns the consumer's [`ConsumerState`], reads the topic's
//! log from the consumer's cursor while the window has room (a fresh reader at the cursor
//! each time, on a blocking thread; every 20 ms when caught up), keeps the payloads of its
//! pending messages, delivers what the state machine says to its members' streams, applies
//! their acks, publishes messages past `max_deliver` to the dead-letter topic (through the
//! topic registry, like a publish, waiting for its ack), and saves the state file after every
//! change that matters for a restart (an ack, a term, a nak, a dead letter), before it handles
//! the next command. Its clock is milliseconds since the task started (deadlines are not kept
//! across restarts: everything pending is delivered again after one).
//!
//! The task reads the log through the view the topic's task hands out
//! ([`Topics::log_view`]), asked for again every second while the consumer has members, so a
//! topic task that retired and reopened its log is followed, and a broker that stops owning
//! the topic ends the members (`Unavailable`). The task stays loaded once created (bounded by
//! `max_consumers_per_topic`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{
    ConsumerMessage, ConsumerStart, ErrorCode, Frame, FrameDecoder, Header, IndexedHeaders, MSG_ID,
    Position, headers_len,
};
use starling_pubsub::consumer::{AckOp, AckOutcome, Action, ConsumerState, Offered};
use starling_storage::LogView;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc, oneshot};
use tokio::time::Instant;

use super::budget::PendingBudget;
use super::store::{self, Settings, Stored};
use super::{JoinError, JoinRequest};
use crate::durable::record;
use crate::metrics::Metrics;
use crate::pubsub::ack::AckToken;
use crate::pubsub::topic::{TopicMsg, Topics};

/// How often a consumer with members and room looks for new records.
const READ_EVERY: Duration = Duration::from_millis(20);
/// How often it asks the topic for its log view again.
const VIEW_EVERY: Duration = Duration::from_secs(1);
/// Most records read in one go.
const READ_RECORDS: usize = 256;

/// What a consumer's task is asked.
pub enum Command {
    /// A member joins, with the settings it asked for.
    Join {
        /// Its id.
        member: u64,
        /// What it asked for.
        settings: Settings,
        /// Where its deliveries go.
        tx: mpsc::UnboundedSender<MemberMsg>,
        /// Whether it joined.
        reply: oneshot::Sender<Result<(), JoinError>>,
    },
    /// A member left (its stream ended).
    Leave(u64),
    /// A member's ack, nak, in-progress or term.
    Ack {
        /// The member.
        member: u64,
        /// The message.
        position: Position,
        /// What it says.
        op: AckOp,
        /// One of the member's answers in flight to the task (`server/consume.rs` bounds
        /// them, so a member sending answers faster than the task applies them is slowed
        /// down rather than queued without limit); released once this one is applied.
        permit: OwnedSemaphorePermit,
    },
}

/// What a member's stream is sent.
#[derive(Debug)]
pub enum MemberMsg {
    /// A delivery.
    Deliver(ConsumerMessage),
    /// The end, with why.
    End(ErrorCode, String),
}

/// Starts the task of consumer `req.consumer`; its command channel.
pub fn start(
    req: &JoinRequest,
    topics: Arc<Topics>,
    metrics: Arc<Metrics>,
    max_members: usize,
    budget: Arc<PendingBudget>,
) -> mpsc::UnboundedSender<Command> {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = Task {
        topic: req.topic.clone(),
        name: req.consumer.clone(),
        start: req.start,
        topics,
        metrics,
        max_members,
        budget,
        settings: None,
        state: None,
        view: None,
        view_at: None,
        path: None,
        payloads: HashMap::new(),
        members: HashMap::new(),
        dirty: false,
        epoch: Instant::now(),
    };
    metrics_loaded(&task.metrics, 1);
    tokio::spawn(task.run(rx));
    tx
}

fn metrics_loaded(m: &Metrics, by: i64) {
    m.consumers.add(by);
}

type Key = (u64, u64);

/// A pending message as read from the log.
#[derive(Debug, Clone)]
struct Held {
    payload: Bytes,
    timestamp_ms: u64,
    headers: Vec<Header>,
}

impl Held {
    /// What it is charged to the pending budget: its payload and its headers' encoded bytes,
    /// plus the fixed overhead.
    fn cost(&self) -> u64 {
        let headers = if self.headers.is_empty() {
            0
        } else {
            headers_len(&self.headers)
        };
        PendingBudget::cost(self.payload.len().saturating_add(headers))
    }
}

struct Task {
    topic: String,
    name: String,
    start: ConsumerStart,
    topics: Arc<Topics>,
    metrics: Arc<Metrics>,
    max_members: usize,
    /// What the pending payloads are charged to (`consumer_pending_max_bytes`).
    budget: Arc<PendingBudget>,
    settings: Option<Settings>,
    state: Option<ConsumerState>,
    view: Option<LogView>,
    view_at: Option<Instant>,
    path: Option<PathBuf>,
    /// Pending messages as read from the log (each payload its own copy, charged to
    /// `budget` with its headers).
    payloads: HashMap<Key, Held>,
    members: HashMap<u64, mpsc::UnboundedSender<MemberMsg>>,
    /// The state changed in a way a restart must see.
    dirty: bool,
    epoch: Instant,
}

impl Task {
    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        loop {
            if !self.members.is_empty() {
                self.refresh_view().await;
                self.read().await;
            }
            self.act().await;
            if self.dirty {
                self.persist().await;
            }
            self.show();
            let now = self.now_ms();
            let mut wait = self
                .state
                .as_ref()
                .and_then(|s| s.next_wake(now))
                .map(|t| Duration::from_millis(t.saturating_sub(now)));
            if !self.members.is_empty() && self.state.as_ref().is_some_and(|s| s.has_room()) {
                wait = Some(wait.map_or(READ_EVERY, |w| w.min(READ_EVERY)));
            }
            let sleep = async {
                match wait {
                    Some(w) => tokio::time::sleep(w).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                cmd = rx.recv() => match cmd {
                    Some(cmd) => {
                        self.on(cmd).await;
                        while let Ok(cmd) = rx.try_recv() {
                            self.on(cmd).await;
                        }
                    }
                    None => break,
                },
                () = sleep => {}
            }
        }
        metrics_loaded(&self.metrics, -1);
        let held: u64 = self.payloads.values().map(Held::cost).sum();
        self.budget.release(held);
    }

    /// Drops a resolved message, giving its bytes back to the budget.
    fn forget(&mut self, key: &Key) -> Option<Held> {
        let held = self.payloads.remove(key)?;
        self.budget.release(held.cost());
        Some(held)
    }

    async fn on(&mut self, cmd: Command) {
        let now = self.now_ms();
        match cmd {
            Command::Join {
                member,
                settings,
                tx,
                reply,
            } => {
                let joined = self.join(member, settings, tx).await;
                let _ = reply.send(joined);
            }
            Command::Leave(member) => {
                if self.members.remove(&member).is_some() {
                    self.metrics.consumer_members.dec();
                }
                if let Some(s) = &mut self.state {
                    s.leave(member, now);
                }
            }
            Command::Ack {
                member,
                position,
                op,
                permit,
            } => {
                drop(permit);
                let Some(s) = &mut self.state else {
                    return;
                };
                let outcome = s.ack(member, position, op, now);
                match outcome {
                    AckOutcome::Acked | AckOutcome::Termed => {
                        self.metrics
                            .consumer_acks
                            .with_label_values(&[if outcome == AckOutcome::Acked {
                                "ack"
                            } else {
                                "term"
                            }])
                            .inc();
                        self.forget(&(position.stream, position.seq));
                        self.dirty = true;
                    }
                    AckOutcome::Nakked => {
                        self.metrics.consumer_acks.with_label_values(&["nak"]).inc();
                        self.dirty = true;
                    }
                    AckOutcome::Extended => {
                        self.metrics
                            .consumer_acks
                            .with_label_values(&["in_progress"])
                            .inc();
                    }
                    AckOutcome::Unknown | AckOutcome::NotHolder => {
                        self.metrics
                            .consumer_acks
                            .with_label_values(&["ignored"])
                            .inc();
                    }
                }
            }
        }
    }

    async fn join(
        &mut self,
        member: u64,
        settings: Settings,
        tx: mpsc::UnboundedSender<MemberMsg>,
    ) -> Result<(), JoinError> {
        if self.state.is_none() {
            self.load(&settings).await?;
        }
        if let Some(existing) = &self.settings
            && *existing != settings
        {
            return Err(JoinError::Mismatch {
                consumer: self.name.clone(),
                existing: format!(
                    "ack_wait_ms {}, max_deliver {}, max_ack_pending {}, backoff_ms {:?}, dead_letter {:?}",
                    existing.policy.ack_wait_ms,
                    existing.policy.max_deliver,
                    existing.policy.max_ack_pending,
                    existing.policy.backoff_ms,
                    existing.dead_letter
                ),
            });
        }
        if self.members.len() >= self.max_members {
            return Err(JoinError::TooManyMembers {
                consumer: self.name.clone(),
                max: self.max_members,
            });
        }
        self.members.insert(member, tx);
        self.metrics.consumer_members.inc();
        if let Some(s) = &mut self.state {
            s.join(member);
        }
        Ok(())
    }

    /// Loads the consumer: from its state file if the topic's log holds one, else new with
    /// `settings`, at its start.
    async fn load(&mut self, settings: &Settings) -> Result<(), JoinError> {
        let unavailable = |why: String| JoinError::Unavailable {
            consumer: self.name.clone(),
            why,
        };
        let (view, owns) = self.topics.log_view(&self.topic).await;
        if !owns {
            return Err(unavailable("this broker does not own the topic".into()));
        }
        self.view_at = Some(Instant::now());
        let Some(view) = view else {
            // No log yet: nothing to read, and every start is the beginning.
            self.settings = Some(settings.clone());
            self.state = Some(ConsumerState::new(
                settings.policy.clone(),
                Position { stream: 0, seq: 0 },
            ));
            return Ok(());
        };
        let path = store::path(view.dir(), &self.name);
        let start = self.start;
        let (loaded, view) = {
            let path = path.clone();
            tokio::task::spawn_blocking(move || {
                let loaded = store::load(&path).map(|stored| {
                    stored
                        .map(Ok)
                        .unwrap_or_else(|| Err(start_position(&view, start)))
                });
                (loaded, view)
            })
            .await
            .map_err(|e| unavailable(e.to_string()))?
        };
        match loaded {
            Ok(Ok(stored)) => {
                tracing::info!(topic = %self.topic, consumer = %self.name, floor = ?stored.snapshot.floor, "consumer state loaded");
                self.state = Some(ConsumerState::restore(
                    stored.settings.policy.clone(),
                    stored.snapshot,
                ));
                self.settings = Some(stored.settings);
            }
            Ok(Err(start)) => {
                self.settings = Some(settings.clone());
                self.state = Some(ConsumerState::new(settings.policy.clone(), start));
                self.dirty = true;
            }
            Err(e) => {
                self.metrics.consumer_state_errors.inc();
                return Err(unavailable(e.to_string()));
            }
        }
        self.path = Some(path);
        self.view = Some(view);
        Ok(())
    }

    /// Asks the topic for its log view again when due; ends the members if this broker no
    /// longer owns the topic.
    async fn refresh_view(&mut self) {
        if self.view_at.is_some_and(|at| at.elapsed() < VIEW_EVERY) {
            return;
        }
        self.view_at = Some(Instant::now());
        let (view, owns) = self.topics.log_view(&self.topic).await;
        if !owns {
            let now = self.now_ms();
            for (id, tx) in self.members.drain() {
                let _ = tx.send(MemberMsg::End(
                    ErrorCode::Unavailable,
                    format!(
                        "this broker no longer owns `{}`: open the consumer again",
                        self.topic
                    ),
                ));
                if let Some(s) = &mut self.state {
                    s.leave(id, now);
                }
                self.metrics.consumer_members.dec();
            }
            return;
        }
        if let Some(view) = view {
            if self.path.is_none() {
                self.path = Some(store::path(view.dir(), &self.name));
                self.dirty = true;
            }
            self.view = Some(view);
        }
    }

    /// Reads what the window has room for from the cursor on.
    async fn read(&mut self) {
        let (Some(view), Some(state)) = (self.view.clone(), self.state.as_ref()) else {
            return;
        };
        if !state.has_room() {
            return;
        }
        let from = state.cursor();
        let read = tokio::task::spawn_blocking(move || {
            let mut reader = view.read_from(from);
            let mut out = Vec::new();
            let mut failed = None;
            while out.len() < READ_RECORDS {
                match reader.next() {
                    Some(Ok(rec)) => out.push(rec),
                    Some(Err(e)) => {
                        failed = Some(e);
                        break;
                    }
                    None => break,
                }
            }
            (out, failed)
        })
        .await;
        let Ok((records, failed)) = read else {
            return;
        };
        if let Some(e) = failed {
            self.metrics.consumer_state_errors.inc();
            tracing::warn!(topic = %self.topic, consumer = %self.name, error = %e, "consumer: reading the durable log failed");
        }
        let now = self.now_ms();
        let Some(state) = &mut self.state else {
            return;
        };
        let decoder = FrameDecoder::new(u32::MAX);
        'records: for rec in records {
            // A record is the batch's headers frame, if any, then the batch (`durable::record`).
            let parts = record::split(&rec.payload);
            let mut headers: Vec<IndexedHeaders> = match parts.headers {
                None => Vec::new(),
                Some(h) => match decoder.decode(&mut BytesMut::from(&h[..])) {
                    Ok(Some(Frame::EventHeaders(h))) => h.entries,
                    other => {
                        // The messages go on without their headers.
                        self.metrics.consumer_state_errors.inc();
                        tracing::warn!(topic = %self.topic, consumer = %self.name, position = ?rec.position, ?other, "consumer: a log record's headers do not decode; delivered without them");
                        Vec::new()
                    }
                },
            };
            let mut buf = BytesMut::from(&parts.batch[..]);
            let batch = match decoder.decode(&mut buf) {
                Ok(Some(Frame::EventBatch(b))) => b,
                other => {
                    self.metrics.consumer_state_errors.inc();
                    tracing::warn!(topic = %self.topic, consumer = %self.name, position = ?rec.position, ?other, "consumer: a log record is not an event batch; skipped");
                    continue;
                }
            };
            // Indexes strictly increase (the decoder checks): taken in order, each once.
            headers.reverse();
            for (i, payload) in batch.events.into_iter().enumerate() {
                let own_headers = match headers.last() {
                    Some(h) if h.index as usize == i => {
                        headers.pop().map(|h| h.headers).unwrap_or_default()
                    }
                    _ => Vec::new(),
                };
                let p = Position {
                    stream: batch.stream,
                    seq: batch.first_seq.saturating_add(i as u64),
                };
                let cursor = state.cursor();
                if (p.stream, p.seq) < (cursor.stream, cursor.seq) {
                    continue;
                }
                let held = Held {
                    // Its own copy: a slice would keep the whole record in memory.
                    payload: Bytes::copy_from_slice(&payload),
                    timestamp_ms: rec.timestamp_ms,
                    headers: own_headers,
                };
                // Charged before it is offered: a message that does not fit stays unread (the
                // cursor does not pass it) until acks free room.
                let cost = held.cost();
                if !self.budget.try_charge(cost) {
                    break 'records;
                }
                match state.offer(p, now) {
                    Ok(Offered::Pending) => {
                        if let Some(old) = self.payloads.insert((p.stream, p.seq), held) {
                            self.budget.release(old.cost());
                        }
                    }
                    Ok(Offered::Resolved) => self.budget.release(cost),
                    Err(_) => {
                        self.budget.release(cost);
                        break 'records;
                    }
                }
            }
        }
    }

    /// Delivers and dead-letters what is due.
    async fn act(&mut self) {
        let now = self.now_ms();
        let Some(state) = &mut self.state else {
            return;
        };
        let actions = state.poll(now);
        for action in actions {
            match action {
                Action::Deliver {
                    position,
                    member,
                    delivery,
                } => {
                    let key = (position.stream, position.seq);
                    let Some(held) = self.payloads.get(&key) else {
                        continue;
                    };
                    self.metrics.consumer_deliveries.inc();
                    if delivery > 1 {
                        self.metrics.consumer_redeliveries.inc();
                    }
                    let msg = MemberMsg::Deliver(ConsumerMessage {
                        position,
                        delivery,
                        timestamp_ms: held.timestamp_ms,
                        payload: held.payload.clone(),
                        headers: held.headers.clone(),
                    });
                    let sent = self
                        .members
                        .get(&member)
                        .is_some_and(|tx| tx.send(msg).is_ok());
                    if !sent && let Some(s) = &mut self.state {
                        // Gone before its Leave arrived: ready again at once.
                        s.leave(member, now);
                    }
                }
                Action::DeadLetter {
                    position,
                    deliveries,
                } => {
                    let key = (position.stream, position.seq);
                    let held = self.forget(&key);
                    self.metrics.consumer_dead_lettered.inc();
                    self.dirty = true;
                    let dead_letter = self.settings.as_ref().and_then(|s| s.dead_letter.clone());
                    if let (Some(dl), Some(held)) = (dead_letter, held) {
                        if let Err(why) = self.dead_letter(&dl, held).await {
                            self.metrics.consumer_dead_letter_failures.inc();
                            tracing::error!(topic = %self.topic, consumer = %self.name, ?position, deliveries, dead_letter = %dl, %why, "consumer: publishing to the dead-letter topic failed; the message is dropped");
                        }
                    } else {
                        tracing::warn!(topic = %self.topic, consumer = %self.name, ?position, deliveries, "consumer: message past max_deliver, no dead-letter topic: dropped");
                    }
                }
            }
        }
    }

    /// Publishes the message to the dead-letter topic, waiting for its ack (`persisted` on a
    /// durable topic); tried three times. Its headers go with it, but for its message id:
    /// the dead-letter topic's own de-duplication must not take it for a repeat of a message
    /// another consumer dead-lettered.
    async fn dead_letter(&self, topic: &str, held: Held) -> Result<(), String> {
        let kept: Vec<Header> = held
            .headers
            .into_iter()
            .filter(|h| h.name != MSG_ID)
            .collect();
        let headers = if kept.is_empty() {
            Vec::new()
        } else {
            vec![IndexedHeaders {
                index: 0,
                headers: kept,
            }]
        };
        let payload = held.payload;
        let mut why = String::new();
        for attempt in 0..3 {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            if let Err(limit) = self.topics.reserve(topic) {
                why = limit.to_string();
                continue;
            }
            let (tx, mut rx) = mpsc::unbounded_channel();
            let Ok(permit) = Arc::new(Semaphore::new(1)).try_acquire_owned() else {
                return Err("no ack permit".into());
            };
            let mut token = AckToken::new(0, 1, tx, permit);
            token.persisted = self.topics.is_durable(topic);
            let msg = TopicMsg {
                payloads: vec![payload.clone()],
                headers: headers.clone(),
                ack: Some(token),
                origin: None,
                hold: None,
            };
            self.topics.publish(topic, msg).await;
            match rx.recv().await {
                Some((Frame::PublishAck(_), _)) => return Ok(()),
                Some((Frame::Error(e), _)) => why = format!("{}: {}", e.code.name(), e.message),
                Some(_) | None => why = "no ack".into(),
            }
        }
        Err(why)
    }

    /// Saves the state file (when the log exists, so its directory does).
    async fn persist(&mut self) {
        let (Some(path), Some(settings), Some(state)) = (
            self.path.clone(),
            self.settings.clone(),
            self.state.as_ref(),
        ) else {
            return;
        };
        let stored = Stored {
            settings,
            snapshot: state.snapshot(),
        };
        match tokio::task::spawn_blocking(move || store::save(&path, &stored)).await {
            Ok(Ok(())) => self.dirty = false,
            Ok(Err(e)) => {
                self.metrics.consumer_state_errors.inc();
                tracing::error!(topic = %self.topic, consumer = %self.name, error = %e, "consumer: saving the state failed; retried at the next change");
            }
            Err(e) => {
                self.metrics.consumer_state_errors.inc();
                tracing::error!(topic = %self.topic, consumer = %self.name, error = %e, "consumer: the save task failed");
            }
        }
    }

    /// Updates the consumer's gauges.
    fn show(&self) {
        let Some(state) = &self.state else {
            return;
        };
        let labels = [self.topic.as_str(), self.name.as_str()];
        let pending = state.pending() as i64;
        self.metrics
            .consumer_pending
            .with_label_values(&labels)
            .set(pending);
        // Unread: what the log holds past the cursor, when both are in the same stream (a
        // later stream's count is not known without reading it; then only the pending).
        let cursor = state.cursor();
        let unread = self
            .view
            .as_ref()
            .and_then(|v| v.next_position())
            .filter(|n| n.stream == cursor.stream)
            .map_or(0, |n| n.seq.saturating_sub(cursor.seq)) as i64;
        self.metrics
            .consumer_lag
            .with_label_values(&labels)
            .set(pending + unread);
    }
}

/// Where a new consumer starts in `view`'s log. Blocking file I/O (a time lookup).
fn start_position(view: &LogView, start: ConsumerStart) -> Position {
    let beginning = Position { stream: 0, seq: 0 };
    match start {
        ConsumerStart::First => beginning,
        ConsumerStart::Last => match view.next_position() {
            Some(n) if n.seq > 0 => Position {
                stream: n.stream,
                seq: n.seq - 1,
            },
            Some(n) => n,
            None => beginning,
        },
        ConsumerStart::Position(p) => p,
        ConsumerStart::TimeMs(t) => match view.position_at_time(t) {
            Ok(Some(p)) => p,
            Ok(None) => view.next_position().unwrap_or(beginning),
            Err(_) => beginning,
        },
    }
}
