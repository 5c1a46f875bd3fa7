//! Links to the other members: one `starling_client::Client` per member, opened on first use,
//! authenticated with the cluster token and pinned to the cluster's shared certificate. A
//! member that cannot be reached is reported `Unavailable` at once for
//! `cluster_peer_timeout_ms` before the next attempt, so requests for its topics and keys fail
//! fast instead of queueing behind connection attempts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_client::{Client, ClientConfig, ClientError, Trust};
use starling_config::BrokerConfig;

use super::Member;
use crate::metrics::Metrics;

/// A request for another member could not be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("member {member} is unavailable: {reason}")]
pub struct Unavailable {
    /// The member's id.
    pub member: String,
    /// Why.
    pub reason: String,
}

/// Links to every other member.
pub struct Peers {
    template: ClientConfig,
    retry_after: Duration,
    links: parking_lot::Mutex<HashMap<String, Arc<Link>>>,
    metrics: Arc<Metrics>,
}

struct Link {
    addr: String,
    state: tokio::sync::Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    client: Option<Client>,
    down_since: Option<(Instant, String)>,
}

impl Peers {
    /// Links for a broker with `cfg`, presenting `token` and trusting only a peer whose leaf
    /// certificate has SHA-256 `fingerprint` (every member serves the same certificate).
    pub fn new(
        cfg: &BrokerConfig,
        token: [u8; 32],
        fingerprint: [u8; 32],
        metrics: Arc<Metrics>,
    ) -> Peers {
        let timeout = Duration::from_millis(cfg.cluster_peer_timeout_ms);
        let mut template = ClientConfig::new("peer:0", Trust::Fingerprint(fingerprint))
            .with_profile(cfg.profile)
            .with_peer_token(token.to_vec())
            .with_client_name(format!("starling-broker/{}", env!("CARGO_PKG_VERSION")));
        template.connect_timeout = timeout;
        template.request_timeout = Duration::from_secs(10).max(timeout * 4);
        Peers {
            template,
            retry_after: timeout,
            links: parking_lot::Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// The link to `member`, connecting if needed.
    pub async fn client(&self, member: &Member) -> Result<Client, Unavailable> {
        let link = {
            let mut links = self.links.lock();
            let stale = links.get(&member.id).is_some_and(|l| l.addr != member.addr);
            if stale {
                links.remove(&member.id);
            }
            Arc::clone(links.entry(member.id.clone()).or_insert_with(|| {
                Arc::new(Link {
                    addr: member.addr.clone(),
                    state: tokio::sync::Mutex::new(LinkState::default()),
                })
            }))
        };
        let mut state = link.state.lock().await;
        if let Some(client) = &state.client {
            return Ok(client.clone());
        }
        if let Some((since, reason)) = &state.down_since
            && since.elapsed() < self.retry_after
        {
            return Err(Unavailable {
                member: member.id.clone(),
                reason: reason.clone(),
            });
        }
        let mut cfg = self.template.clone();
        cfg.server = member.addr.clone();
        match Client::connect(cfg).await {
            Ok(client) => {
                state.client = Some(client.clone());
                state.down_since = None;
                self.metrics
                    .cluster_peer_up
                    .with_label_values(&[&member.id])
                    .set(1);
                Ok(client)
            }
            Err(e) => {
                let reason = e.to_string();
                tracing::warn!(member = %member.id, addr = %member.addr, error = %reason, "peer unreachable");
                state.down_since = Some((Instant::now(), reason.clone()));
                self.metrics
                    .cluster_peer_up
                    .with_label_values(&[&member.id])
                    .set(0);
                Err(Unavailable {
                    member: member.id.clone(),
                    reason,
                })
            }
        }
    }

    /// Records that a request to `member` failed with `e`. Connection-level failures drop the
    /// link (the next request reconnects, or fails fast while the member stays down).
    pub async fn failed(&self, member: &Member, e: &ClientError) -> Unavailable {
        let unavailable = Unavailable {
            member: member.id.clone(),
            reason: e.to_string(),
        };
        if !is_link_failure(e) {
            return unavailable;
        }
        let link = self.links.lock().get(&member.id).cloned();
        if let Some(link) = link {
            let mut state = link.state.lock().await;
            if let Some(client) = state.client.take() {
                tokio::spawn(async move { client.close().await });
            }
            state.down_since = Some((Instant::now(), unavailable.reason.clone()));
        }
        self.metrics
            .cluster_peer_up
            .with_label_values(&[&member.id])
            .set(0);
        unavailable
    }

    /// Closes the links to members no longer in `keep`.
    pub fn retain(&self, keep: &[Member]) {
        let gone: Vec<Arc<Link>> = {
            let mut links = self.links.lock();
            let ids: Vec<String> = links
                .iter()
                .filter(|(id, l)| !keep.iter().any(|m| &m.id == *id && m.addr == l.addr))
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                let _ = self.metrics.cluster_peer_up.remove_label_values(&[id]);
            }
            ids.iter().filter_map(|id| links.remove(id)).collect()
        };
        for link in gone {
            tokio::spawn(async move {
                if let Some(client) = link.state.lock().await.client.take() {
                    client.close().await;
                }
            });
        }
    }

    /// Closes every link.
    pub async fn close(&self) {
        let links: Vec<Arc<Link>> = self.links.lock().drain().map(|(_, l)| l).collect();
        for link in links {
            if let Some(client) = link.state.lock().await.client.take() {
                client.close().await;
            }
        }
    }
}

/// Whether `e` means the link itself is broken (as opposed to a refused request).
pub fn is_link_failure(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Connect(_)
            | ClientError::Connection(_)
            | ClientError::Closed
            | ClientError::Timeout
            | ClientError::Io(_)
            | ClientError::Tls(_)
    )
}
