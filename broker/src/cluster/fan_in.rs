//! Fan-in for subscriptions that span owners: a client's wildcard subscription (`orders.>`),
//! its reply inbox (`_INBOX.<token>.>`) and a queue group of a pattern each reach topics that
//! many members own. The local topics serve the ones this broker owns (a topic task serves
//! pattern subscribers and queue groups only at the topic's owner, so a relay never hands
//! them a second copy); a [`Feed`] gets the rest. It holds ONE subscription of the same
//! pattern (and group) at every other member, as a peer, and queues what each sends straight
//! to the one subscriber it feeds, after the topic's `BatchTopic` as the topic task does. It
//! follows the membership: a member that joins gets a subscription, one that leaves loses
//! it, one whose link breaks is subscribed again after a pause.
//!
//! A plain client's queue-group member of ONE topic at a broker that does not own it is fed
//! the same way from the topic's owner alone (following the owner when it changes; nothing
//! while this broker owns it, whose topic serves the group): the owner's group then has one
//! member per such client, so the group's events are shared among all its members wherever
//! they connected (a relay here could only share its own copy among its own members).
//!
//! Each member serves its peers' pattern subscriptions for the topics it owns, so every
//! published event reaches the subscriber once, from its owner, in the owner's order (per
//! topic; topics owned by different members interleave in arrival order). A pattern group
//! is one member of the group at every owner, so the group's members share the events of
//! every matching topic wherever they connected. Like any live subscription, the feed is at
//! most once: events published while a member's link is down, or while a membership change
//! moves a topic between owners, may be missed.
//!
//! Hand-written over the SDK's `Direct` subscriptions (there is no library for a broker's own
//! fan-in); nothing here decides ownership: the topic tasks do, from the cluster's view.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_client::{ClientError, Subscription};
use starling_placement::Kind;
use starling_proto::{
    BatchTopic, ErrorCode, EventHeaders, Frame, StartAt, encode_event_batch,
    event_batch_encoded_len,
};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use super::peers::Peers;
use super::upstream::{RETRY_PAUSE, Run, gather};
use super::{Cluster, Member, Route};
use crate::metrics::Metrics;
use crate::pubsub::inboxes::Inboxes;
use crate::pubsub::lanes::Lanes;
use crate::pubsub::subscriber::{Frames, Outcome, Queued, Subscriber};

/// Pause before a member that refused the subscription (an older broker that serves no
/// patterns to peers, or one at a limit) is asked again.
const REFUSED_PAUSE: Duration = Duration::from_secs(5);

/// What a feed uses: the cluster's view, the peer links, the writer lanes (a fed subscriber
/// is handed to its lane like a topic task hands it), the reply inboxes (a request fed to a
/// responder lets it reply) and the metrics.
pub struct FanIn {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    lanes: Arc<Lanes>,
    inboxes: Arc<Inboxes>,
    metrics: Arc<Metrics>,
}

/// What a feed subscribes to, and where.
#[derive(Debug, Clone)]
struct Spec {
    /// The pattern, or the one topic.
    subject: String,
    /// The queue group, for a group member.
    group: Option<String>,
    /// One topic: subscribed at its owner only (else at every other member).
    single: bool,
}

/// Which members' subscriptions are open (subscribed and not ended), by member id.
#[derive(Default)]
struct LiveSet {
    members: parking_lot::Mutex<HashMap<String, bool>>,
    changed: Notify,
}

impl LiveSet {
    fn set(&self, id: &str, live: bool) {
        if let Some(v) = self.members.lock().get_mut(id) {
            *v = live;
        }
        self.changed.notify_waiters();
    }

    fn all_live(&self) -> bool {
        self.members.lock().values().all(|v| *v)
    }
}

/// One subscriber's feed from the other members. Dropping it ends every subscription it
/// holds.
pub struct Feed {
    manager: JoinHandle<()>,
    live: Arc<LiveSet>,
    go: watch::Sender<bool>,
}

impl Drop for Feed {
    fn drop(&mut self) {
        self.manager.abort();
    }
}

impl Feed {
    /// Waits until every current member's subscription is open, at most `within`; whether
    /// they all are. A publish made after this returned `true` reaches the subscriber from
    /// whichever member owns its topic.
    pub async fn wait_live(&self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            let changed = self.live.changed.notified();
            if self.live.all_live() {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.live.all_live();
            }
        }
    }

    /// Lets the feed queue events to the subscriber: call it once its `SubscribeOk` is queued,
    /// so no batch overtakes the answer. Until then the members' events wait in their streams.
    pub fn go(&self) {
        self.go.send_replace(true);
    }
}

/// Aborts a member's task when dropped (the manager's map holds one per member, so aborting
/// the manager ends them all).
struct MemberTask(JoinHandle<()>);

impl Drop for MemberTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl FanIn {
    /// Fan-in over `peers`, following `cluster`'s membership.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        lanes: Arc<Lanes>,
        inboxes: Arc<Inboxes>,
        metrics: Arc<Metrics>,
    ) -> Arc<FanIn> {
        Arc::new(FanIn {
            cluster,
            peers,
            lanes,
            inboxes,
            metrics,
        })
    }

    /// Starts feeding `sub` (a client's subscription to pattern `subject`, a reply inbox's
    /// included, in its queue group when it has one) from every other member; `None` for a
    /// broker that is not in a cluster.
    pub fn feed(self: &Arc<Self>, sub: Arc<Subscriber>, subject: &str) -> Option<Feed> {
        self.start(sub, subject, false)
    }

    /// Starts feeding `sub`, a plain client's member of a queue group of ONE topic,
    /// `topic`, from the topic's owner whenever that is another member; `None` for a broker
    /// that is not in a cluster.
    pub fn feed_group(self: &Arc<Self>, sub: Arc<Subscriber>, topic: &str) -> Option<Feed> {
        self.start(sub, topic, true)
    }

    fn start(self: &Arc<Self>, sub: Arc<Subscriber>, subject: &str, single: bool) -> Option<Feed> {
        if !self.cluster.is_clustered() {
            return None;
        }
        let spec = Spec {
            subject: subject.to_string(),
            group: sub.group.as_deref().map(str::to_string),
            single,
        };
        let live = Arc::new(LiveSet::default());
        let (go, go_rx) = watch::channel(false);
        // The members known now are waited for from the start (`wait_live`).
        for m in self.targets(&spec) {
            live.members.lock().insert(m.id.clone(), false);
        }
        let manager = tokio::spawn(manage(
            Arc::clone(self),
            sub,
            spec,
            Arc::clone(&live),
            go_rx,
        ));
        Some(Feed { manager, live, go })
    }

    /// The members a feed of `spec` subscribes at now: every member other than this broker,
    /// or for one topic its owner when that is another member.
    fn targets(&self, spec: &Spec) -> Vec<Member> {
        if spec.single {
            return match self.cluster.route(Kind::Topic, spec.subject.as_bytes()) {
                Route::Peer(owner) => vec![owner],
                Route::Local => Vec::new(),
            };
        }
        let view = self.cluster.view();
        view.current
            .members()
            .iter()
            .filter(|m| m.id != self.cluster.self_id())
            .cloned()
            .collect()
    }
}

/// Keeps one member task per target member ([`FanIn::targets`]), following the membership,
/// until the feed is dropped or its subscriber closes.
async fn manage(
    fan: Arc<FanIn>,
    sub: Arc<Subscriber>,
    spec: Spec,
    live: Arc<LiveSet>,
    go: watch::Receiver<bool>,
) {
    let mut changes = fan.cluster.changes();
    let mut tasks: HashMap<String, (Member, MemberTask)> = HashMap::new();
    loop {
        let others = fan.targets(&spec);
        tasks.retain(|id, (m, _)| others.iter().any(|o| o.id == *id && o.addr == m.addr));
        {
            let mut members = live.members.lock();
            members.retain(|id, _| others.iter().any(|o| o.id == *id));
            for m in &others {
                members.entry(m.id.clone()).or_insert(false);
            }
        }
        live.changed.notify_waiters();
        for m in others {
            if tasks.contains_key(&m.id) {
                continue;
            }
            let task = tokio::spawn(member(
                Arc::clone(&fan),
                Arc::clone(&sub),
                spec.clone(),
                m.clone(),
                Arc::clone(&live),
                go.clone(),
            ));
            tasks.insert(m.id.clone(), (m, MemberTask(task)));
        }
        tokio::select! {
            changed = changes.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = tokio::time::sleep(Duration::from_secs(1)) => {
                if sub.is_closed() {
                    return;
                }
            }
        }
    }
}

/// Subscribes to `spec` at member `m` and queues what it sends to `sub`, again after a pause
/// whenever the subscription ends, until aborted.
async fn member(
    fan: Arc<FanIn>,
    sub: Arc<Subscriber>,
    spec: Spec,
    m: Member,
    live: Arc<LiveSet>,
    mut go: watch::Receiver<bool>,
) {
    loop {
        if sub.is_closed() {
            return;
        }
        let pause = match subscribe(&fan, &spec, &m).await {
            Ok(up) => {
                live.set(&m.id, true);
                if go.wait_for(|g| *g).await.is_err() {
                    return;
                }
                relay(&fan, &sub, up).await;
                live.set(&m.id, false);
                RETRY_PAUSE
            }
            Err(pause) => pause,
        };
        tokio::time::sleep(pause).await;
    }
}

/// The subscription at `m`, or how long to wait before asking again.
async fn subscribe(fan: &FanIn, spec: &Spec, m: &Member) -> Result<Subscription, Duration> {
    let client = match fan.peers.client(m).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(subject = %spec.subject, member = %m.id, error = %e, "fan-in: member unavailable");
            return Err(RETRY_PAUSE);
        }
    };
    let subscribed = match &spec.group {
        Some(group) => client.subscribe_group(&spec.subject, group).await,
        None => client.subscribe_at(&spec.subject, StartAt::Live).await,
    };
    match subscribed {
        Ok(up) => {
            fan.metrics
                .cluster_forwarded
                .with_label_values(&["feed"])
                .inc();
            Ok(up)
        }
        Err(
            e @ ClientError::Server {
                code: ErrorCode::InvalidRequest | ErrorCode::Forbidden | ErrorCode::LimitExceeded,
                ..
            },
        ) => {
            // An older member that serves no patterns to peers, or one at a limit: asked
            // again later, not in a tight loop.
            tracing::info!(subject = %spec.subject, member = %m.id, error = %e, "fan-in: member refused the subscription");
            Err(REFUSED_PAUSE)
        }
        Err(e) => {
            if e.is_link_failure() {
                fan.peers.failed(m, &e).await;
            }
            tracing::debug!(subject = %spec.subject, member = %m.id, error = %e, "fan-in: subscribe failed");
            Err(RETRY_PAUSE)
        }
    }
}

/// Queues every run of events `up` delivers to `sub`, until `up` or `sub` ends.
async fn relay(fan: &FanIn, sub: &Arc<Subscriber>, mut up: Subscription) {
    let mut next = None;
    loop {
        let item = match next.take() {
            Some(item) => item,
            None => up.next_event().await,
        };
        let Some(Ok(first)) = item else {
            return;
        };
        let mut run = gather(first, &mut up);
        next = run.lookahead.take();
        if !offer(fan, sub, run).await {
            return;
        }
    }
}

/// Queues one run to `sub` as the topic task queues a wildcard subscriber's batch (its
/// `BatchTopic`, then its `EventHeaders` if the subscriber receives headers, then the
/// EventBatch), hands it to its lane when idle, and lets its connection reply to the requests
/// in it; `false` once `sub` is closed.
async fn offer(fan: &FanIn, sub: &Arc<Subscriber>, run: Run) -> bool {
    let events = u32::try_from(run.payloads.len()).unwrap_or(u32::MAX);
    let inboxes: Vec<String> = run
        .headers
        .iter()
        .filter_map(|h| starling_proto::request::reply_to(&h.headers))
        .map(str::to_string)
        .collect();
    let mut prefix = Frame::BatchTopic(BatchTopic {
        topic: run.topic.to_string(),
    })
    .to_bytes();
    if sub.headers && !run.headers.is_empty() {
        let headers = Frame::EventHeaders(EventHeaders {
            entries: run.headers,
        })
        .to_bytes();
        let mut both = BytesMut::with_capacity(prefix.len() + headers.len());
        both.extend_from_slice(&prefix);
        both.extend_from_slice(&headers);
        prefix = both.freeze();
    }
    let mut batch = BytesMut::with_capacity(event_batch_encoded_len(&run.payloads));
    encode_event_batch(run.origin.stream, run.origin.seq, &run.payloads, &mut batch);
    let item = Queued {
        frame: Frames::Tagged(prefix, Bytes::from(batch)),
        events,
        enqueued: Instant::now(),
    };
    let offer = sub.offer(item).await;
    if offer.schedule {
        fan.lanes.schedule(Arc::clone(sub)).await;
    }
    match offer.outcome {
        Outcome::Closed => false,
        Outcome::Queued | Outcome::QueuedDroppedOld => {
            if sub.headers {
                for inbox in &inboxes {
                    fan.inboxes.grant(sub.conn_id, inbox);
                }
            }
            true
        }
        Outcome::DroppedNew => true,
    }
}
