//! The in-process cluster harness shared by the replica tests: replicas of one topic on a
//! [`SimNet`], each with its own data directory on its own [`FaultFs`] (a power cut keeps
//! only what was fsynced; a lost volume is a fresh `FaultFs`), and the checker of what
//! every live replica's committed log holds against what was acknowledged.
#![allow(dead_code)] // each test module uses part of it

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use starling_replica::{NodeId, ReplicaConfig, ReplicaError, ReplicatedTopic, SimNet};
use starling_storage::fault::FaultFs;

/// The topic's name in every test.
pub const TOPIC: &str = "t";

/// Settings for tests: the realistic heartbeat and election timeouts, small segments and
/// frequent snapshots so truncation, purge and snapshot installs happen in short runs.
pub fn test_config() -> ReplicaConfig {
    ReplicaConfig {
        segment_bytes: 16 * 1024,
        snapshot_every: 40,
        keep_after_snapshot: 10,
        max_entries_per_append: 64,
        ..ReplicaConfig::default()
    }
}

pub fn node(id: NodeId) -> BasicNode {
    BasicNode::new(format!("sim-{id}"))
}

struct Slot {
    fs: FaultFs,
    topic: Option<Arc<ReplicatedTopic<FaultFs>>>,
}

/// Replicas of one topic on a simulated network.
pub struct Cluster {
    pub net: SimNet,
    slots: BTreeMap<NodeId, Slot>,
    pub config: ReplicaConfig,
}

impl Cluster {
    /// Opens replicas `ids` (empty volumes) without bootstrapping the topic.
    pub async fn open_blank(seed: u64, ids: &[NodeId], config: ReplicaConfig) -> Cluster {
        let mut c = Cluster {
            net: SimNet::new(seed),
            slots: BTreeMap::new(),
            config,
        };
        for &id in ids {
            c.boot_new(id).await;
        }
        c
    }

    /// Starts replicas `ids` and bootstraps the topic with them as voters.
    pub async fn start(seed: u64, ids: &[NodeId], config: ReplicaConfig) -> Cluster {
        let net = SimNet::new(seed);
        let mut c = Cluster {
            net,
            slots: BTreeMap::new(),
            config,
        };
        for &id in ids {
            c.slots.insert(
                id,
                Slot {
                    fs: FaultFs::new(),
                    topic: None,
                },
            );
            c.boot(id).await;
        }
        for &id in ids {
            c.topic(id).founding();
        }
        let members = ids.iter().map(|&id| (id, node(id))).collect();
        c.topic(ids[0]).initialize(members).await.unwrap();
        c
    }

    /// Opens replica `id` on its file system and attaches it to the network.
    pub async fn boot(&mut self, id: NodeId) {
        let fs = self.slots.get(&id).unwrap().fs.clone();
        let topic = ReplicatedTopic::open(
            TOPIC,
            id,
            fs,
            Path::new("/data"),
            self.config,
            Arc::new(self.net.clone()),
        )
        .await
        .unwrap();
        self.net.register(id, topic.server());
        self.slots.get_mut(&id).unwrap().topic = Some(Arc::new(topic));
    }

    /// Adds a slot for a new replica (empty volume) and boots it.
    pub async fn boot_new(&mut self, id: NodeId) {
        self.slots.insert(
            id,
            Slot {
                fs: FaultFs::new(),
                topic: None,
            },
        );
        self.boot(id).await;
    }

    /// Stops replica `id`; with `power_loss`, its volume keeps only what was fsynced.
    pub async fn crash(&mut self, id: NodeId, power_loss: bool) {
        self.net.unregister(id);
        let slot = self.slots.get_mut(&id).unwrap();
        if let Some(t) = slot.topic.take() {
            let _ = t.shutdown().await;
        }
        if power_loss {
            slot.fs.crash(None);
        }
    }

    /// Stops replica `id` and gives it an empty volume (node and volume lost).
    pub async fn wipe(&mut self, id: NodeId) {
        self.crash(id, false).await;
        self.slots.get_mut(&id).unwrap().fs = FaultFs::new();
    }

    /// Stops and forgets replica `id` (removed from the topic).
    pub async fn retire(&mut self, id: NodeId) {
        self.crash(id, false).await;
        self.slots.remove(&id);
    }

    pub fn topic(&self, id: NodeId) -> Arc<ReplicatedTopic<FaultFs>> {
        Arc::clone(self.slots.get(&id).unwrap().topic.as_ref().unwrap())
    }

    /// The replicas running now.
    pub fn live(&self) -> Vec<NodeId> {
        self.slots
            .iter()
            .filter(|(_, s)| s.topic.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Every replica, running or not.
    pub fn ids(&self) -> Vec<NodeId> {
        self.slots.keys().copied().collect()
    }

    /// The running replica that is leader in the highest term, if any.
    pub fn leader(&self) -> Option<NodeId> {
        self.live()
            .into_iter()
            .map(|id| self.topic(id).status())
            .filter(|s| s.is_leader)
            .max_by_key(|s| s.term)
            .map(|s| s.id)
    }

    /// Waits (simulated time) until some running replica leads; `None` after `within`.
    pub async fn await_leader(&self, within: Duration) -> Option<NodeId> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(l) = self.leader() {
                return Some(l);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Publishes through the current leader, bounded by `within`.
    pub async fn publish(&self, messages: Vec<Vec<u8>>, within: Duration) -> Result<u64, String> {
        let Some(leader) = self.leader() else {
            return Err("no leader".into());
        };
        let topic = self.topic(leader);
        match tokio::time::timeout(within, topic.publish(messages)).await {
            Ok(Ok(p)) => Ok(p.seq),
            Ok(Err(ReplicaError::NotLeader { leader })) => Err(format!("not leader ({leader:?})")),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".into()),
        }
    }
}

/// What the checker holds: every acknowledged publish, and every (index → messages) any
/// replica's committed log was ever seen to hold.
#[derive(Default)]
pub struct Checker {
    pub acked: BTreeMap<u64, Vec<Vec<u8>>>,
    seen: BTreeMap<u64, Vec<Vec<u8>>>,
}

impl Checker {
    /// Records an acknowledged publish; no index is acknowledged twice.
    pub fn ack(&mut self, index: u64, messages: Vec<Vec<u8>>) {
        let before = self.acked.insert(index, messages);
        assert!(before.is_none(), "index {index} acknowledged twice");
    }

    /// Reads replica `id`'s whole committed log and checks it: indexes strictly grow, no
    /// message appears twice, and no index ever holds two different records (across
    /// replicas and across time).
    pub fn observe(
        &mut self,
        id: NodeId,
        topic: &ReplicatedTopic<FaultFs>,
    ) -> Vec<(u64, Vec<Vec<u8>>)> {
        let records = topic.read_committed(0, usize::MAX).unwrap();
        let mut last = None;
        let mut messages = BTreeSet::new();
        let mut out = Vec::new();
        for r in records {
            let messages_of: Vec<Vec<u8>> = r.messages.iter().map(|m| m.to_vec()).collect();
            assert!(
                last.is_none_or(|l| r.index > l),
                "replica {id}: index {} out of order",
                r.index
            );
            last = Some(r.index);
            for m in &messages_of {
                assert!(
                    messages.insert(m.clone()),
                    "replica {id}: message {m:?} twice"
                );
            }
            match self.seen.get(&r.index) {
                Some(prev) => {
                    assert_eq!(
                        prev, &messages_of,
                        "replica {id}: index {} changed",
                        r.index
                    )
                }
                None => {
                    self.seen.insert(r.index, messages_of.clone());
                }
            }
            out.push((r.index, messages_of));
        }
        out
    }

    /// The final check on a replica whose log is complete: every acknowledged publish is
    /// there, once, at its index, with its messages.
    pub fn check_complete(&mut self, id: NodeId, topic: &ReplicatedTopic<FaultFs>) {
        let log: BTreeMap<u64, Vec<Vec<u8>>> = self.observe(id, topic).into_iter().collect();
        for (index, messages) in &self.acked {
            assert_eq!(
                log.get(index),
                Some(messages),
                "replica {id}: acknowledged index {index} missing or different"
            );
        }
    }
}
