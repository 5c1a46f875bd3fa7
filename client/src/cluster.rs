//! Cluster routing for [`Client`](crate::Client): the membership learned with `ClusterInfo`,
//! the owner of each topic and cache key (the rendezvous function shared with the brokers,
//! `starling-placement`), one [`Node`] per member opened on first use, and the fallback to the
//! bootstrap broker (which forwards) when a member's address cannot be reached from here.
//!
//! Member connections are opened in the background, never in a request's path: until a
//! member's connection is up (or while its address is unreachable, e.g. pod DNS names seen from
//! outside Kubernetes), its requests go through the bootstrap broker. Failed members are retried
//! with a growing pause (10 s doubling to 5 min).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_placement::Kind;
use starling_proto::{ClusterInfo, Member};

use crate::ClientError;
use crate::config::ClientConfig;
use crate::handshake::Role;
use crate::node::Node;

/// How long the connections to a member that left the view stay open for the subscriptions
/// still on them.
const LEFT_MEMBER_GRACE: Duration = Duration::from_secs(10);
/// First pause before a member whose address could not be reached is tried again.
const RETRY_FIRST: Duration = Duration::from_secs(10);
/// Longest pause between attempts.
const RETRY_MAX: Duration = Duration::from_secs(300);
/// How long [`Router::warm_up`] waits for the member connections.
const WARM_UP: Duration = Duration::from_secs(2);

/// Where one request goes.
pub(crate) enum Target {
    /// Straight to the owning member (its node and id).
    Member(Arc<Node>, String),
    /// Through the bootstrap broker, which forwards.
    Bootstrap,
}

/// The routing table: membership, epoch and the member nodes.
pub(crate) struct Router {
    template: ClientConfig,
    view: parking_lot::RwLock<Arc<ClusterInfo>>,
    links: parking_lot::Mutex<HashMap<String, Arc<Link>>>,
}

/// The connection to one member, opened in the background.
struct Link {
    addr: String,
    state: parking_lot::Mutex<LinkState>,
    ready: tokio::sync::Notify,
}

#[derive(Default)]
struct LinkState {
    node: Option<Arc<Node>>,
    connecting: bool,
    retry_at: Option<Instant>,
    failures: u32,
}

impl Router {
    /// A router for the membership `info`; member nodes use `template`'s trust and tuning.
    pub(crate) fn new(template: &ClientConfig, info: ClusterInfo) -> Self {
        Router {
            template: template.clone(),
            view: parking_lot::RwLock::new(Arc::new(info)),
            links: parking_lot::Mutex::new(HashMap::new()),
        }
    }

    /// Whether `info` describes a cluster worth routing over (more than one member).
    pub(crate) fn is_cluster(info: &ClusterInfo) -> bool {
        info.members.len() > 1
    }

    /// The membership epoch currently routed on.
    pub(crate) fn epoch(&self) -> u64 {
        self.view.read().epoch
    }

    /// Forgets member `id`'s connection after it failed; requests go through the bootstrap
    /// broker until a background attempt reconnects.
    pub(crate) fn failed(&self, id: &str) {
        let link = self.links.lock().get(id).cloned();
        if let Some(link) = link {
            let mut state = link.state.lock();
            if let Some(node) = state.node.take() {
                tokio::spawn(async move { node.close().await });
            }
            state.retry_at = Some(Instant::now() + retry_pause(0));
        }
    }

    /// Replaces the membership (links to members that left are closed); true on a change.
    pub(crate) fn update(&self, info: ClusterInfo) -> bool {
        if info.epoch == self.epoch() {
            return false;
        }
        let keep: HashMap<&str, &str> = info
            .members
            .iter()
            .map(|m| (m.id.as_str(), m.addr.as_str()))
            .collect();
        let gone: Vec<Arc<Link>> = {
            let mut links = self.links.lock();
            let stale: Vec<String> = links
                .iter()
                .filter(|(id, link)| keep.get(id.as_str()) != Some(&link.addr.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            stale.iter().filter_map(|id| links.remove(id)).collect()
        };
        tracing::debug!(
            epoch = info.epoch,
            members = info.members.len(),
            "cluster membership"
        );
        *self.view.write() = Arc::new(info);
        for link in gone {
            if let Some(node) = link.state.lock().node.take() {
                // Not at once: a member that left may not know it yet and still accept
                // publishes as a topic's owner. Its subscriptions stay until it ends them (with
                // `Moved` once it learns of the change, or by draining), and the relay then
                // resumes at the new owner.
                tokio::spawn(async move {
                    tokio::time::sleep(LEFT_MEMBER_GRACE).await;
                    node.close().await
                });
            }
        }
        true
    }

    /// The member owning `key` of `kind` in the current view.
    pub(crate) fn owner(&self, kind: Kind, key: &[u8]) -> Option<Member> {
        let view = self.view.read();
        let id = starling_placement::owner(view.members.iter().map(|m| m.id.as_str()), kind, key)?;
        view.members.iter().find(|m| m.id == id).cloned()
    }

    /// Where a request for `key` of `kind` goes. Never waits for a connection.
    pub(crate) fn target(&self, kind: Kind, key: &[u8]) -> Target {
        if !Router::is_cluster(&self.view.read()) {
            return Target::Bootstrap;
        }
        let Some(member) = self.owner(kind, key) else {
            return Target::Bootstrap;
        };
        let link = self.link(&member);
        if let Some(node) = self.node_or_connect(&member, &link) {
            return Target::Member(node, member.id);
        }
        Target::Bootstrap
    }

    /// Starts connecting to every member and waits (at most 2 s) until each connected or
    /// failed, so a client inside the cluster routes directly from its first request.
    pub(crate) async fn warm_up(&self) {
        let members = self.view.read().members.clone();
        if members.len() <= 1 {
            return;
        }
        let waits = members.iter().map(|m| {
            let link = self.link(m);
            let waiting = link.state.lock().node.is_none();
            let _ = self.node_or_connect(m, &link);
            async move {
                if waiting {
                    let _ = tokio::time::timeout(WARM_UP, link.ready.notified()).await;
                }
            }
        });
        futures::future::join_all(waits).await;
    }

    fn link(&self, member: &Member) -> Arc<Link> {
        let mut links = self.links.lock();
        Arc::clone(links.entry(member.id.clone()).or_insert_with(|| {
            Arc::new(Link {
                addr: member.addr.clone(),
                state: parking_lot::Mutex::new(LinkState::default()),
                ready: tokio::sync::Notify::new(),
            })
        }))
    }

    /// The member's node if connected; otherwise starts a background attempt when none is
    /// running and the retry pause has passed.
    fn node_or_connect(&self, member: &Member, link: &Arc<Link>) -> Option<Arc<Node>> {
        let mut state = link.state.lock();
        if let Some(node) = &state.node {
            return Some(Arc::clone(node));
        }
        let due = state.retry_at.is_none_or(|at| Instant::now() >= at);
        if !state.connecting && due {
            state.connecting = true;
            let mut cfg = self.template.clone();
            cfg.server = link.addr.clone();
            let (link, id) = (Arc::clone(link), member.id.clone());
            tokio::spawn(async move {
                let result = Node::connect(&cfg, Role::Routed).await;
                let mut state = link.state.lock();
                state.connecting = false;
                match result {
                    Ok(node) => {
                        state.node = Some(Arc::new(node));
                        state.failures = 0;
                        state.retry_at = None;
                    }
                    Err(e) => {
                        let pause = retry_pause(state.failures);
                        state.failures = state.failures.saturating_add(1);
                        state.retry_at = Some(Instant::now() + pause);
                        tracing::debug!(member = %id, addr = %link.addr, error = %e, ?pause,
                            "member unreachable from this client; going through the bootstrap broker");
                    }
                }
                drop(state);
                link.ready.notify_waiters();
            });
        }
        None
    }

    /// Closes every member node.
    pub(crate) async fn close(&self) {
        let links: Vec<Arc<Link>> = self.links.lock().drain().map(|(_, l)| l).collect();
        for link in links {
            let node = link.state.lock().node.take();
            if let Some(node) = node {
                node.close().await;
            }
        }
    }
}

/// The pause after `failures` earlier failed attempts: 10 s, doubling, at most 5 min.
fn retry_pause(failures: u32) -> Duration {
    RETRY_FIRST
        .saturating_mul(1u32 << failures.min(5))
        .min(RETRY_MAX)
}

/// Whether an error means "ask again after refreshing the membership".
pub(crate) fn is_moved(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Server {
            code: starling_proto::ErrorCode::Moved,
            ..
        }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Trust;

    fn info(epoch: u64, ids: &[&str]) -> ClusterInfo {
        ClusterInfo {
            request_id: 1,
            epoch,
            members: ids
                .iter()
                .map(|id| Member {
                    id: (*id).to_string(),
                    addr: format!("{id}:7400"),
                })
                .collect(),
        }
    }

    #[test]
    fn owner_follows_the_shared_placement() {
        let r = Router::new(
            &ClientConfig::new("h:1", Trust::Insecure),
            info(1, &["a", "b", "c"]),
        );
        for topic in ["orders", "payments", "t-1", "t-2"] {
            let expected =
                starling_placement::owner(["a", "b", "c"], Kind::Topic, topic.as_bytes());
            assert_eq!(
                r.owner(Kind::Topic, topic.as_bytes()).map(|m| m.id),
                expected.map(str::to_string)
            );
        }
        assert!(Router::is_cluster(&info(1, &["a", "b"])));
        assert!(!Router::is_cluster(&info(0, &["a"])));
    }

    #[test]
    fn retries_back_off_to_five_minutes() {
        assert_eq!(retry_pause(0), Duration::from_secs(10));
        assert_eq!(retry_pause(1), Duration::from_secs(20));
        assert_eq!(retry_pause(4), Duration::from_secs(160));
        assert_eq!(retry_pause(5), Duration::from_secs(300));
        assert_eq!(retry_pause(40), Duration::from_secs(300));
    }

    #[test]
    fn update_switches_the_view() {
        let r = Router::new(&ClientConfig::new("h:1", Trust::Insecure), info(1, &["a"]));
        assert!(r.update(info(2, &["b"])));
        assert!(!r.update(info(2, &["b"])));
        assert_eq!(r.epoch(), 2);
        assert_eq!(
            r.owner(Kind::CacheKey, b"k").map(|m| m.id),
            Some("b".into())
        );
    }
}
