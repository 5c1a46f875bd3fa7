//! The topic registry: every live topic's handle, sharded by name so lookups don't contend on
//! one lock. It creates a topic (within `max_topics`) when a request first names it, starting
//! its task (`task.rs`), routes messages, subscriptions and flushes to it, and removes it
//! when its task retires it. It also holds the wildcard subscriptions (a pattern such as
//! `orders.*`): each is added to every live topic its pattern matches when it subscribes, and
//! to every matching topic created later, when its task starts.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use bytes::Bytes;
use parking_lot::RwLock;
use starling_access::Pattern;
use starling_proto::request::is_inbox;
use starling_proto::{Member, Position, StartAt};
use starling_storage::LogView;
use tokio::sync::{mpsc, oneshot};

use super::task::{self, CaughtUp, Control, Retire, Shared, TopicHandle};
use super::{TopicLimit, TopicMsg, TopicSettings};
use crate::pubsub::lanes::Lanes;
use crate::pubsub::subscriber::Subscriber;

const SHARDS: usize = 16;

/// Whether wildcard subscription `pattern` receives `topic`: it matches, and a reply inbox
/// (`_INBOX.…`) only by a pattern naming the inbox namespace itself (an inbox subscription,
/// checked against its connection's claim), never by `>` or `*.…`: a user allowed every topic
/// still does not see other connections' replies.
fn reaches(pattern: &Pattern, topic: &str) -> bool {
    pattern.matches(topic.as_bytes()) && (!is_inbox(topic) || is_inbox(pattern.as_str()))
}

/// All topics, sharded by name so lookups don't contend on one lock.
pub struct Topics {
    shards: Vec<RwLock<HashMap<Arc<str>, TopicHandle>>>,
    hasher: ahash::RandomState,
    shared: Arc<Shared>,
    /// The wildcard subscriptions, with their patterns. Lock order: a shard, then this (a new
    /// topic's task is given its wildcard subscribers under its shard's write lock); never a
    /// shard while holding this.
    wildcards: RwLock<Vec<(Pattern, Arc<Subscriber>)>>,
}

impl Topics {
    /// An empty registry whose topics hand their subscribers to `lanes` (and count in the
    /// lanes' counters).
    pub fn new(settings: TopicSettings, lanes: Arc<Lanes>) -> Arc<Topics> {
        Arc::new(Topics {
            shards: (0..SHARDS).map(|_| RwLock::new(HashMap::new())).collect(),
            hasher: ahash::RandomState::with_seeds(1, 2, 3, 4),
            shared: Arc::new(Shared {
                settings,
                counters: Arc::clone(lanes.counters()),
                lanes,
            }),
            wildcards: RwLock::new(Vec::new()),
        })
    }

    /// Topics in the registry (the `max_topics` cap's count).
    fn live(&self) -> &std::sync::atomic::AtomicU64 {
        &self.shared.counters.topics
    }

    /// Whether `topic` is durable here (`durable_topics`).
    pub fn is_durable(&self, topic: &str) -> bool {
        self.shared.settings.durability.is_durable(topic)
    }

    /// Whether `topic` is a replicated durable topic here (a replica count above 1 in a
    /// cluster, `durable::policy`): its publishes go to its Raft leader, not its placement
    /// owner.
    pub fn is_replicated(&self, topic: &str) -> bool {
        self.shared.settings.replication.is_replicated(topic) && self.is_durable(topic)
    }

    /// The largest message payload a publish to `topic` may carry, when its policy lowers it
    /// below `max_frame_bytes`.
    pub fn max_message_bytes(&self, topic: &str) -> Option<u32> {
        self.shared
            .settings
            .durability
            .policies()
            .max_message_bytes(topic)
    }

    /// Whether `topic` is a replicated durable topic and this broker one of its replicas
    /// (which delivers the topic's committed entries itself: no upstream from the owner).
    pub fn is_replica_here(&self, topic: &str) -> bool {
        self.is_replicated(topic) && self.shared.settings.replication.is_replica_here(topic)
    }

    /// The replicated topics' shared state.
    pub fn replication(&self) -> &Arc<crate::durable::replicated::Replication> {
        &self.shared.settings.replication
    }

    /// Makes sure `topic` exists, creating it unless `max_topics` topics are alive. Ingress
    /// calls it before accepting a publish or a subscription, so the budget is enforced where
    /// the client can still be told; the topic then exists when the request reaches it (a
    /// topic retired in between is created again, past the cap by at most the requests in
    /// flight).
    pub fn reserve(self: &Arc<Self>, topic: &str) -> Result<(), TopicLimit> {
        if self.shard(topic).read().contains_key(topic) {
            return Ok(());
        }
        let mut shard = self.shard(topic).write();
        if shard.contains_key(topic) {
            return Ok(());
        }
        let max = self.shared.settings.max_topics;
        if self.live().fetch_add(1, Ordering::AcqRel) >= max as u64 {
            self.live().fetch_sub(1, Ordering::AcqRel);
            return Err(TopicLimit { max });
        }
        self.spawn_topic(&mut shard, topic);
        Ok(())
    }

    fn shard(&self, topic: &str) -> &RwLock<HashMap<Arc<str>, TopicHandle>> {
        let i = (self.hasher.hash_one(topic) as usize) % SHARDS;
        &self.shards[i]
    }

    /// The handle of `topic`, created when absent, whatever the cap (for requests admitted by
    /// [`Topics::reserve`] and for the cluster's internal traffic).
    fn handle(self: &Arc<Self>, topic: &str) -> TopicHandle {
        if let Some(h) = self.shard(topic).read().get(topic) {
            return h.clone();
        }
        let mut shard = self.shard(topic).write();
        if let Some(h) = shard.get(topic) {
            return h.clone();
        }
        self.live().fetch_add(1, Ordering::AcqRel);
        self.spawn_topic(&mut shard, topic)
    }

    /// Registers `topic` in its (write-locked) shard and starts its task. `live` already
    /// counts it.
    fn spawn_topic(
        self: &Arc<Self>,
        shard: &mut HashMap<Arc<str>, TopicHandle>,
        topic: &str,
    ) -> TopicHandle {
        let name: Arc<str> = Arc::from(topic);
        let registry: Weak<dyn Retire> = Arc::downgrade(self) as Weak<Topics>;
        let handle = task::start(Arc::clone(&name), &self.shared, registry);
        // Before the topic can be looked up, so its wildcard subscribers are there before any
        // message (the task reads its control channel first).
        for (pattern, sub) in self.wildcards.read().iter() {
            if reaches(pattern, &name) {
                let _ = handle.control.send(Control::Wildcard(Arc::clone(sub)));
            }
        }
        shard.insert(name, handle.clone());
        handle
    }

    /// Adds a wildcard subscriber: to every live topic `pattern` matches now, and to every
    /// matching topic created later. Live batches only, each after its topic's `BatchTopic`.
    /// A topic created meanwhile may be given it twice; its task keeps one.
    pub fn subscribe_pattern(&self, sub: Arc<Subscriber>, pattern: Pattern) {
        self.wildcards
            .write()
            .push((pattern.clone(), Arc::clone(&sub)));
        self.each_match(&pattern, |control| {
            let _ = control.send(Control::Wildcard(Arc::clone(&sub)));
        });
    }

    /// Removes a wildcard subscriber from the registry and from every topic it was added to,
    /// and closes it.
    pub fn unsubscribe_pattern(&self, sub: &Subscriber, pattern: &Pattern) {
        sub.close();
        self.wildcards.write().retain(|(_, s)| s.id != sub.id);
        self.each_match(pattern, |control| {
            let _ = control.send(Control::Unsubscribe(sub.id));
        });
    }

    /// Whether some open wildcard subscription reaches `topic` (a request's responders, with
    /// the plain subscriptions `Subscriptions` counts).
    pub fn pattern_subscribed(&self, topic: &str) -> bool {
        self.wildcards
            .read()
            .iter()
            .any(|(pattern, sub)| !sub.is_closed() && reaches(pattern, topic))
    }

    /// The reply inboxes' claims and grants.
    pub fn inboxes(&self) -> &Arc<crate::pubsub::inboxes::Inboxes> {
        &self.shared.settings.inboxes
    }

    /// How many wildcard subscriptions are registered.
    pub fn wildcard_subscriptions(&self) -> usize {
        self.wildcards.read().len()
    }

    /// Calls `f` with the control channel of every live topic `pattern` matches, under its
    /// shard's read lock (so a topic cannot retire between the match and the send: a retiring
    /// task finds the control message and stays).
    fn each_match(&self, pattern: &Pattern, mut f: impl FnMut(&mpsc::UnboundedSender<Control>)) {
        for shard in &self.shards {
            let shard = shard.read();
            for (name, handle) in shard.iter() {
                if reaches(pattern, name) {
                    f(&handle.control);
                }
            }
        }
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

    /// Adds a subscriber to a topic. With a resume position (or a time, turned into the
    /// position of the first batch stamped at or after it), what the topic holds from there on
    /// and the subscriber has not seen is queued to it first (see
    /// [`Retained::replay`](crate::pubsub::retained::Retained::replay)). At a broker that does
    /// not own the topic, a resume position its retained tail does not reach back to is
    /// answered on the returned channel instead: the subscriber is held back until a catch-up
    /// from the owner, started from that position, feeds it up to the tail
    /// ([`Topics::catch_up`]), if `may_catch_up` (the caller then runs the catch-up; else the
    /// tail alone serves it, as does dropping the receiver).
    pub fn subscribe(
        self: &Arc<Self>,
        sub: Arc<Subscriber>,
        start: StartAt,
        may_catch_up: bool,
    ) -> Option<oneshot::Receiver<Position>> {
        let (behind, rx) = if may_catch_up {
            let (tx, rx) = oneshot::channel();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let topic = Arc::clone(&sub.topic);
        let mut msg = Control::Subscribe { sub, start, behind };
        loop {
            match self.handle(&topic).control.send(msg) {
                Ok(()) => return rx,
                // The topic retired between lookup and send: look it up again.
                Err(mpsc::error::SendError(back)) => msg = back,
            }
        }
    }

    /// Queues a catch-up run (`payloads` from the owner's `origin` on) to the held-back
    /// subscriber `id` of `topic` (see [`Topics::subscribe`]); an empty run lets it join with
    /// what the retained tail holds. What became of it: still behind, joined, or gone.
    pub async fn catch_up(
        &self,
        topic: &str,
        id: u64,
        origin: Position,
        payloads: Vec<Bytes>,
    ) -> CaughtUp {
        let control = self
            .shard(topic)
            .read()
            .get(topic)
            .map(|h| h.control.clone());
        let Some(control) = control else {
            // A topic holding a subscriber back does not retire: it is gone.
            return CaughtUp::Gone;
        };
        let (reply, answer) = oneshot::channel();
        let msg = Control::CatchUp {
            id,
            origin,
            payloads,
            reply,
        };
        if control.send(msg).is_err() {
            return CaughtUp::Gone;
        }
        answer.await.unwrap_or(CaughtUp::Gone)
    }

    /// One past the last event `topic` delivered, in the newest stream it delivered; `None`
    /// for a topic without state or that delivered nothing yet.
    pub fn reached(&self, topic: &str) -> Option<Position> {
        let reached = self
            .shard(topic)
            .read()
            .get(topic)
            .map(|h| Arc::clone(&h.reached))?;
        *reached.lock()
    }

    /// Seals `topic`'s open batch and fans it out; returns once done (at once for a topic
    /// without state).
    pub async fn flush(&self, topic: &str) {
        let control = self
            .shard(topic)
            .read()
            .get(topic)
            .map(|h| h.control.clone());
        if let Some(control) = control {
            let (tx, rx) = oneshot::channel();
            if control.send(Control::Flush(tx)).is_ok() {
                let _ = rx.await;
            }
        }
    }

    /// The log of durable topic `topic` as this broker holds it, for another member taking
    /// the topic over (`None` when it holds none on disk: nothing is created for the asking),
    /// and whether this broker owns the topic in its own view (its log may still grow).
    pub async fn log_view(self: &Arc<Self>, topic: &str) -> (Option<LogView>, bool) {
        if !self.shared.settings.durability.has_log(topic) {
            return (None, (self.shared.settings.owns)(topic));
        }
        loop {
            let (tx, rx) = oneshot::channel();
            match self.handle(topic).control.send(Control::LogView(tx)) {
                Ok(()) => {
                    return rx
                        .await
                        .unwrap_or_else(|_| (None, (self.shared.settings.owns)(topic)));
                }
                // Retired between lookup and send: look it up again.
                Err(_) => continue,
            }
        }
    }

    /// Member `from` holds a log of durable topic `topic`, owned here: the topic copies what
    /// its log lacks from there; the number of records copied.
    pub async fn claim(self: &Arc<Self>, topic: &str, from: Member) -> Result<u64, String> {
        if !self.shared.settings.durability.is_durable(topic) {
            return Err(format!("`{topic}` is not a durable topic here"));
        }
        let mut from = from;
        loop {
            let (tx, rx) = oneshot::channel();
            match self.handle(topic).control.send(Control::Claim(from, tx)) {
                Ok(()) => {
                    return rx
                        .await
                        .unwrap_or_else(|_| Err("the topic stopped".to_string()));
                }
                Err(mpsc::error::SendError(Control::Claim(back, _))) => from = back,
                Err(_) => return Err("the topic stopped".to_string()),
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
}

impl Retire for Topics {
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
        self.live().fetch_sub(1, Ordering::AcqRel);
        true
    }
}
