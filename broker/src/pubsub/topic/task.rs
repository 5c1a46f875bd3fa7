//! One topic's task: it owns the topic's open batch, its stream position, its retained tail and
//! its subscriber list. It batches local messages (count, bytes, delay), numbers each batch in
//! its current stream, encodes it once, offers the shared frame to every subscriber queue,
//! hands ready subscribers to their writer lanes, retains the frame for resuming subscribers,
//! and completes the batch's commit acks. A durable topic's task also appends each sealed
//! local batch to its log first, hands `persisted` acks to the log and replays from the log
//! a resume position the retained tail no longer holds; at a relay (a non-owner) such a
//! subscriber is held back and fed by its catch-up from the owner ([`Control::CatchUp`])
//! until the tail reaches back to it. A subscription from a time is turned
//! into the position of the first batch stamped at or after it (through the log's time index
//! on a durable topic, else the retained tail's times) and then served like that resume
//! position. Relayed events keep the owner's positions and skip
//! the batcher. Wildcard subscribers whose pattern matches the topic ([`Control::Wildcard`],
//! given by the registry) get each live batch after the topic's `BatchTopic` frame, encoded
//! once per task. A subscriber with a queue group (`Subscriber::group`, plain or wildcard)
//! joins that group of the topic instead: each batch goes to one member of each group
//! (`starling_pubsub::group`), plain subscribers and groups alike get every batch once.
//! Wildcard subscribers and groups are served only at the topic's owner (in a cluster the
//! other members' feeds bring them the topic from its owner, `cluster::fan_in`).
//! A task with no subscribers and no traffic (wildcard subscribers do not count)
//! asks its registry to retire it ([`Retire`]), the one way back to the registry, so the two
//! stay one-way.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{
    BatchTopic, ErrorCode, EventHeaders, Frame, IndexedHeaders, Member, Position, SeenStreams,
    StartAt, encode_event_batch, event_batch_encoded_len, msg_id,
};
use starling_storage::{LogView, now_ms};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::dedup::{Mode, Refusal, TopicDedup};
use super::hand_off::HandOff;
use super::{Attach, TopicMsg, TopicSettings};
use crate::durable::DurableLog;
use crate::durable::replicated::topic::{STREAM, seq_of, split_seq};
use crate::durable::replicated::{OpenError, Proposal, ProposeError, ReplicaEvent, ReplicatedLog};
use crate::durable::{record, transfer};
use crate::pubsub::ack::AckToken;
use crate::pubsub::batcher::{Batch, Batcher};
use crate::pubsub::counters::Counters;
use crate::pubsub::group::Group;
use crate::pubsub::lanes::Lanes;
use crate::pubsub::retained::{Retained, coalesce};
use crate::pubsub::subscriber::Frames;
use crate::pubsub::subscriber::{Outcome, Queued, Subscriber};
use crate::pubsub::timer;

/// Requests to a topic task besides messages.
pub enum Control {
    /// Add a subscriber, first replaying what the topic holds from where it starts (a resume
    /// position, or a time). At a broker that does not own the topic, a resume position its
    /// retained tail does not reach back to holds the subscriber back instead and sends that
    /// position on `behind`: a catch-up from the owner feeds it ([`Control::CatchUp`]) until
    /// it can join. Dropped unsent when the subscriber joined at once; without it the
    /// retained tail alone serves the subscriber.
    Subscribe {
        /// The subscriber.
        sub: Arc<Subscriber>,
        /// Where it starts.
        start: StartAt,
        /// Where its catch-up starts, when it needs one (`None`: no catch-up can be made).
        behind: Option<oneshot::Sender<Position>>,
    },
    /// Events of the owner from `origin` on, for held-back subscriber `id` alone (its
    /// catch-up); with none, the catch-up gave up and the subscriber joins from where it
    /// stands with what the retained tail holds. Answered with what became of it.
    CatchUp {
        /// The held-back subscriber.
        id: u64,
        /// The owner's position of the first payload (the others follow consecutively).
        origin: Position,
        /// The events, in order.
        payloads: Vec<Bytes>,
        /// What became of the subscriber.
        reply: oneshot::Sender<CaughtUp>,
    },
    /// Add a wildcard subscriber whose pattern matches this topic: live batches only, each
    /// after the topic's `BatchTopic` frame (to one member of its group, when it has one). It does not keep the topic from retiring (the
    /// registry adds it again to the topic's next task). Ignored when already added.
    Wildcard(Arc<Subscriber>),
    /// Remove subscriber `id` (a wildcard one too).
    Unsubscribe(u64),
    /// Seal the open batch and fan it out; answered when done.
    Flush(oneshot::Sender<()>),
    /// A durable topic's log as it is here, for another member taking the topic over: opened
    /// if the broker holds one on disk (`None` when it holds none), and whether this broker
    /// owns the topic in its own view (answered in the task, so no batch is numbered here
    /// after it said it does not).
    LogView(oneshot::Sender<(Option<LogView>, bool)>),
    /// Member `from` holds a log of this durable topic and no longer owns it: as the owner,
    /// copy what this log lacks from there (and the other members) and answer how many
    /// records were copied.
    Claim(Member, oneshot::Sender<Result<u64, String>>),
}

/// What a held-back subscriber's catch-up run led to ([`Control::CatchUp`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaughtUp {
    /// Queued to it; it is still held back: send the next run.
    Behind,
    /// It joined the topic's subscribers (the retained tail reaches back to where it
    /// stands): the catch-up ends.
    Joined,
    /// It is gone (ended, or unknown to the topic): the catch-up ends.
    Gone,
}

/// How a registry reaches one topic's task.
#[derive(Clone)]
pub struct TopicHandle {
    /// The task's bounded message channel.
    pub data: mpsc::Sender<TopicMsg>,
    /// The task's control channel.
    pub control: mpsc::UnboundedSender<Control>,
    /// One past the last event delivered, in the newest stream delivered.
    pub reached: Reached,
}

/// One past the last event a topic delivered, in the newest stream it delivered.
pub type Reached = Arc<parking_lot::Mutex<Option<Position>>>;

/// What a topic task asks of the registry that started it.
pub trait Retire: Send + Sync {
    /// Removes the idle topic `name` from the registry, unless a message or a subscription can
    /// still reach its task (see `Topics`); true when removed, and the task then ends.
    fn retire(
        &self,
        name: &str,
        data: &mpsc::Receiver<TopicMsg>,
        control: &mpsc::UnboundedReceiver<Control>,
    ) -> bool;
}

/// What every topic task shares: the settings, the counters and the writer lanes.
pub struct Shared {
    /// Settings every topic task shares.
    pub settings: TopicSettings,
    /// The engine's counts (the lanes' own).
    pub counters: Arc<Counters>,
    /// Writer lanes.
    pub lanes: Arc<Lanes>,
}

impl Shared {
    /// Records a change of a topic's retained bytes in [`Counters::retained_bytes`], the one
    /// count of what all topics retain together (the broker-wide cap is checked against it).
    fn retained_changed(&self, change: isize) {
        self.counters.retained_changed(change);
    }

    /// Records bytes a topic's retained tail let go.
    pub fn retained_freed(&self, freed: usize) {
        self.retained_changed(-(freed as isize));
    }

    /// Whether the topics together retain more than the broker-wide cap.
    fn retained_over_cap(&self) -> bool {
        self.counters.retained_bytes.load(Ordering::Acquire)
            > self.settings.replay_max_total_bytes as u64
    }
}

/// Largest queue item a replay is joined into.
const REPLAY_CHUNK_BYTES: usize = 256 * 1024;

/// Starts the task of topic `name` and returns its handle; `registry` is asked to retire it.
pub fn start(name: Arc<str>, shared: &Arc<Shared>, registry: Weak<dyn Retire>) -> TopicHandle {
    let (data_tx, data_rx) = mpsc::channel(shared.settings.queue_depth.max(1));
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let reached: Reached = Arc::new(parking_lot::Mutex::new(None));
    let handle = TopicHandle {
        data: data_tx,
        control: control_tx,
        reached: Arc::clone(&reached),
    };
    let settings = &shared.settings;
    let mut epoch = settings.epoch.clone();
    epoch.mark_unchanged();
    let mut membership = settings.epoch.clone();
    membership.mark_unchanged();
    // What the topics document decides for the topic now holds while this task runs
    // (`durable::policy`): whether it is durable, and whether its log is replicated.
    let pinned = settings.durability.policies().pin(&name);
    let replicated =
        settings.replication.is_replicated(&name) && settings.durability.is_durable(&name);
    let (settle_tx, settle_rx) = mpsc::unbounded_channel();
    let task = TopicTask {
        name,
        pinned: pinned.task,
        data: data_rx,
        control: control_rx,
        batcher: Batcher::new(settings.limits),
        subscribers: Vec::new(),
        wildcards: Vec::new(),
        groups: Vec::new(),
        tag: None,
        behind: Vec::new(),
        stream: new_stream_id(),
        next_seq: 0,
        epoch,
        membership: replicated.then_some(membership),
        documents: replicated.then(|| settings.durability.policies().changes()),
        retained: Retained::new(
            settings.replay_window,
            settings
                .replay_max_bytes
                .min(settings.replay_max_total_bytes),
        ),
        relayed: SeenStreams::default(),
        relay_pending: VecDeque::new(),
        durable: Durable::No,
        committed_next: 0,
        committed_term: 0,
        settle_tx,
        settle_rx,
        hand_off: HandOff::Complete,
        read_in_epoch: (0, Vec::new()),
        reached,
        // A replicated topic's window follows its committed log (`dedup`, the module doc).
        dedup: TopicDedup::new(
            settings.dedup,
            if replicated {
                Mode::Replicated
            } else {
                Mode::Local
            },
            settings.dedup_max_total_bytes,
            Arc::clone(&shared.counters),
        ),
        registry,
        shared: Arc::clone(shared),
    };
    tokio::spawn(task.run());
    handle
}

struct TopicTask {
    name: Arc<str>,
    /// The task id under which this task pinned the topic's durability (`durable::policy`).
    pinned: u64,
    data: mpsc::Receiver<TopicMsg>,
    control: mpsc::UnboundedReceiver<Control>,
    batcher: Batcher<Attach>,
    subscribers: Vec<Arc<Subscriber>>,
    /// Wildcard subscribers whose pattern matches this topic ([`Control::Wildcard`]).
    wildcards: Vec<Arc<Subscriber>>,
    /// The queue groups of this topic (of its name, and of patterns matching it), each with
    /// at least one member.
    groups: Vec<Group>,
    /// This topic's `BatchTopic` frame, encoded once, when it first has a wildcard subscriber.
    tag: Option<Bytes>,
    /// Subscribers held back from the fan-out while a catch-up from the owner feeds them,
    /// each with one past the last event queued to it (see [`Control::CatchUp`]).
    behind: Vec<(Arc<Subscriber>, Position)>,
    /// The stream this task numbers its own publishes in.
    stream: u64,
    /// The next sequence number in `stream`.
    next_seq: u64,
    epoch: watch::Receiver<u64>,
    /// A replicated topic's own view of the membership changes (apart from `epoch`, which
    /// the publish path reads): at each one a task without its replica open tries to open
    /// it (this broker may have joined the topic's replica set). `None` for other topics.
    membership: Option<watch::Receiver<u64>>,
    /// A replicated topic's view of the topics document's changes: at each one a task
    /// without its replica open tries again too (the document may have put this broker in
    /// the topic's replica set, a 3 → 5 move, or reached it after the leader's). `None` for
    /// other topics.
    documents: Option<watch::Receiver<u64>>,
    retained: Retained,
    /// How far each of the owner's streams has been relayed here.
    relayed: SeenStreams,
    /// Relayed runs waiting behind the sealed local batches.
    relay_pending: VecDeque<(Position, Vec<Bytes>, Vec<IndexedHeaders>)>,
    durable: Durable,
    /// A replicated topic's next Raft index to deliver live (what came before is read back
    /// from the committed log for resuming subscribers).
    committed_next: u64,
    /// The term of the last committed entry delivered live (a replicated topic's): a leader
    /// takes message ids once it reached its own term (see `dedup_unready`).
    committed_term: u64,
    /// The outcomes of a replicated topic's proposals whose messages carried ids, sent by
    /// their `done` (one per such proposal: as many at most as the proposer queues and has
    /// in flight, drained by this task's loop, which is what proposes more).
    settle_tx: mpsc::UnboundedSender<Settled>,
    settle_rx: mpsc::UnboundedReceiver<Settled>,
    /// A single-copy durable topic's hand-off to this owner: whether its last catch-up read
    /// the member it must read, the topic's former owner or a claimant ([`HandOff`]); until
    /// one does, publishes are refused.
    hand_off: HandOff,
    /// The membership epoch, and the members whose logs a catch-up read to their end since
    /// it began.
    read_in_epoch: (u64, Vec<String>),
    reached: Reached,
    /// Publish de-duplication: the window of message ids and the repeats' waiting acks.
    dedup: TopicDedup,
    registry: Weak<dyn Retire>,
    shared: Arc<Shared>,
}

/// The outcome of a replicated topic's proposal whose new messages carried message ids.
struct Settled {
    ids: Vec<String>,
    committed: bool,
}

/// A topic's durable log, if it is durable.
enum Durable {
    /// Not a durable topic.
    No,
    /// Its open log.
    Open(Box<DurableLog<AckToken>>),
    /// Durable, but its log failed to open or to append: local publishes are refused.
    Failed(String),
    /// A replicated topic's replica, open here.
    Replicated(Box<ReplicatedLog>),
    /// A replicated topic that cannot run yet (fewer members than `durable_replicas`):
    /// publishes are refused with `Unavailable`; opening is tried again at the next
    /// membership change.
    Unready(String),
}

/// The next event of a replicated topic's replica (never, for any other topic).
async fn next_committed(durable: &mut Durable) -> Option<ReplicaEvent> {
    match durable {
        Durable::Replicated(log) => match log.next_event().await {
            Some(c) => Some(c),
            None => std::future::pending().await,
        },
        _ => std::future::pending().await,
    }
}

/// The next change of `membership` (never, without one).
async fn changed(
    membership: &mut Option<watch::Receiver<u64>>,
) -> Result<(), watch::error::RecvError> {
    match membership {
        Some(m) => m.changed().await,
        None => std::future::pending().await,
    }
}

/// Largest run of log records read back per item queued to a resuming subscriber.
const DISK_REPLAY_CHUNK_BYTES: usize = 256 * 1024;

/// A fresh stream id, ordered by when the stream started: the wall-clock milliseconds in the
/// high bits and 20 random bits below, so ids drawn by different brokers and restarts do not
/// meet, and a later stream has a larger id (to the brokers' clock agreement). Never below the
/// last id this process drew.
fn new_stream_id() -> u64 {
    static LAST: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let millis = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| {
            u64::try_from(d.as_millis()).unwrap_or(u64::MAX >> 20)
        });
    let drawn = (millis << 20) | (rand::random::<u64>() & 0xF_FFFF);
    // Store the id handed out, not the one drawn: when `drawn` is not above the last id, the
    // answer is last + 1, and the next caller must see that (else two callers in one
    // millisecond could both get last + 1).
    let mut last = LAST.load(std::sync::atomic::Ordering::Relaxed);
    loop {
        let id = drawn.max(last.saturating_add(1)).max(1);
        match LAST.compare_exchange_weak(
            last,
            id,
            std::sync::atomic::Ordering::Relaxed,
            std::sync::atomic::Ordering::Relaxed,
        ) {
            Ok(_) => return id,
            Err(now) => last = now,
        }
    }
}

/// How long a reply inbox topic (`_INBOX.…`) with no subscriber of its own and no traffic
/// lives before it is retired (other topics: `TopicSettings::idle_retire`).
const INBOX_IDLE_RETIRE: Duration = Duration::from_secs(1);

impl TopicTask {
    async fn run(mut self) {
        self.open_durable(None).await;
        // A reply inbox topic carries one reply per request: retired soon after, so requests
        // do not fill `max_topics` with idle inboxes.
        let idle = if starling_proto::request::is_inbox(&self.name) {
            INBOX_IDLE_RETIRE.min(self.shared.settings.idle_retire)
        } else {
            self.shared.settings.idle_retire
        };
        let mut last_activity = Instant::now();
        // Expires the retained tail of a topic gone quiet (publishes evict as they push). Armed
        // for the oldest retained batch and re-armed after it fires, so it costs a timer reset
        // per expiry, not one per message.
        let expiry = tokio::time::sleep(Duration::ZERO);
        tokio::pin!(expiry);
        let mut expiry_armed = false;
        loop {
            if !expiry_armed && let Some(at) = self.retained.next_expiry() {
                expiry.as_mut().reset(at);
                expiry_armed = true;
            }
            let deadline = self.batcher.deadline();
            // A replica stays open (its peers count on it) for as long as the broker runs.
            let idle_at = (self.subscribers.is_empty()
                && self.behind.is_empty()
                && self.groups.iter().all(|g| g.wildcard)
                && self.batcher.is_empty()
                && !matches!(self.durable, Durable::Replicated(_)))
            .then(|| {
                // A topic holding message ids lives until they expire, so its window is not
                // cut short by going quiet.
                let quiet = last_activity + idle;
                self.dedup.next_expiry().map_or(quiet, |at| at.max(quiet))
            });
            tokio::select! {
                biased;
                ctl = self.control.recv() => match ctl {
                    Some(ctl) => self.on_control(ctl).await,
                    None => break,
                },
                _ = maybe_sleep(deadline) => self.batcher.poll_deadline(Instant::now()),
                _ = maybe_sleep(self.hand_off.retry_at()) => self.retry_hand_off().await,
                event = next_committed(&mut self.durable) => match event {
                    Some(ReplicaEvent::Committed(entry)) => self.deliver_committed(entry).await,
                    Some(ReplicaEvent::Removed) => self.leave_replica().await,
                    None => {}
                },
                Some(settled) = self.settle_rx.recv() => {
                    self.dedup.settled(&settled.ids, settled.committed);
                }
                changed = changed(&mut self.membership), if self.membership.is_some()
                    && !matches!(self.durable, Durable::Replicated(_)) =>
                {
                    match changed {
                        Ok(()) => self.open_replica().await,
                        Err(_) => self.membership = None,
                    }
                }
                changed = changed(&mut self.documents), if self.documents.is_some()
                    && !matches!(self.durable, Durable::Replicated(_)) =>
                {
                    match changed {
                        Ok(()) => self.open_replica().await,
                        Err(_) => self.documents = None,
                    }
                }
                msg = self.data.recv() => match msg {
                    Some(msg) => {
                        last_activity = Instant::now();
                        self.accept(msg, last_activity);
                        // Take whatever else is already queued before flushing, but let a
                        // pending (un)subscribe go first: it was sent before later messages.
                        while self.control.is_empty() {
                            let Ok(more) = self.data.try_recv() else { break };
                            self.accept(more, last_activity);
                            if self.drain_ready_pending() { break; }
                        }
                    }
                    None => break,
                },
                _ = &mut expiry, if expiry_armed => {
                    expiry_armed = false;
                    let freed = self.retained.evict(Instant::now());
                    self.shared.retained_freed(freed);
                }
                _ = maybe_sleep(idle_at) => {
                    self.dedup.expire(Instant::now());
                    if self.dedup.next_expiry().is_none()
                        && let Some(registry) = self.registry.upgrade()
                        && registry.retire(&self.name, &self.data, &self.control)
                    {
                        break;
                    }
                    last_activity = Instant::now();
                }
            }
            self.deliver_ready().await;
        }
        // Retired (or the broker is shutting down): anything still queued is flushed first.
        self.batcher.flush();
        self.deliver_ready().await;
        let freed = self.retained.clear();
        self.shared.retained_freed(freed);
        if let Durable::Replicated(log) = std::mem::replace(&mut self.durable, Durable::No) {
            log.close().await;
        }
        self.shared
            .settings
            .durability
            .policies()
            .unpin(&self.name, self.pinned);
    }

    /// Whether this topic is a replicated durable topic (a replica count above 1 in a
    /// cluster, as this task pinned it at its start).
    fn is_replicated(&self) -> bool {
        self.shared.settings.replication.is_replicated(&self.name)
            && self.shared.settings.durability.is_durable(&self.name)
    }

    /// Opens this broker's replica of the replicated topic, if it is one of its replicas (else
    /// the task is a relay, like a non-owner's).
    async fn open_replica(&mut self) {
        let replication = Arc::clone(&self.shared.settings.replication);
        self.durable = match replication.open(&self.name).await {
            Ok(log) => {
                self.committed_next = log.live_from();
                Durable::Replicated(Box::new(log))
            }
            Err(OpenError::NotAReplica) => Durable::No,
            Err(e @ OpenError::TooFewMembers { .. }) => {
                tracing::warn!(topic = %self.name, error = %e, "replicated topic: not open");
                Durable::Unready(e.to_string())
            }
            Err(e) => self.durable_failed(&e),
        };
        self.restore_replicated_dedup().await;
    }

    /// Rebuilds a replicated topic's de-duplication window from the replica just opened: the
    /// message ids of the entries it applied within `dedup_window_ms` (what came before its
    /// live delivery starts), so a restarted replica that becomes the leader still answers a
    /// retry with its original.
    async fn restore_replicated_dedup(&mut self) {
        let limits = self.dedup.limits();
        let Durable::Replicated(log) = &self.durable else {
            return;
        };
        if !limits.remembers() {
            return;
        }
        match log.msg_ids_within(limits.window, limits.max_ids).await {
            Ok(ids) => self.restore_ids(ids, "the committed log"),
            Err(e) => {
                tracing::warn!(topic = %self.name, error = %e, "replicated topic: the committed log's message ids could not be read back; the de-duplication window starts empty");
            }
        }
    }

    /// The replica here left the topic's replica set (the mover saw it out of the committed
    /// voters): closed and its files deleted; the task goes on as a relay.
    async fn leave_replica(&mut self) {
        if let Durable::Replicated(log) = std::mem::replace(&mut self.durable, Durable::No) {
            log.remove().await;
        }
    }

    /// Delivers one committed entry of the replicated topic's replica, at its positions.
    async fn deliver_committed(&mut self, entry: starling_replica::Committed) {
        if entry.index < self.committed_next {
            return;
        }
        self.committed_next = entry.index + 1;
        self.committed_term = self.committed_term.max(entry.term);
        if entry.messages.is_empty() {
            return;
        }
        let headers = self.committed_headers(entry.index, &entry.headers);
        if !headers.is_empty() {
            // Every replica's window follows the committed log, so the next leader knows
            // what this one committed.
            self.dedup.committed(
                headers.iter().filter_map(|h| msg_id(&h.headers)),
                Instant::now(),
            );
        }
        let payloads = entry.messages;
        let origin = Position {
            stream: STREAM,
            seq: seq_of(entry.index, 0),
        };
        self.deliver(origin, &payloads, headers).await;
    }

    /// The headers of committed entry `index`, from the `EventHeaders` frame its batch
    /// carries (none when empty). A frame that does not decode (which a checksummed log and
    /// the proposer's own encoding make unexpected) is counted as a storage error and logged,
    /// and the messages go out without headers rather than not at all.
    fn committed_headers(&self, index: u64, frame: &Bytes) -> Vec<IndexedHeaders> {
        if frame.is_empty() {
            return Vec::new();
        }
        match record::decode_headers(frame) {
            Some(entries) => entries,
            None => {
                self.shared
                    .counters
                    .storage_errors
                    .fetch_add(1, Ordering::Relaxed);
                tracing::error!(topic = %self.name, index, "replicated topic: an entry's headers do not decode; delivered without them");
                Vec::new()
            }
        }
    }

    /// A sealed local batch of a replicated topic: proposed to the Raft log through the
    /// replica here; its acks complete once the entry carrying it committed (on a majority of
    /// replicas, each fsynced). Subscribers get it from the committed log, like every
    /// replica's. Refused with `Unavailable` (retryable) when this replica is not the leader
    /// or the topic cannot run yet, with `Moved` at a broker holding no replica. `ids`, the
    /// message ids of its messages, are settled in the window with its outcome.
    async fn propose(&mut self, batch: Batch<Attach>, ids: Vec<String>) {
        if self.epoch.has_changed().unwrap_or(false) {
            self.epoch.mark_unchanged();
            if !matches!(self.durable, Durable::Replicated(_)) {
                self.open_replica().await;
            }
        }
        let events = batch.payloads.len();
        self.shared
            .lanes
            .observe()
            .batch_sealed(events, batch.bytes);
        self.shared.counters.batch_flushed(batch.trigger);
        let acks: Vec<AckToken> = batch.attached.into_iter().filter_map(|a| a.ack).collect();
        let name = Arc::clone(&self.name);
        if !matches!(self.durable, Durable::Replicated(_)) {
            // Refused below: a retry is a new message.
            self.dedup.settled(&ids, false);
        }
        match &self.durable {
            Durable::Replicated(log) => {
                let messages = batch.payloads.clone();
                let headers = batch.headers.clone();
                let settle = (!ids.is_empty()).then(|| (self.settle_tx.clone(), ids));
                let done = Box::new(move |outcome: Result<(), ProposeError>| {
                    if let Some((tx, ids)) = settle {
                        // The task is gone only once the topic closed: nothing to settle.
                        let _ = tx.send(Settled {
                            ids,
                            committed: outcome.is_ok(),
                        });
                    }
                    for ack in acks {
                        match &outcome {
                            Ok(()) => ack.ack(),
                            Err(e) => ack.refuse(
                                ErrorCode::Unavailable,
                                format!("`{name}` did not commit the publish: {e}"),
                            ),
                        }
                    }
                });
                log.propose(Proposal {
                    messages,
                    headers,
                    done,
                })
                .await;
            }
            Durable::Unready(why) => {
                for ack in acks {
                    ack.refuse(ErrorCode::Unavailable, format!("`{name}`: {why}"));
                }
            }
            Durable::Failed(why) => {
                for ack in acks {
                    ack.refuse(
                        ErrorCode::Internal,
                        format!("the replica of `{name}` failed: {why}"),
                    );
                }
            }
            Durable::No | Durable::Open(_) => {
                for ack in acks {
                    ack.refuse(
                        ErrorCode::Moved,
                        format!("`{name}` has no replica on this broker; publish again"),
                    );
                }
            }
        }
    }

    /// Queues to a subscriber of a replicated topic resuming at `from` the committed entries
    /// it has not seen, read from the committed log up to where live delivery stands: from
    /// the start for a position of an older stream, nothing for a newer one.
    async fn replay_replicated(&mut self, sub: &Arc<Subscriber>, from: Position) {
        let (first, skip) = match from.stream.cmp(&STREAM) {
            std::cmp::Ordering::Less => (0, 0),
            std::cmp::Ordering::Equal => split_seq(from.seq),
            std::cmp::Ordering::Greater => return,
        };
        let end = self.committed_next;
        tracing::debug!(topic = %self.name, ?from, first, skip, end, "resume: replaying the committed log");
        let mut index = first;
        while index < end {
            let Durable::Replicated(log) = &self.durable else {
                return;
            };
            let entries = match log.read(index, 64).await {
                Ok(entries) => entries,
                Err(e) => {
                    self.shared
                        .counters
                        .storage_errors
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic = %self.name, ?from, error = %e, "resume: reading the committed log failed");
                    return;
                }
            };
            if entries.is_empty() {
                return;
            }
            let (mut frames, mut events) = (Vec::new(), 0u32);
            for entry in entries {
                if entry.index >= end {
                    index = end;
                    break;
                }
                index = entry.index + 1;
                let offset = if entry.index == first { skip } else { 0 };
                let offset = usize::try_from(offset).unwrap_or(usize::MAX);
                if offset >= entry.messages.len() {
                    continue;
                }
                let payloads: Vec<Bytes> = entry.messages[offset..].to_vec();
                events = events.saturating_add(u32::try_from(payloads.len()).unwrap_or(u32::MAX));
                let origin = Position {
                    stream: STREAM,
                    seq: seq_of(entry.index, offset as u64),
                };
                // Like a single-copy log's record: the headers frame (of the messages from
                // `offset` on), if any, then the batch (`replay_run` strips the headers for a
                // subscriber not granted them).
                let headers = reindex(self.committed_headers(entry.index, &entry.headers), offset);
                let headers = (!headers.is_empty())
                    .then(|| Frame::EventHeaders(EventHeaders { entries: headers }).to_bytes());
                frames.push(record::join(headers.as_ref(), &encode(origin, &payloads)));
            }
            if frames.is_empty() {
                continue;
            }
            if self.replay_run(sub, frames, events).await == Outcome::Closed {
                return;
            }
        }
    }

    /// Queues a run of replayed `frames` (`events` events) to `sub` alone, counts them as
    /// replayed and schedules its lane; what the offer did.
    async fn replay_run(&self, sub: &Arc<Subscriber>, frames: Vec<Bytes>, events: u32) -> Outcome {
        // A log record holds its batch's headers frame first, if any: only a subscriber
        // granted the headers gets it (`durable::record`).
        let frames = if sub.headers {
            frames
        } else {
            frames.into_iter().map(record::without_headers).collect()
        };
        self.shared
            .counters
            .replayed_events
            .fetch_add(u64::from(events), Ordering::Relaxed);
        let item = Queued {
            frame: Frames::Run(frames.into()),
            events,
            enqueued: Instant::now(),
        };
        let offer = sub.offer(item).await;
        if offer.schedule {
            self.shared.lanes.schedule(Arc::clone(sub)).await;
        }
        offer.outcome
    }

    /// Opens (recovering) the topic's log if it is durable and owned here, copies what other
    /// members' logs of the topic hold past its end (an owner change, see
    /// `durable::transfer`), and numbers on in a new stream above everything in the log:
    /// recovery may have cut records past its end that subscribers saw before a crash, so
    /// their positions are never given out again. `also` is a member that claimed to hold a
    /// log.
    async fn open_durable(&mut self, also: Option<Member>) {
        if self.is_replicated() {
            self.open_replica().await;
            return;
        }
        if !(self.shared.settings.owns)(&self.name) {
            return;
        }
        self.open_log().await;
        let _ = self.catch_up(also).await;
        if let Durable::Open(log) = &self.durable
            && let Some(next) = log.next_position()
        {
            self.stream = new_stream_id().max(next.stream.saturating_add(1));
            self.next_seq = 0;
        }
        self.restore_dedup().await;
    }

    /// Rebuilds the de-duplication window from the log just opened: the message ids of the
    /// records stamped within `dedup_window_ms` (`durable::record`), so a publisher retrying
    /// across a restart or an owner change is still answered with its original.
    async fn restore_dedup(&mut self) {
        let limits = self.dedup.limits();
        let Durable::Open(log) = &self.durable else {
            return;
        };
        if !limits.remembers() {
            return;
        }
        let view = log.view();
        let now = now_ms();
        let since =
            now.saturating_sub(u64::try_from(limits.window.as_millis()).unwrap_or(u64::MAX));
        let scan = tokio::task::spawn_blocking(move || {
            record::msg_ids_since(&view, since, now, limits.max_ids)
        })
        .await;
        if let Ok(ids) = scan {
            self.restore_ids(ids, "the log");
        }
    }

    /// Puts the message ids read back from `from` (with their ages) into the window.
    fn restore_ids(&mut self, ids: Vec<(String, Duration)>, from: &str) {
        if !ids.is_empty() {
            let found = ids.len();
            let restored = self.dedup.restore(ids, Instant::now());
            tracing::debug!(topic = %self.name, found, restored, from, "de-duplication window rebuilt");
        }
    }

    /// Opens (recovering) the topic's log if it is durable and not open yet, owner or not.
    async fn open_log(&mut self) {
        let durability = Arc::clone(&self.shared.settings.durability);
        if !matches!(self.durable, Durable::No) || !durability.is_durable(&self.name) {
            return;
        }
        let name = self.name.to_string();
        let opened = tokio::task::spawn_blocking(move || durability.open::<AckToken>(&name)).await;
        self.durable = match opened {
            Ok(Ok(log)) => Durable::Open(Box::new(log)),
            Ok(Err(e)) => self.durable_failed(&e),
            Err(e) => self.durable_failed(&e),
        };
    }

    /// Copies into the open log what the other members' logs hold past its end, and notes
    /// whether it could read every member it asked ([`HandOff`]).
    async fn catch_up(&mut self, also: Option<Member>) -> transfer::CaughtUp {
        let Durable::Open(log) = &mut self.durable else {
            return transfer::CaughtUp::default();
        };
        let peers = Arc::clone(&self.shared.settings.log_peers);
        let owns = Arc::clone(&self.shared.settings.owns);
        let name = Arc::clone(&self.name);
        let still_owner = move || owns(&name);
        let claimant = also.as_ref().map(|m| m.id.clone());
        let done = transfer::catch_up(log, &self.name, peers.as_ref(), also, &still_owner).await;
        // Members read since the membership last changed: their logs stopped growing when
        // they saw the change (they refuse the topic's batches from then on).
        let epoch = *self.epoch.borrow();
        if self.read_in_epoch.0 != epoch {
            self.read_in_epoch = (epoch, Vec::new());
        }
        self.read_in_epoch.1.extend(done.read.iter().cloned());
        let source = peers.source(&self.name);
        let missing = done
            .unread
            .iter()
            .filter(|id| {
                (source.as_ref() == Some(*id) || claimant.as_ref() == Some(*id))
                    && !self.read_in_epoch.1.contains(id)
            })
            .count();
        let before = self.hand_off;
        self.hand_off = before.after(missing, Instant::now());
        match (before, self.hand_off) {
            (_, HandOff::Incomplete { unread, .. }) => {
                tracing::warn!(topic = %self.name, unread, "durable hand-off: members could not be read; publishes are refused until they are");
            }
            (HandOff::Incomplete { .. }, HandOff::Complete) => {
                tracing::info!(topic = %self.name, records = done.records, "durable hand-off: every member read; publishes are taken again");
            }
            (HandOff::Complete, HandOff::Complete) => {}
        }
        done
    }

    /// Tries again a catch-up that left a member unread ([`HandOff`]); a broker that no
    /// longer owns the topic has nothing to copy (its late batches are refused as moved).
    async fn retry_hand_off(&mut self) {
        if !(self.shared.settings.owns)(&self.name) {
            self.hand_off = HandOff::Complete;
            return;
        }
        let copied = self.catch_up(None).await.records;
        self.continue_after(copied);
    }

    /// After `copied` records were appended from another member, numbers on in a new stream
    /// above them; with none copied, a log opened just now continues its own stream.
    fn continue_after(&mut self, copied: u64) {
        let Durable::Open(log) = &self.durable else {
            return;
        };
        let Some(next) = log.next_position() else {
            return;
        };
        if copied > 0 || next.stream > self.stream {
            self.stream = new_stream_id().max(next.stream.saturating_add(1));
            self.next_seq = 0;
        }
    }

    fn durable_failed(&self, e: &dyn std::fmt::Display) -> Durable {
        self.shared
            .counters
            .storage_errors
            .fetch_add(1, Ordering::Relaxed);
        tracing::error!(topic = %self.name, error = %e, "durable topic: its log is unusable; publishes are refused");
        Durable::Failed(e.to_string())
    }

    /// Fans out every sealed local batch, then the relayed runs waiting behind them.
    async fn deliver_ready(&mut self) {
        while let Some(mut batch) = self.batcher.pop_ready() {
            // The repeats whose originals are in this batch are answered with it.
            for ack in self.dedup.sealed(batch.payloads.len()) {
                batch.attached.push(Attach {
                    ack: Some(ack),
                    hold: None,
                });
            }
            let ids = self.dedup.ids_of(&batch.headers);
            if self.is_replicated() {
                // Its acks complete at commit, and its ids settle with them.
                self.propose(batch, ids).await;
            } else if !self.fanout(batch).await {
                self.dedup.forget(&ids);
            }
        }
        while let Some((origin, payloads, headers)) = self.relay_pending.pop_front() {
            self.deliver(origin, &payloads, headers).await;
        }
    }

    /// Whether sealed batches are waiting (stop draining the channel and deliver them).
    fn drain_ready_pending(&self) -> bool {
        (!self.batcher.is_empty() && self.batcher.deadline().is_none())
            || !self.relay_pending.is_empty()
    }

    /// Queues events relayed from the owner (with their headers, indexed into `payloads`),
    /// minus those already relayed; local messages accepted before them are sealed first so
    /// they keep their order.
    fn relay(&mut self, origin: Position, mut payloads: Vec<Bytes>, headers: Vec<IndexedHeaders>) {
        let skip = self.relayed.skip(origin, payloads.len());
        if skip >= payloads.len() {
            return;
        }
        let rest = payloads.split_off(skip);
        let headers = reindex(headers, skip);
        self.batcher.flush();
        let origin = Position {
            stream: origin.stream,
            seq: origin.seq.wrapping_add(skip as u64),
        };
        self.relay_pending.push_back((origin, rest, headers));
    }

    /// Why a replicated topic's leader cannot take message ids yet: it was elected and has
    /// not delivered an entry of its own term, so entries its predecessors committed (a
    /// retry's original among them) may not be in its window yet. Only for a publish with an
    /// id, and for the moment between an election and the new leader's first commit.
    fn dedup_unready(&self, headers: &[IndexedHeaders]) -> Option<String> {
        let Durable::Replicated(log) = &self.durable else {
            return None;
        };
        if !self.dedup.limits().remembers() || !headers.iter().any(|h| msg_id(&h.headers).is_some())
        {
            return None;
        }
        let term = log.leader_term()?;
        (self.committed_term < term).then(|| {
            format!(
                "`{}` has a new Raft leader that has not yet applied its predecessors' entries, which it needs to recognise a repeated message id; publish again",
                self.name
            )
        })
    }

    fn accept(&mut self, msg: TopicMsg, now: Instant) {
        if let Some(origin) = msg.origin {
            // A replica delivers its own committed entries: a relay of the same would only
            // repeat them.
            if !matches!(self.durable, Durable::Replicated(_)) {
                self.relay(origin, msg.payloads, msg.headers);
            }
            return;
        }
        let n = msg.payloads.len();
        let (mut ack, mut hold) = (msg.ack, msg.hold);
        // Repeats of a message id within the window are dropped (and counted); a request whose
        // new ids do not fit in the broker's windows is refused whole.
        if let Some(why) = self.dedup_unready(&msg.headers) {
            if let Some(ack) = ack {
                ack.refuse(ErrorCode::Unavailable, why);
            }
            return;
        }
        let plan = match self.dedup.plan(n, &msg.headers, now) {
            Ok(plan) => plan,
            Err(refusal) => {
                if let Some(ack) = ack {
                    let code = match refusal {
                        Refusal::Budget(_) => ErrorCode::LimitExceeded,
                        Refusal::InFlight { .. } => ErrorCode::Unavailable,
                    };
                    ack.refuse(code, refusal.to_string());
                }
                return;
            }
        };
        let last = (0..n).rev().find(|&i| !plan.is_repeat(i));
        // Indices increase strictly (the decoder checked), so one pass pairs them up.
        let mut headers = msg.headers.into_iter().peekable();
        for (i, payload) in msg.payloads.into_iter().enumerate() {
            let own = headers
                .next_if(|h| usize::try_from(h.index).is_ok_and(|x| x == i))
                .map(|h| h.headers)
                .unwrap_or_default();
            if plan.is_repeat(i) {
                continue;
            }
            // The ack and the hold ride on the request's last new message, so the ack
            // completes after all of them (and after every repeat's original, which came
            // earlier) and the bytes stay counted until their batch is offered.
            let attach = (Some(i) == last).then(|| Attach {
                ack: ack.take(),
                hold: hold.take(),
            });
            self.batcher.push_with_headers(payload, own, attach, now);
            self.dedup.pushed();
        }
        if let Some(ack) = ack {
            if plan.wait_for.is_some() {
                // Every message was a repeat: answered with the originals' ack, once they
                // have it.
                self.dedup.answer_repeat(plan.wait_for, ack);
            } else {
                ack.ack(); // an empty batch publish
            }
        }
    }

    async fn on_control(&mut self, ctl: Control) {
        match ctl {
            Control::Subscribe { sub, start, behind } => {
                if sub.is_closed() {
                    return;
                }
                if sub.group.is_some() {
                    // A group member is live only (the broker refuses any other start).
                    self.join_group(sub, false);
                    return;
                }
                tracing::debug!(topic = %self.name, id = sub.id, ?start, replicated = matches!(self.durable, Durable::Replicated(_)), "subscribe");
                if let (Durable::Replicated(_), StartAt::Position(from)) = (&self.durable, start) {
                    self.replay_replicated(&sub, from).await;
                    self.subscribers.push(sub);
                    return;
                }
                if let Some(from) = self.start_position(start).await {
                    if !(self.shared.settings.owns)(&self.name) && !self.retained.covers(from) {
                        // A relay whose tail does not reach back to `from`: what lies between
                        // is only at the owner, and the tail's newer events must not go first.
                        tracing::debug!(topic = %self.name, id = sub.id, ?from, "resume: behind the retained tail; catching up from the owner");
                        if behind.is_some_and(|b| b.send(from).is_ok()) {
                            self.behind.push((sub, from));
                            return;
                        }
                    }
                    self.resume(&sub, from).await;
                }
                self.subscribers.push(sub);
            }
            Control::CatchUp {
                id,
                origin,
                payloads,
                reply,
            } => {
                let _ = reply.send(self.feed_behind(id, origin, payloads).await);
            }
            Control::Wildcard(sub) => {
                if sub.group.is_some() {
                    if !sub.is_closed() {
                        self.join_group(sub, true);
                    }
                } else if !sub.is_closed() && !self.wildcards.iter().any(|s| s.id == sub.id) {
                    self.wildcards.push(sub);
                }
            }
            Control::Unsubscribe(id) => {
                self.subscribers.retain(|s| s.id != id);
                self.wildcards.retain(|s| s.id != id);
                self.behind.retain(|(s, _)| s.id != id);
                for group in &mut self.groups {
                    group.remove(id);
                }
                self.groups.retain(|g| !g.is_empty());
            }
            Control::LogView(reply) => {
                // A replicated topic's directory holds its replica, not a log to hand over.
                if self.is_replicated() {
                    let _ = reply.send((None, false));
                    return;
                }
                if self.shared.settings.durability.has_log(&self.name) {
                    self.open_log().await;
                }
                let view = match &self.durable {
                    Durable::Open(log) => Some(log.view()),
                    Durable::No
                    | Durable::Failed(_)
                    | Durable::Replicated(_)
                    | Durable::Unready(_) => None,
                };
                let _ = reply.send((view, (self.shared.settings.owns)(&self.name)));
            }
            Control::Claim(from, reply) => {
                let answer = if self.is_replicated() {
                    Err(format!(
                        "`{}` is replicated: its replicas are not handed over",
                        self.name
                    ))
                } else if !(self.shared.settings.owns)(&self.name) {
                    Err(format!("this broker does not own `{}`", self.name))
                } else {
                    // Opened now if the task started as a relay, or for this claim.
                    self.open_log().await;
                    let done = self.catch_up(Some(from)).await;
                    self.continue_after(done.records);
                    // The claimant tries again until its log (and the former owner's) was
                    // read: it keeps its copy meanwhile (a draining broker waits for it).
                    if matches!(self.hand_off, HandOff::Incomplete { .. }) {
                        Err(format!(
                            "`{}` copied {} record(s) but could not read {} yet",
                            self.name,
                            done.records,
                            done.unread.join(", ")
                        ))
                    } else {
                        Ok(done.records)
                    }
                };
                let answer = match (&self.durable, answer) {
                    (Durable::Failed(why), Ok(_)) => Err(why.clone()),
                    (_, answer) => answer,
                };
                let _ = reply.send(answer);
            }
            Control::Flush(done) => {
                while let Ok(more) = self.data.try_recv() {
                    self.accept(more, Instant::now());
                }
                self.batcher.flush();
                self.deliver_ready().await;
                let _ = done.send(());
            }
        }
    }

    /// Where a subscription starting at `start` replays from: a resume position as it is; a
    /// time as the position of the first batch stamped at or after it, found through the log's
    /// time index on a durable topic (the log holds every batch this task numbered, in
    /// order), else through the retained tail's times. `None`: live only (asked for, or a
    /// time after the newest batch). The task handles nothing else meanwhile, so the replay
    /// from that position still ends exactly where live delivery continues.
    async fn start_position(&mut self, start: StartAt) -> Option<Position> {
        let time_ms = match start {
            StartAt::Live => return None,
            StartAt::Position(p) => return Some(p),
            StartAt::TimeMs(t) => t,
        };
        if let Durable::Open(log) = &self.durable
            && (self.shared.settings.owns)(&self.name)
        {
            let view = log.view();
            let found = tokio::task::spawn_blocking(move || view.position_at_time(time_ms)).await;
            match found {
                Ok(Ok(at)) => {
                    tracing::debug!(topic = %self.name, time_ms, ?at, "subscribe from a time: found in the durable log");
                    return at;
                }
                Ok(Err(e)) => {
                    self.shared
                        .counters
                        .storage_errors
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(topic = %self.name, time_ms, error = %e, "subscribe from a time: the durable log's time index failed; using the retained tail");
                }
                Err(e) => {
                    tracing::warn!(topic = %self.name, time_ms, error = %e, "subscribe from a time: the lookup did not finish; using the retained tail");
                }
            }
        }
        let freed = self.retained.evict(Instant::now());
        self.shared.retained_freed(freed);
        let at = self.retained.position_at_time(time_ms);
        tracing::debug!(topic = %self.name, time_ms, ?at, "subscribe from a time: found in the retained tail");
        at
    }

    /// Queues a catch-up run from the owner (`payloads` from `origin`) to held-back subscriber
    /// `id` alone, and lets it join the subscribers once the retained tail reaches back to
    /// where it stands: the tail from there is queued first, so it goes on in the owner's
    /// order with no gap (a batch it partly has is sent whole; the client drops the repeats).
    /// An empty run joins it at once (its catch-up gave up).
    async fn feed_behind(&mut self, id: u64, origin: Position, payloads: Vec<Bytes>) -> CaughtUp {
        let Some(i) = self.behind.iter().position(|(s, _)| s.id == id) else {
            return CaughtUp::Gone;
        };
        let (sub, mut at) = self.behind[i].clone();
        if sub.is_closed() {
            self.behind.swap_remove(i);
            return CaughtUp::Gone;
        }
        if !payloads.is_empty() {
            let events = u32::try_from(payloads.len()).unwrap_or(u32::MAX);
            let item = Queued {
                frame: Frames::One(encode(origin, &payloads)),
                events,
                enqueued: Instant::now(),
            };
            self.shared
                .counters
                .replayed_events
                .fetch_add(u64::from(events), Ordering::Relaxed);
            let offer = sub.offer(item).await;
            if offer.schedule {
                self.shared.lanes.schedule(Arc::clone(&sub)).await;
            }
            if offer.outcome == Outcome::Closed {
                self.behind.retain(|(s, _)| s.id != id);
                return CaughtUp::Gone;
            }
            at = Position {
                stream: origin.stream,
                seq: origin.seq.wrapping_add(u64::from(events)),
            };
        }
        let freed = self.retained.evict(Instant::now());
        self.shared.retained_freed(freed);
        if !payloads.is_empty() && !self.retained.covers(at) {
            if let Some(entry) = self.behind.iter_mut().find(|(s, _)| s.id == id) {
                entry.1 = at;
            }
            return CaughtUp::Behind;
        }
        self.behind.retain(|(s, _)| s.id != id);
        tracing::debug!(topic = %self.name, id, ?at, "resume: caught up from the owner; joining");
        self.resume(&sub, at).await;
        self.subscribers.push(sub);
        CaughtUp::Joined
    }

    /// Queues to a subscriber resuming at `from` what it has not seen: from the retained tail,
    /// or, at the owner of a durable topic whose tail does not reach back to `from`, from the
    /// log (only the owner's log is whole: a former owner's stops where it left).
    async fn resume(&mut self, sub: &Arc<Subscriber>, from: Position) {
        let owner = (self.shared.settings.owns)(&self.name);
        let from_disk = match &self.durable {
            Durable::Open(log) if owner && !self.retained.covers(from) => Some(log.view()),
            _ => None,
        };
        match from_disk {
            Some(view) => self.replay_from_disk(sub, from, view).await,
            None => self.replay(sub, from).await,
        }
    }

    /// Queues to a resuming subscriber the retained events it has not seen.
    async fn replay(&mut self, sub: &Arc<Subscriber>, from: Position) {
        let now = Instant::now();
        let freed = self.retained.evict(now);
        self.shared.retained_freed(freed);
        let m = &self.shared.counters;
        let chunks = coalesce(self.retained.replay(from), REPLAY_CHUNK_BYTES);
        tracing::debug!(
            topic = %self.name,
            ?from,
            stream = self.stream,
            next_seq = self.next_seq,
            events = chunks.iter().map(|c| u64::from(c.events)).sum::<u64>(),
            "resume: replaying retained events"
        );
        for chunk in chunks {
            m.replayed_events
                .fetch_add(u64::from(chunk.events), Ordering::Relaxed);
            let item = Queued {
                frame: Frames::Run(chunk.frames),
                events: chunk.events,
                enqueued: now,
            };
            let offer = sub.offer(item).await;
            if offer.schedule {
                self.shared.lanes.schedule(Arc::clone(sub)).await;
            }
        }
    }

    /// Queues to a resuming subscriber what the topic's log holds from `from` on (the
    /// retained tail no longer reaches back to it). The task appends nothing meanwhile, so
    /// the replay ends exactly where live delivery continues: no gap, no duplicate.
    async fn replay_from_disk(
        &mut self,
        sub: &Arc<Subscriber>,
        from: Position,
        view: starling_storage::LogView,
    ) {
        let m = Arc::clone(&self.shared.counters);
        let mut reader = view.read_from(from);
        loop {
            let read = tokio::task::spawn_blocking(move || {
                let (mut frames, mut bytes, mut events) = (Vec::new(), 0usize, 0u32);
                let mut failed = None;
                let mut done = false;
                while bytes < DISK_REPLAY_CHUNK_BYTES {
                    match reader.next() {
                        Some(Ok(rec)) => {
                            bytes += rec.payload.len();
                            events = events.saturating_add(rec.events);
                            frames.push(rec.payload);
                        }
                        Some(Err(e)) => {
                            failed = Some(e);
                            done = true;
                            break;
                        }
                        None => {
                            done = true;
                            break;
                        }
                    }
                }
                (reader, frames, events, done, failed)
            })
            .await;
            let Ok((rest, frames, events, done, failed)) = read else {
                return;
            };
            reader = rest;
            if let Some(e) = failed {
                m.storage_errors.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(topic = %self.name, ?from, error = %e, "resume: reading the durable log failed");
            }
            if !frames.is_empty() {
                tracing::debug!(topic = %self.name, ?from, events, records = frames.len(), "resume: replaying from disk");
                m.storage_replayed_records
                    .fetch_add(frames.len() as u64, Ordering::Relaxed);
                self.replay_run(sub, frames, events).await;
            }
            if done {
                return;
            }
        }
    }

    /// Numbers a local batch in the current stream, delivers it and completes its acks;
    /// false when its acks were refused (its message ids are then forgotten). Not for a
    /// replicated topic's batch, which is proposed (`propose`).
    async fn fanout(&mut self, batch: Batch<Attach>) -> bool {
        if self.epoch.has_changed().unwrap_or(false) {
            self.epoch.mark_unchanged();
            if (self.shared.settings.owns)(&self.name) {
                // A durable topic's task that started here before this broker owned it (a
                // relay) has no log yet: it opens (and recovers) it now, so its batches are
                // logged before anyone sees them and `persisted` acks wait for the log.
                // The log copies what the former owner's log holds past its end first
                // (`durable::transfer`), so the new stream follows it.
                if matches!(self.durable, Durable::No) {
                    self.open_durable(None).await;
                } else {
                    let _ = self.catch_up(None).await;
                }
                // Membership changed: this broker may have stopped and started owning the
                // topic since its last batch, so number on in a stream nobody has seen.
                // Never below the stream it leaves: a durable log continued from disk may
                // hold a stream drawn by an earlier process under a clock that ran ahead.
                self.stream = new_stream_id().max(self.stream.saturating_add(1));
                self.next_seq = 0;
                tracing::debug!(topic = %self.name, stream = self.stream, "membership changed: new stream");
            } else {
                // A late batch at a former owner (accepted just before it learned of the
                // change): it continues the stream its subscribers followed. A fresh id would
                // be newer than the new owner's stream, and a subscriber that received this
                // batch would then resume past the new owner's stream and miss its events.
                tracing::debug!(topic = %self.name, stream = self.stream, "membership changed: late batch at a former owner");
            }
        }
        // A durable topic's batch is numbered and acked only by its owner: a batch that
        // reached this broker's task after the topic moved (views differ for a moment) would
        // be logged where the new owner, which has already copied this log and numbers a
        // later stream, can no longer take it. Its publishers are told to retry at the owner.
        if self.shared.settings.durability.is_durable(&self.name)
            && !(self.shared.settings.owns)(&self.name)
        {
            tracing::debug!(topic = %self.name, "durable topic moved: a late batch is refused");
            for ack in batch.attached.into_iter().filter_map(|a| a.ack) {
                ack.refuse(
                    ErrorCode::Moved,
                    format!("`{}` moved to another broker; publish again", self.name),
                );
            }
            return false;
        }
        if let Some(why) = self.hand_off.refusal(&self.name)
            && matches!(self.durable, Durable::Open(_))
        {
            for ack in batch.attached.into_iter().filter_map(|a| a.ack) {
                ack.refuse(ErrorCode::Unavailable, why.clone());
            }
            return false;
        }
        let events = batch.payloads.len();
        let origin = Position {
            stream: self.stream,
            seq: self.next_seq,
        };
        self.next_seq = self.next_seq.wrapping_add(events as u64);
        self.shared
            .lanes
            .observe()
            .batch_sealed(events, batch.bytes);
        self.shared.counters.batch_flushed(batch.trigger);
        let frame = encode(origin, &batch.payloads);
        // The reply inboxes of the batch's requests: each subscriber given the headers may
        // reply to them.
        let inboxes: Vec<String> = batch
            .headers
            .iter()
            .filter_map(|h| starling_proto::request::reply_to(&h.headers))
            .map(str::to_string)
            .collect();
        // The batch's headers travel in their own frame, encoded once, for the subscribers
        // granted `HEADERS`; the EventBatch stays the one shared frame.
        let headers = (!batch.headers.is_empty()).then(|| {
            Frame::EventHeaders(EventHeaders {
                entries: batch.headers,
            })
            .to_bytes()
        });
        let events = u32::try_from(events).unwrap_or(u32::MAX);
        // A durable topic's batch goes to its log before anyone sees it: the record is the
        // headers frame, if any, and the batch (`durable::record`).
        let logged = match &mut self.durable {
            Durable::No => Ok(None),
            Durable::Open(log) => log
                .append(origin, events, &record::join(headers.as_ref(), &frame))
                .map(Some)
                .map_err(|e| e.to_string()),
            Durable::Failed(why) | Durable::Unready(why) => Err(why.clone()),
            // Never here: a replicated topic's batches are proposed (`propose`).
            Durable::Replicated(_) => Err("a replicated topic's batch reached the log path".into()),
        };
        // The retained copy carries the log record's time, so the tail and the log agree on
        // where a subscription from a time starts.
        let (logged, time_ms) = match logged {
            Ok(Some(appended)) => (Some(appended.next), appended.timestamp_ms),
            Ok(None) => (None, now_ms()),
            Err(why) => {
                // Neither logged nor delivered: the positions stay free and the publishers
                // learn why (an `Internal` error frame; the storage error counter moved).
                self.next_seq = origin.seq;
                tracing::warn!(topic = %self.name, error = %why, "durable topic: batch refused");
                for ack in batch.attached.into_iter().filter_map(|a| a.ack) {
                    ack.refuse(
                        ErrorCode::Internal,
                        format!("the durable log of `{}` failed: {why}", self.name),
                    );
                }
                // The log stays open: a full volume refuses only this batch (the next one
                // tries again), and a poisoned log refuses every batch by itself.
                return false;
            }
        };
        let refused = self
            .deliver_frame(origin, events, frame, headers, time_ms, &inboxes)
            .await;
        let mut persisted = Vec::new();
        // The holds are released here, with the batch offered to every subscriber.
        for ack in batch.attached.into_iter().filter_map(|a| a.ack) {
            if refused == 0 {
                if ack.persisted && logged.is_some() {
                    persisted.push(ack);
                } else {
                    ack.ack();
                }
            } else {
                ack.refuse(
                    ErrorCode::Overloaded,
                    format!(
                        "{refused} slow subscriber(s) of `{}` dropped the message (drop_new)",
                        self.name
                    ),
                );
            }
        }
        if let (Some(next), Durable::Open(log)) = (logged, &self.durable) {
            log.wait_durable(next, persisted);
        }
        refused == 0
    }
}

/// `headers` indexed into a run whose first `skip` events were dropped: those of the dropped
/// events go, the others' indexes move down by `skip`.
fn reindex(headers: Vec<IndexedHeaders>, skip: usize) -> Vec<IndexedHeaders> {
    if skip == 0 {
        return headers;
    }
    let skip = u32::try_from(skip).unwrap_or(u32::MAX);
    headers
        .into_iter()
        .filter(|h| h.index >= skip)
        .map(|h| IndexedHeaders {
            index: h.index - skip,
            headers: h.headers,
        })
        .collect()
}

/// Encodes events numbered from `origin` as one EventBatch frame.
fn encode(origin: Position, payloads: &[Bytes]) -> Bytes {
    let mut buf = BytesMut::with_capacity(event_batch_encoded_len(payloads));
    encode_event_batch(origin.stream, origin.seq, payloads, &mut buf);
    buf.freeze()
}

impl TopicTask {
    /// Encodes events numbered from `origin` once (relayed from the owner: stamped with the
    /// time they are relayed here), offers the frame to every subscriber, retains it, and
    /// returns how many subscribers refused it (`drop_new`).
    async fn deliver(
        &mut self,
        origin: Position,
        payloads: &[Bytes],
        headers: Vec<IndexedHeaders>,
    ) -> usize {
        let events = u32::try_from(payloads.len()).unwrap_or(u32::MAX);
        // Relayed requests' reply inboxes: a responder here may reply to them.
        let inboxes: Vec<String> = headers
            .iter()
            .filter_map(|h| starling_proto::request::reply_to(&h.headers))
            .map(str::to_string)
            .collect();
        let headers = (!headers.is_empty())
            .then(|| Frame::EventHeaders(EventHeaders { entries: headers }).to_bytes());
        self.deliver_frame(
            origin,
            events,
            encode(origin, payloads),
            headers,
            now_ms(),
            &inboxes,
        )
        .await
    }

    /// Offers an encoded frame of `events` events from `origin` to every subscriber (after
    /// its `EventHeaders` frame `headers`, if any, to those granted `HEADERS`), retains it
    /// stamped `time_ms` (Unix milliseconds), and returns how many subscribers refused it
    /// (`drop_new`). The retained copy is the EventBatch alone: a replay carries no headers.
    async fn deliver_frame(
        &mut self,
        origin: Position,
        events: u32,
        frame: Bytes,
        headers: Option<Bytes>,
        time_ms: u64,
        inboxes: &[String],
    ) -> usize {
        let now = Instant::now();
        let mut refused = 0usize;
        let mut closed = false;
        for sub in &self.subscribers {
            let frames = match &headers {
                Some(h) if sub.headers => Frames::Tagged(h.clone(), frame.clone()),
                _ => Frames::One(frame.clone()),
            };
            let item = Queued {
                frame: frames,
                events,
                enqueued: now,
            };
            match offer_batch(&self.shared, sub, item, inboxes).await {
                Outcome::DroppedNew => refused += 1,
                Outcome::Closed => closed = true,
                Outcome::Queued | Outcome::QueuedDroppedOld => {}
            }
        }
        if closed {
            self.subscribers.retain(|s| !s.is_closed());
        }
        if (!self.wildcards.is_empty() || !self.groups.is_empty()) && self.serves_shared() {
            refused += self
                .deliver_wildcards(events, &frame, headers.as_ref(), now, inboxes)
                .await;
            refused += self
                .deliver_groups(events, &frame, headers.as_ref(), now, inboxes)
                .await;
        }
        tracing::trace!(
            topic = %self.name,
            stream = origin.stream,
            seq = origin.seq,
            events,
            subscribers = self.subscribers.len(),
            wildcards = self.wildcards.len(),
            refused,
            "delivered"
        );
        {
            let end = Position {
                stream: origin.stream,
                seq: origin.seq.wrapping_add(u64::from(events)),
            };
            let mut reached = self.reached.lock();
            if reached.is_none_or(|r| (r.stream, r.seq) <= (end.stream, end.seq)) {
                *reached = Some(end);
            }
        }
        let change = self
            .retained
            .push(origin.stream, origin.seq, events, frame, now, time_ms);
        self.shared.retained_changed(change);
        // Over the broker-wide cap: this topic gives up its own oldest batches (other topics'
        // tails expire on their own within the window).
        while self.shared.retained_over_cap() {
            let freed = self.retained.evict_oldest();
            if freed == 0 {
                break;
            }
            self.shared.retained_freed(freed);
        }
        refused
    }
}

impl TopicTask {
    /// Offers `frame` (of `events` events), after the topic's `BatchTopic` (and then the
    /// batch's `EventHeaders`, if any, for a subscriber granted `HEADERS`), to every wildcard
    /// subscriber; returns how many refused it (`drop_new`).
    async fn deliver_wildcards(
        &mut self,
        events: u32,
        frame: &Bytes,
        headers: Option<&Bytes>,
        now: Instant,
        inboxes: &[String],
    ) -> usize {
        if self.wildcards.is_empty() {
            return 0;
        }
        let tag = self.tag();
        // The topic's tag and the batch's headers back to back, built once per batch when a
        // wildcard subscriber wants the headers.
        let mut tagged_headers: Option<Bytes> = None;
        let (mut refused, mut closed) = (0usize, false);
        for sub in &self.wildcards {
            let prefix = match headers {
                Some(h) if sub.headers => tagged_headers
                    .get_or_insert_with(|| {
                        let mut both = BytesMut::with_capacity(tag.len() + h.len());
                        both.extend_from_slice(&tag);
                        both.extend_from_slice(h);
                        both.freeze()
                    })
                    .clone(),
                _ => tag.clone(),
            };
            let item = Queued {
                frame: Frames::Tagged(prefix, frame.clone()),
                events,
                enqueued: now,
            };
            match offer_batch(&self.shared, sub, item, inboxes).await {
                Outcome::DroppedNew => refused += 1,
                Outcome::Closed => closed = true,
                Outcome::Queued | Outcome::QueuedDroppedOld => {}
            }
        }
        if closed {
            self.wildcards.retain(|s| !s.is_closed());
        }
        refused
    }
}

impl TopicTask {
    /// Whether this topic's wildcard subscribers and queue groups get its batches here: only
    /// at its owner (always, outside a cluster), so a relay never hands them a second copy;
    /// in a cluster the feeds of the other members bring them the topic from its owner
    /// (`cluster::fan_in`).
    fn serves_shared(&self) -> bool {
        (self.shared.settings.owns)(&self.name)
    }

    /// This topic's `BatchTopic` frame, encoded once.
    fn tag(&mut self) -> Bytes {
        let name = &self.name;
        self.tag
            .get_or_insert_with(|| {
                let topic = name.to_string();
                Frame::BatchTopic(BatchTopic { topic }).to_bytes()
            })
            .clone()
    }

    /// Adds `sub` to its queue group of this topic (a wildcard group when it came as a
    /// wildcard subscriber), creating the group with its first member.
    fn join_group(&mut self, sub: Arc<Subscriber>, wildcard: bool) {
        if let Some(group) = self.groups.iter_mut().find(|g| g.holds(&sub, wildcard)) {
            group.add(sub);
            return;
        }
        let Some(name) = sub.group.clone() else {
            return;
        };
        let mut group = Group::new(Arc::clone(&sub.topic), name, wildcard);
        group.add(sub);
        self.groups.push(group);
    }

    /// Offers `frame` (of `events` events) to one member of each queue group (see
    /// `starling_pubsub::group`): a wildcard group's member gets it after the topic's
    /// `BatchTopic`, a member granted `HEADERS` after the batch's `EventHeaders`. A member
    /// found closed is removed and another chosen, so the batch reaches one member while any
    /// is left. Returns how many groups refused it (`drop_new` on the chosen member).
    async fn deliver_groups(
        &mut self,
        events: u32,
        frame: &Bytes,
        headers: Option<&Bytes>,
        now: Instant,
        inboxes: &[String],
    ) -> usize {
        if self.groups.is_empty() {
            return 0;
        }
        let tag = self.groups.iter().any(|g| g.wildcard).then(|| self.tag());
        let mut tagged_headers: Option<Bytes> = None;
        let (mut refused, mut taken, mut dropped) = (0usize, 0u64, 0u64);
        for group in &mut self.groups {
            if group.members().iter().any(|m| m.blocks()) {
                wait_for_room(group).await;
            }
            while let Some(sub) = group.pick() {
                let prefix = match (&tag, headers) {
                    (Some(tag), Some(h)) if group.wildcard && sub.headers => Some(
                        tagged_headers
                            .get_or_insert_with(|| {
                                let mut both = BytesMut::with_capacity(tag.len() + h.len());
                                both.extend_from_slice(tag);
                                both.extend_from_slice(h);
                                both.freeze()
                            })
                            .clone(),
                    ),
                    (Some(tag), _) if group.wildcard => Some(tag.clone()),
                    (_, Some(h)) if sub.headers => Some(h.clone()),
                    _ => None,
                };
                let frames = match prefix {
                    Some(prefix) => Frames::Tagged(prefix, frame.clone()),
                    None => Frames::One(frame.clone()),
                };
                let item = Queued {
                    frame: frames,
                    events,
                    enqueued: now,
                };
                match offer_batch(&self.shared, &sub, item, inboxes).await {
                    Outcome::Closed => {
                        group.remove(sub.id);
                        continue;
                    }
                    Outcome::DroppedNew => {
                        refused += 1;
                        dropped += u64::from(events);
                    }
                    Outcome::Queued | Outcome::QueuedDroppedOld => taken += u64::from(events),
                }
                break;
            }
        }
        self.groups.retain(|g| !g.is_empty());
        let c = &self.shared.counters;
        c.group_events.fetch_add(taken, Ordering::Relaxed);
        c.group_dropped_events.fetch_add(dropped, Ordering::Relaxed);
        refused
    }
}

/// Under `block`, returns once some open member of `group` has room in its queue (or none is
/// left open): the batch then goes to a member that can take it, not to whichever full member
/// the round-robin would wait on.
async fn wait_for_room(group: &Group) {
    loop {
        let mut waits: Vec<_> = group
            .members()
            .iter()
            .filter(|m| !m.is_closed())
            .map(|m| Box::pin(m.space().notified()))
            .collect();
        for w in &mut waits {
            w.as_mut().enable();
        }
        if waits.is_empty() || !group.full() {
            return;
        }
        futures::future::select_all(waits).await;
    }
}

/// Offers one batch to `sub` (plain or wildcard alike): schedules its writer when the offer
/// asks for it and, once the batch is queued, grants the subscriber's user the batch's reply
/// inboxes. Returns what became of the batch.
async fn offer_batch(
    shared: &Shared,
    sub: &Arc<Subscriber>,
    item: Queued,
    inboxes: &[String],
) -> Outcome {
    let offer = sub.offer(item).await;
    if offer.schedule {
        shared.lanes.schedule(Arc::clone(sub)).await;
    }
    if matches!(offer.outcome, Outcome::Queued | Outcome::QueuedDroppedOld) {
        grant_replies(shared, sub, inboxes);
    }
    offer.outcome
}

/// Lets the connection of `sub`, queued a batch holding requests for `inboxes`, reply to them
/// (only a subscriber given the headers saw them).
fn grant_replies(shared: &Shared, sub: &Subscriber, inboxes: &[String]) {
    if !sub.headers {
        return;
    }
    for inbox in inboxes {
        shared.settings.inboxes.grant(sub.conn_id, inbox);
    }
}

async fn maybe_sleep(deadline: Option<Instant>) {
    match deadline {
        Some(d) => timer::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::new_stream_id;

    #[test]
    fn stream_ids_drawn_at_once_by_many_threads_are_all_distinct() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| (0..20_000).map(|_| new_stream_id()).collect::<Vec<_>>())
            })
            .collect();
        let mut all = std::collections::HashSet::new();
        for t in threads {
            let ids = t.join().unwrap();
            assert!(ids.windows(2).all(|w| w[1] > w[0]), "one thread's ids grow");
            for id in ids {
                assert!(all.insert(id), "stream id {id} handed out twice");
            }
        }
    }

    #[test]
    fn stream_ids_grow_and_carry_their_start_time() {
        let a = new_stream_id();
        let b = new_stream_id();
        assert!(b > a, "{b} after {a}");
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        assert!(
            (a >> 20).abs_diff(millis) < 60_000,
            "{} vs {millis}",
            a >> 20
        );
    }
}
