//! Links to the other members: one [`PeerClient`] per member, opened on first use,
//! asking for the `PEER` role with this broker's peer certificate
//! (`cluster_peer_cert_file`/`cluster_peer_key_file`, common name `starling:peer`, signed by the
//! cluster CA). The certificate files are read again on every dial, so a renewed certificate is
//! used from the next link on without a restart.
//!
//! The peer's server certificate is trusted by its issuer when a `ca.crt` lies next to
//! `tls_cert_file` (the layout of a Kubernetes TLS Secret, e.g. cert-manager's): members then
//! accept each other across a renewal, while one already holds the new certificate and the
//! other the old. Without it, the peer must serve this broker's own leaf certificate (read again
//! on every dial; every member serves the same one). A
//! member that cannot be reached is reported `Unavailable` at once for
//! `cluster_peer_timeout_ms` before the next attempt, so requests for its topics and keys fail
//! fast instead of queueing behind connection attempts. In Kubernetes, a member that does not
//! answer at its name is tried once more at its pod's current IP (see [`super::pod_ips`]): a
//! restarted pod's DNS record can stay cached for 30 s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use std::path::PathBuf;

use starling_client::{ClientConfig, ClientError, ClientTuning, Credentials, Trust};
use starling_config::BrokerConfig;

use super::Member;
use super::peer_client::PeerClient;
use super::pod_ips::{PodIps, at_ip, host_of};
use crate::metrics::Metrics;

/// How long the link to a member that left the list stays open. A member leaves the list before
/// it learns that it did, and until then it still accepts publishes as the owner of its topics:
/// the upstream subscriptions on this link (retiring, see `upstream`) must go on receiving
/// them. Closing the link at once ended those subscriptions, and what the former owner accepted
/// in the moment before it learned reached nobody.
const DEPARTED_LINGER: Duration = Duration::from_secs(30);

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
    files: PeerFiles,
    retry_after: Duration,
    links: parking_lot::Mutex<HashMap<String, Arc<Link>>>,
    metrics: Arc<Metrics>,
    /// Where a member that cannot be reached by its name is looked up (Kubernetes only).
    pod_ips: Option<PodIps>,
}

struct Link {
    addr: String,
    state: tokio::sync::Mutex<LinkState>,
}

#[derive(Default)]
struct LinkState {
    client: Option<PeerClient>,
    down_since: Option<(Instant, String)>,
}

/// The files a dial reads: this broker's peer certificate and what the peer's server
/// certificate is checked against.
struct PeerFiles {
    /// `cluster_peer_cert_file` and `cluster_peer_key_file`.
    identity: Option<(PathBuf, PathBuf)>,
    /// `tls_cert_file`.
    server_cert: Option<PathBuf>,
    /// The fingerprint of the leaf certificate served at start (the fallback trust).
    started_with: [u8; 32],
}

impl PeerFiles {
    /// The peer certificate's credentials, read now.
    fn credentials(&self) -> Result<Credentials, String> {
        let Some((cert, key)) = &self.identity else {
            return Ok(Credentials::None);
        };
        let read = |p: &PathBuf| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        Ok(Credentials::Certificate {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        })
    }

    /// What the peer's server certificate must be: signed by the `ca.crt` next to
    /// `tls_cert_file`, else this broker's own current leaf certificate.
    fn server_trust(&self) -> Trust {
        let Some(cert) = &self.server_cert else {
            return Trust::Fingerprint(self.started_with);
        };
        if let Some(ca) = cert.parent().map(|dir| dir.join("ca.crt"))
            && let Ok(pem) = std::fs::read(&ca)
        {
            return Trust::CaPem(pem);
        }
        let leaf = std::fs::read(cert).ok().and_then(|pem| {
            rustls_pemfile::certs(&mut pem.as_slice())
                .next()
                .and_then(Result::ok)
                .map(|der| starling_client::certificate_fingerprint(der.as_ref()))
        });
        Trust::Fingerprint(leaf.unwrap_or(self.started_with))
    }
}

impl Peers {
    /// Links for a broker with `cfg`, whose server certificate's leaf has SHA-256
    /// `fingerprint` (trusted in a peer when no `ca.crt` lies next to `tls_cert_file`).
    pub fn new(cfg: &BrokerConfig, fingerprint: [u8; 32], metrics: Arc<Metrics>) -> Peers {
        let timeout = Duration::from_millis(cfg.cluster_peer_timeout_ms);
        // No publish window: a member may serve a peer's fire-and-forget publish for a topic it
        // no longer owns, but refuses an acked one (`Moved`), so a window's ack requests would
        // lose messages in a membership change; the link's own small QUIC windows bound it
        // instead. No routing either (a `PeerClient` never routes): the peer serves every
        // request itself.
        let mut template = ClientConfig::new("peer:0", Trust::Fingerprint(fingerprint))
            .without_cluster_routing()
            .with_publish_window(None)
            .with_profile(crate::client_settings::sdk_profile(cfg.profile))
            .with_client_name(format!("starling-broker/{}", env!("CARGO_PKG_VERSION")));
        template.connect_timeout = timeout;
        // The pools the memory-fit formula's peer term counts (`starling_config::memory`).
        let pools = starling_config::ClientTuning::resolve(cfg.profile, None);
        template.tuning = ClientTuning {
            pub_conn_pool: pools.pub_conn_pool,
            pub_streams_per_conn: pools.pub_streams_per_conn,
            event_conn_pool: pools.event_conn_pool,
            cache_conn_pool: pools.cache_conn_pool,
            cache_streams_per_conn: pools.cache_streams_per_conn,
        };
        // Members are close: small windows carry their traffic, and keep what a peer link can
        // make this broker hold within the memory-fit formula's peer term. The stream windows
        // are the profile's.
        let window = cfg.cluster_peer_window_bytes;
        let profile = cfg.profile.config();
        let t = &mut template.transport;
        t.event_conn_recv_window = window;
        t.event_stream_recv_window = profile.event_stream_recv_window.min(window);
        t.cache_conn_recv_window = window;
        t.cache_stream_recv_window = profile.cache_stream_recv_window.min(window);
        // A member that vanishes without closing its connections (a force-deleted pod: its IP
        // stops answering) is noticed only when the link's idle timeout runs out, and until
        // then a publish forwarded to it waits for an ack that cannot come (the profile's idle
        // timeout is 30 s). A peer link pings every `cluster_peer_timeout_ms` and gives up
        // after five silent ones (1 s and 5 s by default), never later than the profile says.
        let (keep_alive, idle) = peer_liveness(
            timeout,
            Duration::from_millis(profile.keep_alive_interval_ms),
            Duration::from_millis(profile.idle_timeout_ms),
        );
        t.keep_alive_interval = keep_alive;
        t.idle_timeout = idle;
        t.send_window = Some(window);
        // The links use this broker's own path settings (its socket buffers, MTU, congestion
        // controller and ACK frequency), not just its profile's.
        t.path = crate::client_settings::path_tuning(cfg);
        template.request_timeout = Duration::from_secs(10).max(timeout * 4);
        let identity = cfg
            .cluster_peer_cert_file
            .clone()
            .zip(cfg.cluster_peer_key_file.clone());
        Peers {
            template,
            files: PeerFiles {
                identity,
                server_cert: cfg.tls_cert_file.clone(),
                started_with: fingerprint,
            },
            retry_after: timeout,
            links: parking_lot::Mutex::new(HashMap::new()),
            metrics,
            pod_ips: None,
        }
    }

    /// The config of a dial to `server`, with the peer certificate and the server trust read
    /// from their files now.
    fn dial(&self, server: String) -> Result<ClientConfig, ClientError> {
        let credentials = self.files.credentials().map_err(|why| {
            ClientError::Config(format!("cannot read the peer certificate: {why}"))
        })?;
        let mut cfg = self.template.clone().with_credentials(credentials);
        cfg.trust = self.files.server_trust();
        cfg.server = server;
        Ok(cfg)
    }

    /// Reaches a member that does not answer at its name by its pod's current IP, looked up
    /// with `pod_ips` (a restarted pod's DNS name can answer with the old address for as long
    /// as DNS caches hold it).
    pub fn with_pod_ips(mut self, pod_ips: Option<PodIps>) -> Peers {
        self.pod_ips = pod_ips;
        self
    }

    /// The link to `member`, connecting if needed; `Unavailable` at once while a failed dial or
    /// request marked it unreachable less than `cluster_peer_timeout_ms` ago.
    pub async fn client(&self, member: &Member) -> Result<PeerClient, Unavailable> {
        self.link(member, true).await
    }

    /// [`Peers::client`] for a request that must not fail fast: dials even while the member is
    /// marked unreachable. The drain's cache hand-off uses it: what it gives up on is lost
    /// with the process, and the mark may date from the member's previous process.
    pub async fn client_now(&self, member: &Member) -> Result<PeerClient, Unavailable> {
        self.link(member, false).await
    }

    async fn link(&self, member: &Member, fail_fast: bool) -> Result<PeerClient, Unavailable> {
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
            && fail_fast
            && since.elapsed() < self.retry_after
        {
            return Err(Unavailable {
                member: member.id.clone(),
                reason: reason.clone(),
            });
        }
        let connected = match self.dial(member.addr.clone()) {
            Ok(cfg) => PeerClient::connect(cfg).await,
            Err(e) => Err(e),
        };
        let connected = match connected {
            Err(by_name) => self.connect_by_pod_ip(member).await.ok_or(by_name),
            ok => ok,
        };
        match connected {
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

    /// Connects to `member` at its pod's current IP, keeping its name for TLS; `None` without
    /// a pod lookup, when the lookup fails or finds no IP, or when that address does not answer
    /// either.
    async fn connect_by_pod_ip(&self, member: &Member) -> Option<PeerClient> {
        let ip = match self.pod_ips.as_ref()?.ip(&member.id).await {
            Ok(ip) => ip?,
            Err(e) => {
                tracing::debug!(member = %member.id, error = %e, "pod IP lookup failed");
                return None;
            }
        };
        let mut cfg = self.dial(at_ip(&member.addr, ip)?).ok()?;
        cfg.server_name = host_of(&member.addr).map(str::to_string);
        match PeerClient::connect(cfg).await {
            Ok(client) => {
                tracing::info!(member = %member.id, addr = %member.addr, %ip, "peer reached at its pod IP: its name does not answer (a restarted pod whose DNS record is still cached?)");
                Some(client)
            }
            Err(e) => {
                tracing::debug!(member = %member.id, %ip, error = %e, "peer not reached at its pod IP either");
                None
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
        if !e.is_link_failure() {
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

    /// Forgets the links to members no longer in `keep`, and closes them after
    /// [`DEPARTED_LINGER`].
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
                tokio::time::sleep(DEPARTED_LINGER).await;
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

/// The keep-alive interval and idle timeout of a peer link: a ping every `peer_timeout`, the
/// link dropped after five of them go unanswered; neither later than the profile's own (a
/// profile keep-alive of zero, which disables pings, stays zero).
fn peer_liveness(
    peer_timeout: Duration,
    profile_keep_alive: Duration,
    profile_idle: Duration,
) -> (Duration, Duration) {
    let keep_alive = if profile_keep_alive.is_zero() {
        Duration::ZERO
    } else {
        profile_keep_alive.min(peer_timeout)
    };
    (keep_alive, profile_idle.min(peer_timeout * 5))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn peer_links_notice_a_vanished_member_within_five_peer_timeouts() {
        let ms = Duration::from_millis;
        assert_eq!(
            super::peer_liveness(ms(1_000), ms(5_000), ms(30_000)),
            (ms(1_000), ms(5_000))
        );
        // Never later than the profile.
        assert_eq!(
            super::peer_liveness(ms(10_000), ms(5_000), ms(30_000)),
            (ms(5_000), ms(30_000))
        );
        // Pings off in the profile stay off.
        assert_eq!(
            super::peer_liveness(ms(1_000), ms(0), ms(30_000)),
            (ms(0), ms(5_000))
        );
    }
}
