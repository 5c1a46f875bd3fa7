//! Clustering: who the members are ([`members`], read by [`source`]), which member owns each
//! topic and cache key (the shared rendezvous function), the links to the other members
//! ([`peers`], each a [`peer_client::PeerClient`]: the SDK's `Direct` link with the calls only
//! members make of each other), the upstream subscriptions a non-owner holds for its own subscribers
//! ([`upstream`]) and the catch-ups from the owner for one resuming from before its retained
//! tail ([`catchup`]), the feeds of a client's wildcard subscriptions, reply inboxes and
//! pattern groups from every other member ([`fan_in`]), the cache hand-off after a membership change ([`handoff`]), the durable logs'
//! hand-off to a topic's new owner ([`log_peers`]), the Raft RPCs of replicated topics
//! ([`replica_link`]), and the requests handed to another member on the ingress's behalf
//! ([`forward`]). Nothing here imports the
//! ingress (`server`): each part holds its own handles.
//!
//! [`Cluster`] is the shared state: the current member list and the previous one (for the
//! hand-off window). A broker without a member source is a cluster of one. Members authenticate
//! each other by their peer certificates (see `auth::decide` and [`peers`]).

pub mod catchup;
pub mod fan_in;
pub mod forward;
pub mod handoff;
pub mod log_peers;
pub mod members;
pub mod peer_client;
pub mod peers;
pub mod pod_ips;
pub mod replica_link;
pub mod source;
pub mod upstream;

use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_placement::Kind;
use starling_proto::ClusterInfo;
use tokio::sync::watch;

use crate::metrics::Metrics;
pub use members::{Member, MemberSet, MembersError};

/// What a connection said it is in its `Hello` (the mapping to feature bits is the protocol's).
pub use starling_proto::Role;

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// This broker owns it.
    Local,
    /// Another member owns it.
    Peer(Member),
}

/// The member lists this broker routes on.
#[derive(Debug, Clone)]
pub struct View {
    /// The current list.
    pub current: MemberSet,
    /// The list before the last change, while the hand-off window lasts.
    pub previous: Option<MemberSet>,
    /// When the current list was applied.
    pub changed_at: Instant,
}

/// Shared clustering state.
pub struct Cluster {
    self_id: String,
    clustered: bool,
    view: parking_lot::RwLock<Arc<View>>,
    changes: watch::Sender<u64>,
    handoff_window: Duration,
    started_at: Instant,
    metrics: Arc<Metrics>,
}

impl Cluster {
    /// A cluster of `initial`, as seen by member `self_id`. `clustered` is false for a
    /// single-node broker (no member source).
    pub fn new(
        self_id: String,
        initial: MemberSet,
        clustered: bool,
        handoff_window: Duration,
        metrics: Arc<Metrics>,
    ) -> Cluster {
        let (changes, _) = watch::channel(initial.epoch());
        let cluster = Cluster {
            self_id,
            clustered,
            view: parking_lot::RwLock::new(Arc::new(View {
                current: initial,
                previous: None,
                changed_at: Instant::now(),
            })),
            changes,
            handoff_window,
            started_at: Instant::now(),
            metrics,
        };
        cluster.export();
        cluster
    }

    /// This broker's member id.
    pub fn self_id(&self) -> &str {
        &self.self_id
    }

    /// Whether a member source is configured.
    pub fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// The current view.
    pub fn view(&self) -> Arc<View> {
        Arc::clone(&self.view.read())
    }

    /// The current epoch.
    pub fn epoch(&self) -> u64 {
        self.view.read().current.epoch()
    }

    /// Notified with the new epoch on every membership change.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Applies a freshly read member list; true when it changed anything.
    pub fn apply(&self, set: MemberSet) -> bool {
        {
            let mut view = self.view.write();
            if view.current == set {
                return false;
            }
            tracing::info!(
                epoch = set.epoch(),
                members = ?set.members().iter().map(|m| m.id.as_str()).collect::<Vec<_>>(),
                is_member = set.contains(&self.self_id),
                "cluster membership changed"
            );
            *view = Arc::new(View {
                previous: Some(view.current.clone()),
                current: set,
                changed_at: Instant::now(),
            });
        }
        self.metrics.cluster_membership_changes.inc();
        self.export();
        self.changes.send_replace(self.epoch());
        true
    }

    fn export(&self) {
        let view = self.view.read();
        let n = i64::try_from(view.current.members().len()).unwrap_or(i64::MAX);
        self.metrics.cluster_members.set(n);
        self.metrics
            .cluster_is_member
            .set(i64::from(view.current.contains(&self.self_id)));
    }

    /// Where a request for `key` of `kind` goes.
    pub fn route(&self, kind: Kind, key: &[u8]) -> Route {
        route_in(&self.view.read().current, &self.self_id, kind, key)
    }

    /// [`Cluster::route`], and the epoch of the view it was decided in.
    pub fn route_at(&self, kind: Kind, key: &[u8]) -> (Route, u64) {
        let view = self.view.read();
        (
            route_in(&view.current, &self.self_id, kind, key),
            view.current.epoch(),
        )
    }

    /// The members before the last change while the hand-off window after it is open.
    pub fn previous_members(&self) -> Vec<Member> {
        let view = self.view.read();
        match &view.previous {
            Some(p) if view.changed_at.elapsed() <= self.handoff_window => p.members().to_vec(),
            _ => Vec::new(),
        }
    }

    /// The member that owned `key` before the last change, when that was another member, the
    /// hand-off window is still open and the key's owner changed.
    pub fn previous_owner(&self, kind: Kind, key: &[u8]) -> Option<Member> {
        let view = self.view.read();
        let previous = view.previous.as_ref()?;
        if view.changed_at.elapsed() > self.handoff_window {
            return None;
        }
        let before = previous.owner(kind, key)?;
        let now = view.current.owner(kind, key);
        (before.id != self.self_id && now.map(|m| &m.id) != Some(&before.id))
            .then(|| before.clone())
    }

    /// Whether this broker owned `key` before the last membership change, while the hand-off
    /// window after it is open.
    pub fn owned_before_change(&self, kind: Kind, key: &[u8]) -> bool {
        let view = self.view.read();
        view.changed_at.elapsed() <= self.handoff_window
            && view
                .previous
                .as_ref()
                .and_then(|p| p.owner(kind, key))
                .is_some_and(|m| m.id == self.self_id)
    }

    /// The member to ask on a cache miss at the owner: the key's previous owner while the
    /// hand-off window after a membership change is open, or, while the window after this
    /// broker's own start is open, the member that owned the key in this broker's absence
    /// (where its drain pushed it).
    pub fn handoff_source(&self, kind: Kind, key: &[u8]) -> Option<Member> {
        if !self.clustered {
            return None;
        }
        if let Some(m) = self.previous_owner(kind, key) {
            return Some(m);
        }
        if self.started_at.elapsed() > self.handoff_window {
            return None;
        }
        let view = self.view.read();
        if view.current.owner(kind, key).map(|m| m.id.as_str()) != Some(self.self_id.as_str()) {
            return None;
        }
        let others: Vec<Member> = view
            .current
            .members()
            .iter()
            .filter(|m| m.id != self.self_id)
            .cloned()
            .collect();
        MemberSet::new(others).ok()?.owner(kind, key).cloned()
    }

    /// The `ClusterInfo` answer.
    pub fn info(&self, request_id: u64) -> ClusterInfo {
        let view = self.view.read();
        ClusterInfo {
            request_id,
            epoch: view.current.epoch(),
            members: view
                .current
                .members()
                .iter()
                .map(|m| starling_proto::Member {
                    id: m.id.clone(),
                    addr: m.addr.clone(),
                })
                .collect(),
        }
    }
}

/// Where `key` goes in `set`, seen from member `self_id`.
pub fn route_in(set: &MemberSet, self_id: &str, kind: Kind, key: &[u8]) -> Route {
    match set.owner(kind, key) {
        Some(m) if m.id != self_id => Route::Peer(m.clone()),
        _ => Route::Local,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[&str]) -> MemberSet {
        MemberSet::new(
            ids.iter()
                .map(|id| Member {
                    id: (*id).to_string(),
                    addr: format!("{id}:1"),
                })
                .collect(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn cluster(ids: &[&str], me: &str) -> Cluster {
        let metrics = Arc::new(Metrics::new().unwrap_or_else(|e| panic!("{e}")));
        Cluster::new(me.into(), set(ids), true, Duration::from_secs(30), metrics)
    }

    #[test]
    fn routes_follow_the_owner() {
        let c = cluster(&["a", "b", "c"], "a");
        let mut local = 0;
        for i in 0..300 {
            let key = format!("t{i}");
            match c.route(Kind::Topic, key.as_bytes()) {
                Route::Local => local += 1,
                Route::Peer(m) => assert_ne!(m.id, "a"),
            }
        }
        assert!((60..140).contains(&local), "{local}");
    }

    #[test]
    fn a_non_member_owns_nothing() {
        let c = cluster(&["a", "b"], "z");
        for i in 0..50 {
            assert!(matches!(
                c.route(Kind::CacheKey, format!("k{i}").as_bytes()),
                Route::Peer(_)
            ));
        }
    }

    #[test]
    fn apply_keeps_the_previous_owner_for_the_handoff() {
        let c = cluster(&["a", "b"], "a");
        let rx = c.changes();
        assert!(c.apply(set(&["a", "b", "c"])));
        assert!(!c.apply(set(&["a", "b", "c"])));
        assert!(rx.has_changed().unwrap_or(false));
        let moved_from_b = (0..2000)
            .map(|i| format!("k{i}"))
            .filter(|k| {
                c.previous_owner(Kind::CacheKey, k.as_bytes())
                    .is_some_and(|m| m.id == "b")
            })
            .count();
        // About a third of b's half moved to c.
        assert!((200..480).contains(&moved_from_b), "{moved_from_b}");
    }
}
