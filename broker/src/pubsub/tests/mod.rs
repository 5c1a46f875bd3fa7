//! Tests of the pub/sub engine without a network: in-memory sinks ([`Wire`]), an engine built
//! like the broker builds it (`Engine`), and the frames a sink received, decoded. Every test
//! runs on a current-thread runtime with a paused clock, so a run is the same every time.
//!
//! - [`model`]: randomised operation sequences checked against a reference model.
//! - [`regressions`]: one case per ordering, duplication or loss fix of this code.
//! - [`wildcards`]: wildcard subscribers across matching topics.
//! - [`groups`]: queue groups: each batch to one member, under churn and slow members.
//! - [`hand_off`]: a durable topic's new owner and a former owner it cannot read.

mod dedup;
mod groups;
mod hand_off;
mod headers;
mod model;
mod regressions;
mod wildcards;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use parking_lot::Mutex;
use starling_config::{Profile, SlowSubscriberPolicy};
use starling_proto::{Frame, FrameDecoder, Position, StartAt};
use tokio::sync::{Notify, oneshot, watch};

use crate::durable::Durability;
use crate::durable::transfer::NoPeers;
use crate::pubsub::batcher::Limits;
use crate::pubsub::counters::{Counters, Unobserved};
use crate::pubsub::lanes::Lanes;
use crate::pubsub::sink::{SinkClosed, SinkFuture, SubscriberSink, WriteNow};
use crate::pubsub::subscriber::{Identity, QueuePolicy, Subscriber};
use crate::pubsub::topic::{TopicMsg, TopicSettings, Topics};

/// The far end of an in-memory sink: what it received, and whether it reads (a stalled wire
/// takes nothing, like a QUIC stream whose peer stopped reading).
#[derive(Default)]
pub(super) struct Wire {
    state: Mutex<WireState>,
    open: Notify,
}

#[derive(Default)]
struct WireState {
    received: BytesMut,
    stalled: bool,
    broken: bool,
    finished: bool,
}

impl Wire {
    /// Stops (or resumes) reading.
    pub(super) fn stall(&self, stalled: bool) {
        self.state.lock().stalled = stalled;
        if !stalled {
            self.open.notify_waiters();
        }
    }

    /// Breaks the wire: every later write fails.
    pub(super) fn break_off(&self) {
        self.state.lock().broken = true;
        self.open.notify_waiters();
    }

    /// Whether the sink was finished.
    pub(super) fn finished(&self) -> bool {
        self.state.lock().finished
    }

    /// Every frame received so far.
    pub(super) fn frames(&self) -> Vec<Frame> {
        let mut buf = self.state.lock().received.clone();
        let decoder = FrameDecoder::new(16 << 20);
        let mut frames = Vec::new();
        while let Some(frame) = decoder.decode(&mut buf).expect("well-formed frames") {
            frames.push(frame);
        }
        assert!(buf.is_empty(), "a frame cut short");
        frames
    }

    /// Every event received so far, with its position, in order.
    pub(super) fn events(&self) -> Vec<(Position, Bytes)> {
        let mut out = Vec::new();
        for frame in self.frames() {
            if let Frame::EventBatch(b) = frame {
                for (i, e) in b.events.into_iter().enumerate() {
                    let position = Position {
                        stream: b.stream,
                        seq: b.first_seq + i as u64,
                    };
                    out.push((position, e));
                }
            }
        }
        out
    }
}

/// A sink writing into a [`Wire`].
pub(super) struct MemorySink(pub(super) Arc<Wire>);

impl MemorySink {
    fn take_all(st: &mut WireState, bufs: &mut [Bytes]) {
        for b in bufs.iter_mut() {
            st.received.extend_from_slice(b);
            *b = Bytes::new();
        }
    }
}

impl SubscriberSink for MemorySink {
    fn write_now(&mut self, bufs: &mut [Bytes]) -> WriteNow {
        let mut st = self.0.state.lock();
        if st.broken {
            return WriteNow::Failed;
        }
        if st.stalled {
            return WriteNow::Blocked;
        }
        Self::take_all(&mut st, bufs);
        WriteNow::Done
    }

    fn write_all<'a>(
        &'a mut self,
        bufs: &'a mut [Bytes],
    ) -> SinkFuture<'a, Result<(), SinkClosed>> {
        Box::pin(async move {
            loop {
                let open = self.0.open.notified();
                tokio::pin!(open);
                open.as_mut().enable();
                {
                    let mut st = self.0.state.lock();
                    if st.broken {
                        return Err(SinkClosed);
                    }
                    if !st.stalled {
                        Self::take_all(&mut st, bufs);
                        return Ok(());
                    }
                }
                open.await;
            }
        })
    }

    fn finish(self: Box<Self>) -> SinkFuture<'static, ()> {
        self.0.state.lock().finished = true;
        Box::pin(async {})
    }
}

/// How a test engine is set up.
#[derive(Debug, Clone, Copy)]
pub(super) struct Setup {
    pub max_events: usize,
    pub replay_window: Duration,
    pub replay_max_bytes: usize,
    pub replay_max_total_bytes: usize,
    pub lanes: usize,
    pub queue_budget_bytes: u64,
    pub dedup_window: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Setup {
            max_events: 4,
            replay_window: Duration::from_secs(3600),
            replay_max_bytes: 64 << 20,
            replay_max_total_bytes: 256 << 20,
            lanes: 2,
            queue_budget_bytes: 1 << 30,
            dedup_window: Duration::from_secs(120),
        }
    }
}

/// The engine as the broker builds it, with memory sinks and a membership the test moves.
pub(super) struct Engine {
    pub topics: Arc<Topics>,
    pub lanes: Arc<Lanes>,
    pub counters: Arc<Counters>,
    owns: Arc<AtomicBool>,
    epoch: watch::Sender<u64>,
    next_id: u64,
}

/// The batch delay of test engines: whole seconds, so on the paused clock a deadline is never
/// within the high-resolution timer's reach (which keeps real time).
pub(super) const BATCH_DELAY: Duration = Duration::from_secs(1);

impl Engine {
    /// An engine owning its topics (call inside a runtime: the lanes start).
    pub(super) fn new(setup: Setup) -> Engine {
        let cfg = Profile::default().config();
        Engine::with_logs(setup, &cfg, Arc::new(NoPeers))
    }

    /// An engine whose durability comes from `cfg` (its `durable_topics` and `storage_dir`),
    /// reaching the other members' logs through `log_peers`.
    pub(super) fn with_logs(
        setup: Setup,
        cfg: &starling_config::BrokerConfig,
        log_peers: Arc<dyn crate::durable::transfer::LogPeers>,
    ) -> Engine {
        let counters = Arc::new(Counters::new(setup.lanes));
        let lanes = Lanes::spawn(
            64,
            8,
            starling_config::LaneShard::Auto,
            setup.queue_budget_bytes,
            Arc::clone(&counters),
            Arc::new(Unobserved),
        );
        let owns = Arc::new(AtomicBool::new(true));
        let (epoch, epoch_rx) = watch::channel(0u64);
        let registry = prometheus::Registry::new();
        let storage = crate::durable::StorageMetrics::register(&registry).expect("metrics");
        let settings = TopicSettings {
            limits: Limits {
                max_events: setup.max_events,
                max_bytes: 1 << 20,
                max_delay: BATCH_DELAY,
            },
            queue_depth: 64,
            idle_retire: Duration::from_secs(7200),
            replay_window: setup.replay_window,
            replay_max_bytes: setup.replay_max_bytes,
            replay_max_total_bytes: setup.replay_max_total_bytes,
            epoch: epoch_rx,
            owns: {
                let owns = Arc::clone(&owns);
                Arc::new(move |_: &str| owns.load(Ordering::SeqCst))
            },
            max_topics: 64,
            durability: Durability::new(cfg, storage),
            log_peers,
            replication: crate::durable::replicated::Replication::off(64),
            dedup: crate::pubsub::dedup::Limits {
                window: setup.dedup_window,
                max_ids: 1024,
            },
            dedup_max_total_bytes: 1 << 20,
            inboxes: Arc::new(crate::pubsub::inboxes::Inboxes::new(
                16,
                prometheus::IntCounter::new("evicted", "evicted").expect("counter"),
            )),
        };
        Engine {
            topics: Topics::new(settings, Arc::clone(&lanes)),
            lanes,
            counters,
            owns,
            epoch,
            next_id: 0,
        }
    }

    /// A membership change after which this broker owns its topics (`owns`) or not.
    pub(super) fn change_owner(&self, owns: bool) {
        self.owns.store(owns, Ordering::SeqCst);
        self.epoch.send_modify(|e| *e += 1);
    }

    /// A new subscriber of `topic` on a fresh wire.
    pub(super) fn subscriber(
        &mut self,
        topic: &str,
        policy: SlowSubscriberPolicy,
        capacity: usize,
    ) -> (Arc<Subscriber>, Arc<Wire>) {
        self.subscriber_as(topic, policy, capacity, false)
    }

    /// A new subscriber of `topic` on a fresh wire, granted `HEADERS` or not.
    pub(super) fn subscriber_as(
        &mut self,
        topic: &str,
        policy: SlowSubscriberPolicy,
        capacity: usize,
        headers: bool,
    ) -> (Arc<Subscriber>, Arc<Wire>) {
        self.subscriber_in(topic, None, policy, capacity, headers)
    }

    /// A new subscriber of `topic` (a topic, or a pattern) in queue group `group` (or none),
    /// on a fresh wire, granted `HEADERS` or not.
    pub(super) fn subscriber_in(
        &mut self,
        topic: &str,
        group: Option<&str>,
        policy: SlowSubscriberPolicy,
        capacity: usize,
        headers: bool,
    ) -> (Arc<Subscriber>, Arc<Wire>) {
        self.next_id += 1;
        let id = self.next_id;
        let wire = Arc::new(Wire::default());
        let sub = Subscriber::new(
            Identity {
                id,
                conn_id: id,
                lane: self.lanes.picker.pick(id, id),
                topic: Arc::from(topic),
                headers,
                group: group.map(Arc::from),
            },
            QueuePolicy { policy, capacity },
            Box::new(MemorySink(Arc::clone(&wire))),
            Arc::clone(&self.counters),
            Arc::clone(&self.lanes.queue_budget),
        );
        (Arc::new(sub), wire)
    }

    /// Subscribes a new subscriber from `start`; the catch-up channel when the topic holds it
    /// back (`may_catch_up`).
    pub(super) async fn subscribe(
        &mut self,
        topic: &str,
        policy: SlowSubscriberPolicy,
        capacity: usize,
        start: StartAt,
        may_catch_up: bool,
    ) -> (
        Arc<Subscriber>,
        Arc<Wire>,
        Option<oneshot::Receiver<Position>>,
    ) {
        let (sub, wire) = self.subscriber(topic, policy, capacity);
        self.topics.reserve(topic).expect("under max_topics");
        let behind = self.topics.subscribe(Arc::clone(&sub), start, may_catch_up);
        (sub, wire, behind)
    }

    /// Publishes `payloads` to `topic` as one request.
    pub(super) async fn publish(&self, topic: &str, payloads: Vec<Bytes>) {
        self.topics.reserve(topic).expect("under max_topics");
        let msg = TopicMsg {
            payloads,
            headers: Vec::new(),
            ack: None,
            origin: None,
            hold: None,
        };
        self.topics.publish(topic, msg).await;
    }

    /// Relays the owner's events `payloads` from `origin` into `topic`.
    pub(super) async fn relay(&self, topic: &str, origin: Position, payloads: Vec<Bytes>) {
        let msg = TopicMsg {
            payloads,
            headers: Vec::new(),
            ack: None,
            origin: Some(origin),
            hold: None,
        };
        self.topics.publish(topic, msg).await;
    }

    /// Seals `topic`'s open batch and fans it out.
    pub(super) async fn flush(&self, topic: &str) {
        within(self.topics.flush(topic)).await;
    }
}

/// Awaits `f`, failing the test if it never completes (on the paused clock a stuck run is
/// idle, so the clock jumps to this limit at once instead of hanging).
pub(super) async fn within<T>(f: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(24 * 3600), f)
        .await
        .expect("the engine got stuck")
}

/// Lets every task that can run, run (lanes write, topics deliver): on the current-thread
/// runtime this is the same every time.
pub(super) async fn quiesce() {
    for _ in 0..32 {
        tokio::task::yield_now().await;
    }
}

/// A payload naming message `n` (its first 8 bytes), `len` bytes long (at least 8).
pub(super) fn payload(n: u64, len: usize) -> Bytes {
    let mut b = BytesMut::with_capacity(len.max(8));
    b.extend_from_slice(&n.to_be_bytes());
    b.resize(len.max(8), 0xA5);
    b.freeze()
}

/// The message number a [`payload`] names.
pub(super) fn number(payload: &Bytes) -> u64 {
    let mut n = [0u8; 8];
    n.copy_from_slice(&payload[..8]);
    u64::from_be_bytes(n)
}
