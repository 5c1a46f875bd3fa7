//! Durable topics across owner changes, the cluster's side (see `durable::transfer` for the
//! owner's copy and `docs/architecture.md`, "Durable topics across owner changes").
//!
//! - [`PeerLogs`]: the topic task's way to the other members' logs ([`LogPeers`]): the
//!   current members and, during the hand-off window, the previous ones, read over the peer
//!   links (`LogRead`).
//! - [`LogClaims`]: after a membership change, this broker tells the owner of every durable
//!   topic it holds a log of but no longer owns (`LogClaim`); the owner copies what it lacks
//!   before it answers. A claim the owner cannot take yet (it has not seen the change, or is
//!   unreachable) is retried every poll interval; the drain makes one last round. The local
//!   topic is flushed first, so a batch it accepted just before the change is in the log
//!   the owner reads.
//!
//! The former owner keeps its log: its volume is retained (the StatefulSet's PVC retention),
//! and if it owns the topic again it copies what the others appended meanwhile.

use std::collections::HashSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use starling_placement::Kind;
use starling_proto::{LogChunk, LogRead, Member as WireMember};
use tokio::sync::{Mutex, watch};

use super::peers::Peers;
use super::{Cluster, Member, Route};
use crate::durable::Durability;
use crate::durable::transfer::{LogPeers, PeerError, PeerFuture};
use crate::pubsub::topic::Topics;

/// Longest an owner may take to copy a claimed log before the claim is tried again.
const CLAIM_TIMEOUT: Duration = Duration::from_secs(120);

/// The other members' logs, over the peer links.
pub struct PeerLogs {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
}

impl PeerLogs {
    /// Reads logs at `cluster`'s members over `peers`.
    pub fn new(cluster: Arc<Cluster>, peers: Arc<Peers>) -> PeerLogs {
        PeerLogs { cluster, peers }
    }
}

impl LogPeers for PeerLogs {
    fn members(&self) -> Vec<WireMember> {
        if !self.cluster.is_clustered() {
            return Vec::new();
        }
        let view = self.cluster.view();
        let previous = self.cluster.previous_members();
        let me = self.cluster.self_id();
        let mut seen = HashSet::new();
        view.current
            .members()
            .iter()
            .chain(previous.iter())
            .filter(|m| m.id != me && seen.insert(m.id.clone()))
            .map(|m| WireMember {
                id: m.id.clone(),
                addr: m.addr.clone(),
            })
            .collect()
    }

    fn source(&self, topic: &str) -> Option<String> {
        self.cluster
            .handoff_source(Kind::Topic, topic.as_bytes())
            .map(|m| m.id)
    }

    fn read<'a>(&'a self, member: &'a WireMember, read: LogRead) -> PeerFuture<'a, LogChunk> {
        Box::pin(async move {
            let member = Member {
                id: member.id.clone(),
                addr: member.addr.clone(),
            };
            let client = self
                .peers
                .client(&member)
                .await
                .map_err(|e| PeerError::Unreachable(e.to_string()))?;
            match client
                .log_read(&read.topic, read.from, read.max_bytes)
                .await
            {
                Ok(chunk) => Ok(chunk),
                Err(e) if e.is_link_failure() => {
                    self.peers.failed(&member, &e).await;
                    Err(PeerError::Unreachable(e.to_string()))
                }
                Err(e) => {
                    self.peers.failed(&member, &e).await;
                    Err(PeerError::Refused(e.to_string()))
                }
            }
        })
    }
}

/// What a claim round achieved.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Claimed {
    /// Topics whose owner took the claim.
    pub taken: usize,
    /// Topics whose owner could not take it yet.
    pub left: usize,
}

/// Claims of the durable topics this broker holds logs of but no longer owns.
pub struct LogClaims {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    topics: Arc<Topics>,
    durability: Arc<Durability>,
    /// Topics whose claim the owner took in the current epoch.
    taken: Mutex<(u64, HashSet<String>)>,
    /// This broker's member address, as last seen in a member list.
    addr: parking_lot::Mutex<Option<String>>,
}

impl LogClaims {
    /// Claims for the logs of `durability`, sent over `peers` by `cluster`'s view.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        topics: Arc<Topics>,
        durability: Arc<Durability>,
    ) -> LogClaims {
        let own_addr = cluster
            .view()
            .current
            .members()
            .iter()
            .find(|m| m.id == cluster.self_id())
            .map(|m| m.addr.clone());
        LogClaims {
            cluster,
            peers,
            topics,
            durability,
            taken: Mutex::new((0, HashSet::new())),
            addr: parking_lot::Mutex::new(own_addr),
        }
    }

    /// Sends a claim for every durable topic held here and owned by another member, except
    /// those already taken in this epoch.
    pub async fn round(&self) -> Claimed {
        let mut done = Claimed::default();
        let view = self.cluster.view();
        let me = self.cluster.self_id().to_string();
        // How the owner reaches this broker: its entry in the current list or, after it was
        // removed (a scale-down), in the previous one, or the last one it was in.
        let seen = view
            .current
            .members()
            .iter()
            .chain(view.previous.iter().flat_map(|p| p.members().iter()))
            .find(|m| m.id == me)
            .map(|m| m.addr.clone());
        let addr = {
            let mut known = self.addr.lock();
            if seen.is_some() {
                *known = seen;
            }
            known.clone()
        };
        let Some(addr) = addr else {
            return done;
        };
        let durability = Arc::clone(&self.durability);
        let Ok(on_disk) = tokio::task::spawn_blocking(move || durability.topics_on_disk()).await
        else {
            return done;
        };
        let epoch = self.cluster.epoch();
        let mut taken = self.taken.lock().await;
        if taken.0 != epoch {
            *taken = (epoch, HashSet::new());
        }
        for topic in on_disk {
            // A replicated topic's replicas are its copies: nothing is handed over.
            if taken.1.contains(&topic) || self.topics.is_replicated(&topic) {
                continue;
            }
            let Route::Peer(owner) = self.cluster.route(Kind::Topic, topic.as_bytes()) else {
                continue;
            };
            // A batch the local topic accepted just before the change goes to the log first.
            self.topics.flush(&topic).await;
            match self.claim(&owner, &topic, &me, &addr).await {
                Ok(records) => {
                    tracing::info!(topic, owner = %owner.id, records, "durable hand-off: the owner took this broker's log");
                    taken.1.insert(topic);
                    done.taken += 1;
                }
                Err(why) => {
                    tracing::debug!(topic, owner = %owner.id, error = %why, "durable hand-off: the owner did not take the claim yet");
                    done.left += 1;
                }
            }
        }
        done
    }

    async fn claim(
        &self,
        owner: &Member,
        topic: &str,
        me: &str,
        addr: &str,
    ) -> Result<u64, String> {
        let client = self.peers.client(owner).await.map_err(|e| e.to_string())?;
        match client.log_claim(topic, me, addr, CLAIM_TIMEOUT).await {
            Ok(records) => Ok(records),
            Err(e) => {
                if e.is_link_failure() {
                    self.peers.failed(owner, &e).await;
                }
                Err(e.to_string())
            }
        }
    }
}

/// Runs a claim round on every membership change and, while claims are left, every `every`.
pub async fn run(
    claims: Weak<LogClaims>,
    mut changes: watch::Receiver<u64>,
    every: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut pending = false;
    loop {
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            () = tokio::time::sleep(every), if pending => {}
            _ = stop.changed() => return,
        }
        let Some(claims) = claims.upgrade() else {
            return;
        };
        pending = claims.round().await.left > 0;
    }
}
