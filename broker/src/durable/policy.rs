//! Per-topic durability: what the topics document in force (`topics_file`,
//! `starling_config::topics`) and the durability knobs decide for one topic ([`decide`], pure),
//! and the document in force on this broker ([`Policies`]), which the reload
//! (`durable::topics_file`) replaces.
//!
//! A topic is durable when a policy matches it or `durable_topics` names it; each setting a
//! matching policy leaves unset, and every setting of a topic no policy matches, takes the
//! knob (`durable_replicas`, `storage_fsync`, `storage_retention_max_bytes`,
//! `storage_retention_max_age_ms`, `max_frame_bytes`). Outside a cluster a durable topic
//! has one copy whatever its replicas say.
//!
//! **What a changed document changes, and when.** Retention and the largest message payload
//! follow the document in force at once, on open topics too: every open log, single-copy or
//! a replicated topic's committed log on each of its replicas, reads its retention at each
//! run from [`Policies::live_retention`], and the publish path reads the largest payload at
//! each publish. The replica count of a topic whose
//! replicated log is open here follows it between 3 and 5: the topic's mover (on the Raft
//! leader) moves the membership to the new count. The rest is decided for a topic when its
//! task starts on this broker and kept until it ends ([`Policies::pin`]): whether the topic
//! is durable, whether its log is single-copy or replicated (a change between 1 and 3 or 5
//! is a change of log kind: it is not made on an open topic, which keeps its kind, and so
//! its current replica count, 1, or 3 or 5, until its task next starts here: after a
//! restart, or a single-copy topic's retirement), and the fsync mode of its log. `GET
//! /storage` and `GET /replicas` show the configured count beside the current one.
//!
//! **Brokers that disagree.** The operator's ConfigMap reaches the brokers one kubelet sync
//! apart, so for a while members hold different documents. The rule: once a replicated
//! topic exists, its committed Raft membership is the truth; only its leader's mover changes
//! it, towards the count in the leader's document; a follower's document changes nothing of
//! the membership (a follower deletes its copy only once it is out of a committed
//! membership and out of the set its own document gives). So the count a topic converges to
//! is the leader's document's, and once every member holds the new document, every leader
//! moves to it. A leader change while documents differ may move a topic back and forth once
//! per change; each move keeps a quorum of caught-up voters (`replicated::mover`).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
use starling_access::Pattern;
use starling_config::topics::CompiledTopics;
use starling_config::{BrokerConfig, StorageFsync};
use starling_storage::{RetentionPolicy, RetentionSource};
use tokio::sync::watch;

/// The knobs a topic's durability falls back to.
#[derive(Debug, Clone)]
pub struct Knobs {
    /// `durable_topics`, parsed (a pattern that does not parse, which config validation
    /// refuses first, makes no topic durable).
    pub durable_topics: Vec<Pattern>,
    /// `durable_replicas`.
    pub replicas: u32,
    /// `storage_fsync`.
    pub fsync: StorageFsync,
    /// `storage_retention_max_bytes` (0: none).
    pub retention_max_bytes: u64,
    /// `storage_retention_max_age_ms` (0: none).
    pub retention_max_age_ms: u64,
    /// `max_frame_bytes`.
    pub max_frame_bytes: u32,
}

impl Knobs {
    /// The knobs of `cfg`.
    pub fn of(cfg: &BrokerConfig) -> Knobs {
        Knobs {
            durable_topics: cfg
                .durable_topics
                .iter()
                .filter_map(|p| Pattern::parse(p).ok())
                .collect(),
            replicas: cfg.durable_replicas,
            fsync: cfg.storage_fsync,
            retention_max_bytes: cfg.storage_retention_max_bytes,
            retention_max_age_ms: cfg.storage_retention_max_age_ms,
            max_frame_bytes: cfg.max_frame_bytes,
        }
    }
}

/// What applies to one topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDurability {
    /// The name of the policy that matched, if one did.
    pub policy: Option<String>,
    /// Whether the topic is durable (a policy matched, or `durable_topics` names it).
    pub durable: bool,
    /// Copies of its log (1, 3 or 5; a broker outside a cluster keeps one).
    pub replicas: u32,
    /// When its log is fsynced.
    pub fsync: StorageFsync,
    /// What its log keeps.
    pub retention: RetentionPolicy,
    /// The largest message payload a publish to it may carry.
    pub max_message_bytes: u32,
}

fn nonzero(v: u64) -> Option<u64> {
    (v > 0).then_some(v)
}

/// What `doc` and `knobs` decide for `topic` (see the module doc).
pub fn decide(doc: &CompiledTopics, knobs: &Knobs, topic: &str) -> TopicDurability {
    let policy = doc.policy_for(topic);
    let listed = || {
        knobs
            .durable_topics
            .iter()
            .any(|p| p.matches(topic.as_bytes()))
    };
    TopicDurability {
        policy: policy.map(|p| p.name.clone()),
        durable: policy.is_some() || listed(),
        replicas: policy.and_then(|p| p.replicas).unwrap_or(knobs.replicas),
        fsync: policy.and_then(|p| p.fsync).unwrap_or(knobs.fsync),
        retention: RetentionPolicy {
            max_bytes: nonzero(
                policy
                    .and_then(|p| p.retention_max_bytes)
                    .unwrap_or(knobs.retention_max_bytes),
            ),
            max_age_ms: nonzero(
                policy
                    .and_then(|p| p.retention_max_age_ms)
                    .unwrap_or(knobs.retention_max_age_ms),
            ),
        },
        max_message_bytes: policy
            .and_then(|p| p.max_message_bytes)
            .unwrap_or(knobs.max_frame_bytes)
            .min(knobs.max_frame_bytes),
    }
}

/// What a topic's task decided when it started, kept while it runs (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pinned {
    /// Whether the topic is durable.
    pub durable: bool,
    /// The replica count it opened with (1: a single-copy log, or not durable).
    pub replicas: u32,
    /// When its log is fsynced (decided at the log's open).
    pub fsync: StorageFsync,
    /// Which task pinned it (a task that ends unpins only its own).
    pub task: u64,
}

/// The topics document in force on this broker, and what each running topic task pinned.
#[derive(Debug)]
pub struct Policies {
    knobs: Knobs,
    /// Whether this broker is in a cluster (replicas above 1 apply only there).
    clustered: bool,
    doc: RwLock<Arc<CompiledTopics>>,
    /// One entry per running topic task that asked ([`Policies::pin`]); removed when the task
    /// ends, so it holds at most `max_topics` entries.
    pinned: RwLock<HashMap<Arc<str>, Pinned>>,
    /// The last [`Pinned::task`] given out.
    tasks: AtomicU64,
    /// Bumped at each [`Policies::install`] (replicated topics' tasks without their replica
    /// open try again then).
    changes: watch::Sender<u64>,
}

impl Policies {
    /// The policies of `doc` over the knobs of `cfg`.
    pub fn new(cfg: &BrokerConfig, doc: CompiledTopics) -> Arc<Policies> {
        Arc::new(Policies {
            knobs: Knobs::of(cfg),
            clustered: cfg.cluster_members_file.is_some()
                || cfg.cluster_members_configmap.is_some(),
            doc: RwLock::new(Arc::new(doc)),
            pinned: RwLock::default(),
            tasks: AtomicU64::new(0),
            changes: watch::Sender::new(0),
        })
    }

    /// Puts `doc` in force; the number of policies it holds.
    pub fn install(&self, doc: CompiledTopics) -> usize {
        let n = doc.len();
        *self.doc.write() = Arc::new(doc);
        self.changes.send_modify(|n| *n += 1);
        n
    }

    /// Each [`Policies::install`], from now on.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The document in force.
    pub fn in_force(&self) -> Arc<CompiledTopics> {
        Arc::clone(&self.doc.read())
    }

    /// What the document in force decides for `topic` (the configured values; a broker
    /// outside a cluster keeps one copy).
    pub fn configured(&self, topic: &str) -> TopicDurability {
        let doc = self.in_force();
        let mut d = decide(&doc, &self.knobs, topic);
        if !self.clustered {
            d.replicas = 1;
        }
        d
    }

    /// Whether `topic` is durable here: as its running task pinned it, else as configured.
    pub fn is_durable(&self, topic: &str) -> bool {
        match self.pinned.read().get(topic) {
            Some(p) => p.durable,
            None => self.configured(topic).durable,
        }
    }

    /// Whether `topic` has (or gets, at its task's start) a replicated log here.
    pub fn is_replicated(&self, topic: &str) -> bool {
        match self.pinned.read().get(topic) {
            Some(p) => p.durable && p.replicas > 1,
            None => {
                let d = self.configured(topic);
                d.durable && d.replicas > 1
            }
        }
    }

    /// The replica count `topic`'s replicated log should have now: the configured count when
    /// it is above 1 (3 and 5 are moved between live; the pin follows it), else the last
    /// count above 1 its task had (a change to 1 is a change of log kind, made at its task's
    /// next start). 1 for a topic whose task opened a single-copy log.
    pub fn replicas_now(&self, topic: &str) -> u32 {
        let configured = self.configured(topic).replicas;
        let pinned = self.pinned.read().get(topic).copied();
        match pinned {
            None => configured,
            Some(p) if p.replicas <= 1 => 1,
            Some(p) if configured <= 1 => p.replicas,
            Some(p) => {
                if p.replicas != configured
                    && let Some(entry) = self.pinned.write().get_mut(topic)
                    && entry.task == p.task
                {
                    entry.replicas = configured;
                }
                configured
            }
        }
    }

    /// The current replica count of `topic` on this broker: what its running task holds
    /// (1 for a single-copy log; a replicated log's count as [`Policies::replicas_now`] moves
    /// it), `None` without a running task.
    pub fn current_replicas(&self, topic: &str) -> Option<u32> {
        self.pinned.read().get(topic)?;
        Some(self.replicas_now(topic))
    }

    /// Records what `topic`'s task decided at its start, and returns it; the task calls
    /// [`Policies::unpin`] when it ends.
    pub fn pin(&self, topic: &Arc<str>) -> Pinned {
        let d = self.configured(topic);
        let pinned = Pinned {
            durable: d.durable,
            replicas: if d.durable { d.replicas.max(1) } else { 1 },
            fsync: d.fsync,
            task: self.tasks.fetch_add(1, Ordering::Relaxed) + 1,
        };
        self.pinned.write().insert(Arc::clone(topic), pinned);
        pinned
    }

    /// Forgets what `topic`'s ended task `task` pinned (not what a newer task of the topic
    /// pinned since).
    pub fn unpin(&self, topic: &str, task: u64) {
        let mut pinned = self.pinned.write();
        if pinned.get(topic).is_some_and(|p| p.task == task) {
            pinned.remove(topic);
        }
    }

    /// The fsync mode `topic`'s log opens with: as its running task pinned it, else as
    /// configured.
    pub fn fsync_at_open(&self, topic: &str) -> StorageFsync {
        match self.pinned.read().get(topic) {
            Some(p) => p.fsync,
            None => self.configured(topic).fsync,
        }
    }

    /// The retention `topic`'s log keeps now.
    pub fn retention(&self, topic: &str) -> RetentionPolicy {
        self.configured(topic).retention
    }

    /// Where an open log of `topic` reads its retention at each run ([`LiveRetention`]):
    /// [`Policies::retention`], so a changed document reaches the open log. The one source
    /// of both a single-copy log (`durable::log`) and a replicated topic's committed log
    /// (`durable::replicated::topic`).
    pub fn live_retention(self: &Arc<Self>, topic: &str) -> Arc<dyn RetentionSource> {
        Arc::new(LiveRetention {
            policies: Arc::clone(self),
            topic: Arc::from(topic),
        })
    }

    /// The largest message payload a publish to `topic` may carry now, when a policy lowers
    /// it below `max_frame_bytes` (which the decoder enforces for every topic).
    pub fn max_message_bytes(&self, topic: &str) -> Option<u32> {
        let doc = self.in_force();
        if doc.is_empty() {
            return None;
        }
        let d = decide(&doc, &self.knobs, topic);
        (d.max_message_bytes < self.knobs.max_frame_bytes).then_some(d.max_message_bytes)
    }
}

/// One topic's retention as the document in force gives it now ([`Policies::live_retention`]).
#[derive(Debug)]
struct LiveRetention {
    policies: Arc<Policies>,
    topic: Arc<str>,
}

impl RetentionSource for LiveRetention {
    fn retention_now(&self) -> RetentionPolicy {
        self.policies.retention(&self.topic)
    }
}

/// One durable topic open here, as `GET /storage` reports it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TopicReport {
    /// The topic.
    pub topic: String,
    /// The name of the policy that applies to it (`None`: none does; the knobs apply).
    pub policy: Option<String>,
    /// The replica count the document in force gives it.
    pub configured_replicas: u32,
    /// The replica count its open log has here (1: single-copy; a replicated log's count as
    /// this broker moves it, `/replicas` shows its Raft voters).
    pub current_replicas: u32,
    /// Its log's fsync mode in force (the document's when the topic's task started).
    pub fsync: StorageFsync,
    /// The fsync mode the document in force gives it (in force at the log's next open).
    pub configured_fsync: StorageFsync,
    /// Its retention in force: most bytes (`None`: no limit).
    pub retention_max_bytes: Option<u64>,
    /// Its retention in force: most age in ms (`None`: no limit).
    pub retention_max_age_ms: Option<u64>,
    /// The largest message payload a publish to it may carry now.
    pub max_message_bytes: u32,
}

impl Policies {
    /// The durable topics whose tasks run here, by name, with what applies to each.
    pub fn open_topics(&self) -> Vec<TopicReport> {
        let mut open: Vec<(Arc<str>, Pinned)> = self
            .pinned
            .read()
            .iter()
            .filter(|(_, p)| p.durable)
            .map(|(t, p)| (Arc::clone(t), *p))
            .collect();
        open.sort_by(|a, b| a.0.cmp(&b.0));
        open.into_iter()
            .map(|(topic, pinned)| {
                let d = self.configured(&topic);
                TopicReport {
                    current_replicas: self.current_replicas(&topic).unwrap_or(pinned.replicas),
                    topic: topic.to_string(),
                    policy: d.policy,
                    configured_replicas: d.replicas,
                    fsync: pinned.fsync,
                    configured_fsync: d.fsync,
                    retention_max_bytes: d.retention.max_bytes,
                    retention_max_age_ms: d.retention.max_age_ms,
                    max_message_bytes: d.max_message_bytes,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use starling_config::topics::{TopicPolicy, TopicsDocument};

    use super::*;

    fn knobs() -> Knobs {
        Knobs {
            durable_topics: vec![Pattern::parse("audit.>").unwrap()],
            replicas: 1,
            fsync: StorageFsync::Interval,
            retention_max_bytes: 1000,
            retention_max_age_ms: 0,
            max_frame_bytes: 1 << 20,
        }
    }

    fn doc(policies: Vec<TopicPolicy>) -> CompiledTopics {
        CompiledTopics::new(TopicsDocument::new(policies))
    }

    #[test]
    fn a_policy_makes_its_topics_durable_with_its_settings_and_the_knobs_fill_the_rest() {
        let mut orders = TopicPolicy::new("orders", "orders.*");
        orders.replicas = Some(3);
        orders.retention_max_age_ms = Some(60_000);
        orders.max_message_bytes = Some(512);
        let mut exact = TopicPolicy::new("paid", "orders.paid");
        exact.fsync = Some(StorageFsync::Always);
        exact.retention_max_bytes = Some(0);
        let doc = doc(vec![orders, exact]);
        let k = knobs();

        let d = decide(&doc, &k, "orders.new");
        assert_eq!(d.policy.as_deref(), Some("orders"));
        assert!(d.durable);
        assert_eq!(d.replicas, 3);
        assert_eq!(d.fsync, StorageFsync::Interval, "the knob");
        assert_eq!(d.retention.max_bytes, Some(1000), "the knob");
        assert_eq!(d.retention.max_age_ms, Some(60_000));
        assert_eq!(d.max_message_bytes, 512);

        // The most specific policy wins whole: its unset settings take the knobs, not the
        // broader policy's.
        let d = decide(&doc, &k, "orders.paid");
        assert_eq!(d.policy.as_deref(), Some("paid"));
        assert_eq!(d.replicas, 1);
        assert_eq!(d.fsync, StorageFsync::Always);
        assert_eq!(d.retention.max_bytes, None, "0 is no limit");
        assert_eq!(d.max_message_bytes, 1 << 20);

        let d = decide(&doc, &k, "audit.login");
        assert_eq!(d.policy, None);
        assert!(d.durable, "durable_topics still names it");
        assert_eq!(d.retention.max_bytes, Some(1000));

        let d = decide(&doc, &k, "chat");
        assert!(!d.durable);
        assert_eq!(d.policy, None);
    }

    fn policies(clustered: bool, doc: CompiledTopics) -> Arc<Policies> {
        let mut cfg = starling_config::Profile::Balanced.config();
        cfg.durable_topics = vec!["audit.>".into()];
        cfg.max_frame_bytes = 1 << 20;
        if clustered {
            cfg.cluster_members_file = Some("/nonexistent/members".into());
        }
        Policies::new(&cfg, doc)
    }

    fn replicated(name: &str, pattern: &str, n: u32) -> TopicPolicy {
        let mut p = TopicPolicy::new(name, pattern);
        p.replicas = Some(n);
        p
    }

    #[test]
    fn replicas_apply_only_in_a_cluster_and_a_kind_change_waits_for_the_next_start() {
        let alone = policies(false, doc(vec![replicated("o", "orders.*", 3)]));
        assert_eq!(alone.configured("orders.x").replicas, 1);
        assert!(!alone.is_replicated("orders.x"));

        let p = policies(true, doc(vec![replicated("o", "orders.*", 3)]));
        let topic: Arc<str> = Arc::from("orders.x");
        assert!(p.is_replicated(&topic));
        assert_eq!(p.current_replicas(&topic), None, "no task yet");
        let pin = p.pin(&topic);
        assert_eq!(pin.replicas, 3);
        assert_eq!(p.current_replicas(&topic), Some(3));

        // 3 -> 5 is moved live.
        p.install(doc(vec![replicated("o", "orders.*", 5)]));
        assert_eq!(p.replicas_now(&topic), 5);
        assert_eq!(p.current_replicas(&topic), Some(5));
        // 5 -> 1 is a change of kind: the open topic stays replicated at its count.
        p.install(doc(vec![replicated("o", "orders.*", 1)]));
        assert!(p.is_replicated(&topic));
        assert_eq!(p.replicas_now(&topic), 5, "the last count above 1");
        assert_eq!(p.configured(&topic).replicas, 1);
        p.unpin(&topic, pin.task + 1);
        assert!(p.is_replicated(&topic), "another task's unpin leaves it");
        p.unpin(&topic, pin.task);
        assert!(
            !p.is_replicated(&topic),
            "the next start takes the document's"
        );

        // And a single-copy topic stays single-copy while its task runs.
        let single: Arc<str> = Arc::from("orders.y");
        assert_eq!(p.pin(&single).replicas, 1);
        p.install(doc(vec![replicated("o", "orders.*", 3)]));
        assert!(!p.is_replicated(&single));
        assert_eq!(p.replicas_now(&single), 1);
        assert_eq!(p.current_replicas(&single), Some(1));
        assert_eq!(p.configured(&single).replicas, 3);

        // A topic made durable while its task runs is not, until the task starts again.
        let chat: Arc<str> = Arc::from("chat");
        let pin = p.pin(&chat);
        assert!(!pin.durable);
        p.install(doc(vec![TopicPolicy::new("chat", "chat")]));
        assert!(!p.is_durable(&chat));
        p.unpin(&chat, pin.task);
        assert!(p.is_durable(&chat));
    }

    #[test]
    fn retention_and_the_largest_message_follow_the_document_in_force() {
        let mut small = TopicPolicy::new("small", "orders.*");
        small.max_message_bytes = Some(100);
        small.retention_max_bytes = Some(5);
        let p = policies(false, doc(vec![small]));
        let topic: Arc<str> = Arc::from("orders.x");
        p.pin(&topic);
        assert_eq!(p.max_message_bytes(&topic), Some(100));
        assert_eq!(p.retention(&topic).max_bytes, Some(5));
        assert_eq!(
            p.max_message_bytes("chat"),
            None,
            "no policy: the decoder's bound"
        );
        p.install(doc(vec![TopicPolicy::new("any", "orders.*")]));
        assert_eq!(p.max_message_bytes(&topic), None);
        assert_eq!(p.retention(&topic).max_bytes, None, "the knob: none");
    }
}
