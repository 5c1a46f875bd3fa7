//! Topics: the registry, and the task that owns each topic's batch, sequence numbers and
//! subscriber list.
//!
//! Data flows one way: a publish worker sends messages to the topic's bounded channel; the topic
//! task batches them (count, bytes, delay), encodes each EventBatch once, offers the shared
//! frame to every subscriber queue, hands ready subscribers to their writer lanes, and then
//! completes the batch's commit acks. A full channel makes publish workers wait, which stops
//! the broker reading publisher streams, which lets QUIC flow control push back.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use parking_lot::RwLock;
use starling_proto::{ErrorCode, encode_event_batch, event_batch_encoded_len};
use tokio::sync::{mpsc, oneshot};

use crate::metrics::Metrics;
use crate::pubsub::ack::AckToken;
use crate::pubsub::batcher::{Batch, Batcher, Limits};
use crate::pubsub::lanes::Lanes;
use crate::pubsub::subscriber::{Outcome, Queued, Subscriber};
use crate::timer;

/// Messages published to a topic in one request.
#[derive(Debug)]
pub struct TopicMsg {
    /// Payloads in order.
    pub payloads: Vec<Bytes>,
    /// The commit ack to complete once they are enqueued to every subscriber.
    pub ack: Option<AckToken>,
}

enum Control {
    Subscribe(Arc<Subscriber>),
    Unsubscribe(u64),
    Flush(oneshot::Sender<()>),
}

#[derive(Clone)]
struct TopicHandle {
    data: mpsc::Sender<TopicMsg>,
    control: mpsc::UnboundedSender<Control>,
}

/// Settings every topic task shares.
pub struct TopicSettings {
    /// Batch limits.
    pub limits: Limits,
    /// Capacity of each topic's inbound channel (`pub_queue_depth`).
    pub queue_depth: usize,
    /// A topic with no subscribers and no traffic for this long is retired.
    pub idle_retire: Duration,
}

struct Shared {
    settings: TopicSettings,
    metrics: Arc<Metrics>,
    lanes: Arc<Lanes>,
}

const SHARDS: usize = 16;

/// All topics, sharded by name so lookups don't contend on one lock.
pub struct Topics {
    shards: Vec<RwLock<HashMap<Arc<str>, TopicHandle>>>,
    hasher: ahash::RandomState,
    shared: Arc<Shared>,
}

impl Topics {
    /// An empty registry.
    pub fn new(settings: TopicSettings, metrics: Arc<Metrics>, lanes: Arc<Lanes>) -> Arc<Topics> {
        Arc::new(Topics {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
            shared: Arc::new(Shared {
                settings,
                metrics,
                lanes,
            }),
        })
    }

    fn shard(&self, topic: &str) -> &RwLock<HashMap<Arc<str>, TopicHandle>> {
        let i = (self.hasher.hash_one(topic) as usize) % SHARDS;
        &self.shards[i]
    }

    fn handle(self: &Arc<Self>, topic: &str) -> TopicHandle {
        if let Some(h) = self.shard(topic).read().get(topic) {
            return h.clone();
        }
        let mut shard = self.shard(topic).write();
        if let Some(h) = shard.get(topic) {
            return h.clone();
        }
        let name: Arc<str> = Arc::from(topic);
        let (data_tx, data_rx) = mpsc::channel(self.shared.settings.queue_depth.max(1));
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let handle = TopicHandle {
            data: data_tx,
            control: control_tx,
        };
        shard.insert(Arc::clone(&name), handle.clone());
        self.shared.metrics.topics.inc();
        let task = TopicTask {
            name,
            data: data_rx,
            control: control_rx,
            batcher: Batcher::new(self.shared.settings.limits),
            subscribers: Vec::new(),
            next_seq: 0,
            topics: Arc::downgrade(self),
            shared: Arc::clone(&self.shared),
        };
        tokio::spawn(task.run());
        handle
    }

    /// Sends messages to a topic, waiting while its queue is full.
    pub async fn publish(self: &Arc<Self>, topic: &str, mut msg: TopicMsg) {
        loop {
            let handle = self.handle(topic);
            match handle.data.send(msg).await {
                Ok(()) => return,
                // The topic retired between lookup and send: look it up again.
                Err(mpsc::error::SendError(back)) => msg = back,
            }
        }
    }

    /// Adds a subscriber to a topic.
    pub fn subscribe(self: &Arc<Self>, sub: Arc<Subscriber>) {
        let mut sub = sub;
        loop {
            let handle = self.handle(&sub.topic);
            match handle.control.send(Control::Subscribe(sub)) {
                Ok(()) => return,
                Err(mpsc::error::SendError(Control::Subscribe(back))) => sub = back,
                Err(_) => return,
            }
        }
    }

    /// Removes a subscriber from its topic and closes it.
    pub fn unsubscribe(&self, sub: &Subscriber) {
        sub.close();
        if let Some(h) = self.shard(&sub.topic).read().get(&*sub.topic) {
            let _ = h.control.send(Control::Unsubscribe(sub.id));
        }
    }

    /// Seals every topic's open batch and fans it out; returns once every topic has done so.
    pub async fn flush_all(&self) {
        let mut waits = Vec::new();
        for shard in &self.shards {
            for h in shard.read().values() {
                let (tx, rx) = oneshot::channel();
                if h.control.send(Control::Flush(tx)).is_ok() {
                    waits.push(rx);
                }
            }
        }
        for rx in waits {
            let _ = rx.await;
        }
    }

    /// Number of live topics.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.read().len()).sum()
    }

    /// Whether there are no topics.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes an idle topic from the registry. Under the shard's write lock nobody can look
    /// the topic up, so if the registry holds the only senders and both queues are empty, no
    /// message or subscription can still reach the task.
    fn retire(
        &self,
        name: &str,
        data: &mpsc::Receiver<TopicMsg>,
        control: &mpsc::UnboundedReceiver<Control>,
    ) -> bool {
        let mut shard = self.shard(name).write();
        let idle = data.is_empty()
            && control.is_empty()
            && data.sender_strong_count() == 1
            && control.sender_strong_count() == 1;
        if !idle {
            return false;
        }
        shard.remove(name);
        self.shared.metrics.topics.dec();
        true
    }
}

struct TopicTask {
    name: Arc<str>,
    data: mpsc::Receiver<TopicMsg>,
    control: mpsc::UnboundedReceiver<Control>,
    batcher: Batcher<AckToken>,
    subscribers: Vec<Arc<Subscriber>>,
    next_seq: u64,
    topics: std::sync::Weak<Topics>,
    shared: Arc<Shared>,
}

impl TopicTask {
    async fn run(mut self) {
        let idle = self.shared.settings.idle_retire;
        let mut last_activity = Instant::now();
        loop {
            let deadline = self.batcher.deadline();
            let idle_at = (self.subscribers.is_empty() && self.batcher.is_empty())
                .then(|| last_activity + idle);
            tokio::select! {
                biased;
                ctl = self.control.recv() => match ctl {
                    Some(ctl) => self.on_control(ctl).await,
                    None => break,
                },
                _ = maybe_sleep(deadline) => self.batcher.poll_deadline(Instant::now()),
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
                _ = maybe_sleep(idle_at) => {
                    if let Some(topics) = self.topics.upgrade()
                        && topics.retire(&self.name, &self.data, &self.control)
                    {
                        break;
                    }
                    last_activity = Instant::now();
                }
            }
            while let Some(batch) = self.batcher.pop_ready() {
                self.fanout(batch).await;
            }
        }
        // Retired (or the broker is shutting down): anything still queued is flushed first.
        self.batcher.flush();
        while let Some(batch) = self.batcher.pop_ready() {
            self.fanout(batch).await;
        }
    }

    /// Whether sealed batches are waiting (stop draining the channel and deliver them).
    fn drain_ready_pending(&self) -> bool {
        !self.batcher.is_empty() && self.batcher.deadline().is_none()
    }

    fn accept(&mut self, msg: TopicMsg, now: Instant) {
        let n = msg.payloads.len();
        let mut ack = msg.ack;
        for (i, payload) in msg.payloads.into_iter().enumerate() {
            // The ack rides on the request's last message, so it completes after all of them.
            let attach = if i + 1 == n { ack.take() } else { None };
            self.batcher.push(payload, attach, now);
        }
        if let Some(ack) = ack {
            ack.ack(); // an empty batch publish
        }
    }

    async fn on_control(&mut self, ctl: Control) {
        match ctl {
            Control::Subscribe(sub) => {
                if !sub.is_closed() {
                    self.subscribers.push(sub);
                }
            }
            Control::Unsubscribe(id) => self.subscribers.retain(|s| s.id != id),
            Control::Flush(done) => {
                while let Ok(more) = self.data.try_recv() {
                    self.accept(more, Instant::now());
                }
                self.batcher.flush();
                while let Some(batch) = self.batcher.pop_ready() {
                    self.fanout(batch).await;
                }
                let _ = done.send(());
            }
        }
    }

    async fn fanout(&mut self, batch: Batch<AckToken>) {
        let m = &self.shared.metrics;
        let events = batch.payloads.len();
        let first_seq = self.next_seq;
        self.next_seq += events as u64;
        let mut buf = BytesMut::with_capacity(event_batch_encoded_len(&batch.payloads));
        encode_event_batch(first_seq, &batch.payloads, &mut buf);
        let frame = buf.freeze();
        m.batch_events.observe(events as f64);
        m.batch_bytes.observe(batch.bytes as f64);
        m.batch_flushes
            .with_label_values(&[batch.trigger.label()])
            .inc();

        let now = Instant::now();
        let mut refused = 0usize;
        let mut closed = false;
        for sub in &self.subscribers {
            let item = Queued {
                frame: frame.clone(),
                events: events as u32,
                enqueued: now,
            };
            let offer = sub.offer(item).await;
            if offer.schedule {
                self.shared.lanes.schedule(Arc::clone(sub)).await;
            }
            match offer.outcome {
                Outcome::DroppedNew => refused += 1,
                Outcome::Closed => closed = true,
                Outcome::Queued | Outcome::QueuedDroppedOld => {}
            }
        }
        if closed {
            self.subscribers.retain(|s| !s.is_closed());
        }
        for ack in batch.attached {
            if refused == 0 {
                ack.ack();
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
    }
}

async fn maybe_sleep(deadline: Option<Instant>) {
    match deadline {
        Some(d) => timer::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
