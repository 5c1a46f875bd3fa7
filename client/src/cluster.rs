//! Cluster routing for [`Client`](crate::Client): the membership learned with `ClusterInfo`,
//! the owner of each topic and cache key (the rendezvous function shared with the brokers,
//! `starling-placement`), one [`Node`] per member opened on first use, and the fallback to the
//! bootstrap broker (which forwards) when a member's address cannot be reached from here.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_placement::Kind;
use starling_proto::{ClusterInfo, Member};

use crate::ClientError;
use crate::config::ClientConfig;
use crate::handshake::Role;
use crate::node::Node;

/// A member whose address could not be reached is not tried again for this long.
const UNREACHABLE_RETRY: Duration = Duration::from_secs(10);

/// Where one request goes.
pub(crate) enum Target {
    /// Straight to the owning member.
    Member(Arc<Node>),
    /// Through the bootstrap broker, which forwards.
    Bootstrap,
}

/// The routing table: membership, epoch and the member nodes.
pub(crate) struct Router {
    template: ClientConfig,
    view: parking_lot::RwLock<Arc<ClusterInfo>>,
    links: parking_lot::Mutex<HashMap<String, Arc<Link>>>,
}

/// The connection to one member, opened on first use.
struct Link {
    addr: String,
    state: tokio::sync::Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    node: Option<Arc<Node>>,
    failed_at: Option<Instant>,
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

    /// Whether requests are being spread over several members.
    pub(crate) fn routes(&self) -> bool {
        Router::is_cluster(&self.view.read())
    }

    /// The membership epoch currently routed on.
    pub(crate) fn epoch(&self) -> u64 {
        self.view.read().epoch
    }

    /// Replaces the membership; links to members that left are closed.
    pub(crate) fn update(&self, info: ClusterInfo) {
        if info.epoch == self.epoch() {
            return;
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
            tokio::spawn(async move {
                if let Some(node) = link.state.lock().await.node.take() {
                    node.close().await;
                }
            });
        }
    }

    /// The member owning `key` of `kind` in the current view.
    pub(crate) fn owner(&self, kind: Kind, key: &[u8]) -> Option<Member> {
        let view = self.view.read();
        let id = starling_placement::owner(view.members.iter().map(|m| m.id.as_str()), kind, key)?;
        view.members.iter().find(|m| m.id == id).cloned()
    }

    /// Where a request for `key` of `kind` goes.
    pub(crate) async fn target(&self, kind: Kind, key: &[u8]) -> Target {
        if !Router::is_cluster(&self.view.read()) {
            return Target::Bootstrap;
        }
        let Some(member) = self.owner(kind, key) else {
            return Target::Bootstrap;
        };
        let link = {
            let mut links = self.links.lock();
            Arc::clone(links.entry(member.id.clone()).or_insert_with(|| {
                Arc::new(Link {
                    addr: member.addr.clone(),
                    state: tokio::sync::Mutex::new(LinkState::default()),
                })
            }))
        };
        let mut state = link.state.lock().await;
        if let Some(node) = &state.node {
            return Target::Member(Arc::clone(node));
        }
        if state
            .failed_at
            .is_some_and(|at| at.elapsed() < UNREACHABLE_RETRY)
        {
            return Target::Bootstrap;
        }
        let mut cfg = self.template.clone();
        cfg.server = link.addr.clone();
        match Node::connect(&cfg, Role::Routed).await {
            Ok(node) => {
                let node = Arc::new(node);
                state.node = Some(Arc::clone(&node));
                state.failed_at = None;
                Target::Member(node)
            }
            Err(e) => {
                tracing::debug!(member = %member.id, addr = %link.addr, error = %e,
                    "member unreachable from this client; going through the bootstrap broker");
                state.failed_at = Some(Instant::now());
                Target::Bootstrap
            }
        }
    }

    /// Closes every member node.
    pub(crate) async fn close(&self) {
        let links: Vec<Arc<Link>> = self.links.lock().drain().map(|(_, l)| l).collect();
        for link in links {
            if let Some(node) = link.state.lock().await.node.take() {
                node.close().await;
            }
        }
    }
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
    fn update_switches_the_view() {
        let r = Router::new(&ClientConfig::new("h:1", Trust::Insecure), info(1, &["a"]));
        r.update(info(2, &["b"]));
        assert_eq!(r.epoch(), 2);
        assert_eq!(
            r.owner(Kind::CacheKey, b"k").map(|m| m.id),
            Some("b".into())
        );
    }
}
