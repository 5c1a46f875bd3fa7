//! Start-up, the accept loop and the SIGTERM drain.
//!
//! [`Broker::start`] binds both listeners, prepares TLS, starts the lanes, the cache sweeper,
//! the HTTP server and the QUIC accept loop, and returns a [`RunningBroker`]. Its
//! [`RunningBroker::shutdown`] performs the drain: readiness goes false, no new connections or
//! subscriptions are accepted, every topic flushes, queued deliveries are written out until they
//! are empty or `drain_timeout_ms` passes, then connections close with an application code.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use starling_config::BrokerConfig;
use starling_config::topics::CompiledTopics;
use starling_placement::Kind;
use starling_proto::FrameDecoder;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::auth::health::UsersHealth;
use crate::auth::source::UsersSource;
use crate::auth::{self, Auth};
use crate::cache::{Cache, CacheConfig};
use crate::cluster::fan_in::FanIn;
use crate::cluster::forward::Forwarder;
use crate::cluster::handoff::{self, Handoff};
use crate::cluster::log_peers::{self, LogClaims, PeerLogs};
use crate::cluster::peers::Peers;
use crate::cluster::replica_link::{LinksNet, ReplicaLinks};
use crate::cluster::source::Source;
use crate::cluster::upstream::Upstreams;
use crate::cluster::{Cluster, MemberSet, Route};
use crate::durable::escape;
use crate::durable::replicated::{ReplicaRegistry, ReplicaSync, Replication, sync};
use crate::durable::topics_file;
use crate::durable::{Durability, Policies};
use crate::error::BrokerError;
use crate::health::{Health, Phase};
use crate::http::{self, HttpState};
use crate::metrics::Metrics;
use crate::pubsub::ack::PENDING_ACK_BYTES;
use crate::pubsub::batcher::Limits;
use crate::pubsub::counters::{Counters, Observe};
use crate::pubsub::lanes::Lanes;
use crate::pubsub::pending_acks::PendingAcks;
use crate::pubsub::topic::{TopicSettings, Topics};
use crate::server::buffers::Buffers;
use crate::server::{self, admit, conn};
use crate::state::{PublishGate, State, Subscriptions};
use crate::tls::{self, ClientCa, TlsMaterial};
use crate::tls_reload::{self, TlsFiles};
use crate::transport;

/// How often the cache sweeper reclaims expired entries.
const SWEEP_INTERVAL: Duration = Duration::from_millis(250);
/// A topic with no subscribers and no traffic for this long releases its state.
const TOPIC_IDLE_RETIRE: Duration = Duration::from_secs(60);
/// How long start-up waits for a readable member list.
const FIRST_MEMBERS_READ: Duration = Duration::from_secs(30);

/// The broker, before it starts.
pub struct Broker {
    cfg: BrokerConfig,
    server_id: String,
    /// Segment size of replicated topics' logs, when not the library's default.
    replica_segment_bytes: Option<u64>,
}

/// A started broker.
pub struct RunningBroker {
    /// The bound QUIC (UDP) address.
    pub quic_addr: SocketAddr,
    /// The bound HTTP (TCP) address.
    pub http_addr: SocketAddr,
    /// SHA-256 fingerprint of the TLS leaf certificate.
    pub fingerprint: String,
    /// DER of the leaf certificate, so in-process clients can trust a self-signed broker.
    pub certificate_der: Vec<u8>,
    state: Arc<State>,
    endpoint: quinn::Endpoint,
    stop_tx: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl Broker {
    /// A broker for a validated config.
    pub fn new(cfg: BrokerConfig) -> Result<Self, BrokerError> {
        cfg.validate()?;
        Auth::check_config(&cfg)?;
        // The worst case this config allows must fit the cgroup's memory limit (peer links are
        // counted by the operator, which knows the replicas; here the members are not known yet).
        if let Some(limit) = crate::memory_limit::cgroup_memory_limit() {
            starling_config::memory::check_fit(&cfg, 0, limit)?;
        }
        let server_id = std::env::var("POD_NAME")
            .or_else(|_| std::env::var("HOSTNAME"))
            .unwrap_or_else(|_| "starling".to_string());
        Ok(Broker {
            cfg,
            server_id,
            replica_segment_bytes: None,
        })
    }

    /// Overrides the broker's id (default: `POD_NAME`, else `HOSTNAME`), which is also its
    /// member id in a cluster.
    pub fn with_server_id(mut self, id: impl Into<String>) -> Self {
        self.server_id = id.into();
        self
    }

    /// Overrides the segment size of replicated topics' Raft and committed logs (default:
    /// `starling_replica::ReplicaConfig::segment_bytes`, 64 MiB): retention deletes whole
    /// segments, so a test that must see it trim a replicated topic sets it small. Not a
    /// knob.
    pub fn with_replica_segment_bytes(mut self, bytes: u64) -> Self {
        self.replica_segment_bytes = Some(bytes);
        self
    }

    /// Binds, starts every task and returns once the broker is serving.
    pub async fn start(self) -> Result<RunningBroker, BrokerError> {
        let cfg = Arc::new(self.cfg);
        let health = Arc::new(Health::default());
        let metrics = Arc::new(Metrics::new()?);
        metrics.set_limits(&cfg);

        let material = match (&cfg.tls_cert_file, &cfg.tls_key_file) {
            (Some(cert), Some(key)) => TlsMaterial::from_files(cert, key)?,
            _ => TlsMaterial::self_signed(tls::default_names())?,
        };
        let fingerprint = material.fingerprint();
        if material.self_signed {
            tracing::info!(%fingerprint, "generated a self-signed TLS certificate (clients: --fingerprint or --insecure)");
        } else {
            tracing::info!(%fingerprint, "loaded TLS certificate");
        }
        let certificate_der = material
            .chain
            .first()
            .map(|c| c.to_vec())
            .unwrap_or_default();
        let client_ca = match &cfg.auth_client_ca_file {
            Some(path) => Some(ClientCa::from_file(path)?),
            None => None,
        };
        let server_config = transport::server_config_with(&cfg, &material, client_ca.as_ref())?;
        let source = Source::from_config(&cfg).await?;
        if source.is_some() && material.self_signed {
            return Err(BrokerError::ClusterWithoutSharedTls);
        }
        if source.is_some()
            && cfg.auth_client_ca_file.is_some()
            && cfg.cluster_peer_cert_file.is_none()
        {
            return Err(BrokerError::ClusterWithoutPeerCertificate);
        }
        let first = first_users(&cfg).await?;
        let users_health = first.source.as_ref().map(|_| {
            let read = first.read.clone().map(|r| r.map_or(0, |(_, n)| n));
            Arc::new(UsersHealth::new(read, Arc::clone(&metrics)))
        });
        if let Some(h) = &users_health {
            health.gate_on(Arc::clone(h) as Arc<dyn crate::health::ReadinessGate>);
        }
        let first_topics =
            topics_file::first_read(cfg.topics_file.as_deref(), cfg.max_frame_bytes).await?;
        let leaf_sha256: [u8; 32] = {
            use sha2::Digest;
            sha2::Sha256::digest(&certificate_der).into()
        };

        let http_listener =
            TcpListener::bind(cfg.http_listen)
                .await
                .map_err(|source| BrokerError::Bind {
                    addr: cfg.http_listen,
                    source,
                })?;
        let http_addr = http_listener
            .local_addr()
            .map_err(|source| BrokerError::Bind {
                addr: cfg.http_listen,
                source,
            })?;
        let (endpoint, udp) = transport::listener(&cfg, server_config.clone())?;
        metrics.observe_udp_buffers(&udp);
        let quic_addr = endpoint.local_addr().map_err(|source| BrokerError::Bind {
            addr: cfg.quic_listen,
            source,
        })?;

        let lanes = Lanes::spawn(
            cfg.subscriber_lane_queue_depth as usize,
            cfg.fanout_batch_size as usize,
            cfg.subscriber_lane_shard,
            cfg.subscriber_queue_budget_bytes,
            Arc::new(Counters::new(cfg.subscriber_writer_lanes as usize)),
            Arc::clone(&metrics) as Arc<dyn Observe>,
        );
        metrics.export_pubsub(
            Arc::clone(lanes.counters()),
            Arc::clone(&lanes.queue_budget),
        );
        let cache = Arc::new(Cache::new(CacheConfig {
            max_bytes: cfg.cache_max_bytes,
            shards: cfg.cache_shards as usize,
            max_value_bytes: cfg.cache_max_value_bytes as usize,
        }));
        let mut tasks = vec![cache.spawn_sweeper(SWEEP_INTERVAL)];

        let poll_every = Duration::from_millis(cfg.cluster_poll_interval_ms);
        let initial = match &source {
            Some(s) => s.first_read(poll_every, FIRST_MEMBERS_READ).await?,
            None => MemberSet::single(&self.server_id, &quic_addr.to_string()),
        };
        let cluster = Arc::new(Cluster::new(
            self.server_id.clone(),
            initial,
            source.is_some(),
            Duration::from_millis(cfg.cluster_handoff_window_ms),
            Arc::clone(&metrics),
        ));
        let peers = Arc::new(
            Peers::new(&cfg, leaf_sha256, Arc::clone(&metrics))
                .with_pod_ips(source.as_ref().and_then(Source::pod_ips)),
        );
        let (topics_text, topics_doc) = match first_topics {
            Some((text, doc)) => (Some(text), doc),
            None => (None, CompiledTopics::empty()),
        };
        let policies = Policies::new(&cfg, topics_doc);
        let durability =
            Durability::with_policies(&cfg, metrics.storage.clone(), Arc::clone(&policies));
        let on_disk = Arc::clone(&durability);
        let replica_links = ReplicaLinks::new(
            &cfg,
            Arc::clone(&cluster),
            Arc::clone(&peers),
            Arc::clone(&metrics),
        );
        let replicas = ReplicaRegistry::new(cfg.max_topics as usize);
        let replication = Arc::new(Replication {
            replicas: cfg.durable_replicas as usize,
            policies: Arc::clone(&policies),
            per_topic: cfg.topics_file.is_some(),
            net: Arc::new(LinksNet(Arc::clone(&replica_links))),
            registry: Arc::clone(&replicas),
            leaders: Arc::default(),
            dir: cfg.storage_dir.clone(),
            config: replica_config(
                &cfg,
                replica_links.max_rpc_bytes(),
                self.replica_segment_bytes,
            ),
            metrics: metrics.replica.clone(),
            open: Arc::default(),
            move_permits: Arc::new(tokio::sync::Semaphore::new(
                cfg.max_concurrent_replica_moves as usize,
            )),
            changes: source.is_some().then(|| cluster.changes()),
        });
        // Readiness waits for the replicas open here to be in sync with their leaders
        // (`durable::replicated::sync`): a rolling restart moves on only once they are.
        let replica_sync = ReplicaSync::new();
        let replicas_open = Arc::clone(&replication.open);
        let topics = Topics::new(
            TopicSettings {
                limits: Limits {
                    max_events: cfg.event_batch_max_events as usize,
                    max_bytes: cfg.event_batch_max_bytes as usize,
                    max_delay: Duration::from_micros(cfg.event_batch_max_delay_us),
                },
                queue_depth: cfg.pub_queue_depth as usize,
                idle_retire: TOPIC_IDLE_RETIRE,
                replay_window: Duration::from_millis(cfg.replay_window_ms),
                replay_max_bytes: usize::try_from(cfg.replay_max_bytes).unwrap_or(usize::MAX),
                replay_max_total_bytes: usize::try_from(cfg.replay_max_total_bytes)
                    .unwrap_or(usize::MAX),
                epoch: cluster.changes(),
                owns: {
                    let cluster = Arc::clone(&cluster);
                    Arc::new(move |topic: &str| {
                        cluster.route(Kind::Topic, topic.as_bytes()) == Route::Local
                    })
                },
                max_topics: cfg.max_topics as usize,
                durability: Arc::clone(&durability),
                log_peers: Arc::new(PeerLogs::new(Arc::clone(&cluster), Arc::clone(&peers))),
                replication,
                dedup: crate::pubsub::dedup::Limits {
                    window: Duration::from_millis(cfg.dedup_window_ms),
                    max_ids: cfg.dedup_max_ids as usize,
                },
                dedup_max_total_bytes: cfg.dedup_max_total_bytes,
                inboxes: Arc::new(crate::pubsub::inboxes::Inboxes::new(
                    cfg.max_reply_inboxes_per_user as usize,
                    metrics.reply_grants_evicted.clone(),
                )),
            },
            Arc::clone(&lanes),
        );

        let (stop_tx, stop_rx) = watch::channel(false);
        let http_state = Arc::new(HttpState {
            metrics: Arc::clone(&metrics),
            cache: Arc::clone(&cache),
            health: Arc::clone(&health),
            config_yaml: cfg.to_yaml(),
            replicas: Arc::clone(&replica_sync),
            volume: durability.volume(),
            policies: Arc::clone(&policies),
            users: users_health.clone(),
        });
        tasks.push(tokio::spawn(http::serve_http(
            http_listener,
            http_state,
            stop_rx.clone(),
        )));

        if let (Some(path), Some(text)) = (&cfg.topics_file, topics_text) {
            tasks.push(tokio::spawn(topics_file::poll(
                &policies,
                path.clone(),
                text,
                cfg.max_frame_bytes,
                metrics.topics_document.clone(),
                Duration::from_millis(cfg.auth_reload_interval_ms),
                stop_rx.clone(),
            )));
        }
        let auth = Auth::new(&cfg, first.users, Arc::clone(&metrics));
        if let (Some(users_source), Some(users_health)) = (first.source, users_health) {
            tasks.push(tokio::spawn(auth::reload::poll(
                Arc::downgrade(&auth),
                users_source,
                users_health,
                first.read.ok().flatten(),
                Duration::from_millis(cfg.auth_reload_interval_ms),
                stop_rx.clone(),
            )));
        }
        let publishes = Arc::new(PublishGate::new(
            cfg.max_inflight_publish_bytes,
            PendingAcks::new(
                cfg.max_pending_persisted_ack_bytes,
                PENDING_ACK_BYTES,
                metrics.pending_acks_shown(),
            ),
        ));
        let state = Arc::new(State {
            auth,
            decoder: FrameDecoder::new(cfg.max_frame_bytes)
                .with_max_batch_items(cfg.max_publish_batch_items),
            cfg: Arc::clone(&cfg),
            forward: Forwarder::new(
                Arc::clone(&cluster),
                Arc::clone(&peers),
                Arc::clone(&metrics),
            ),
            upstreams: Upstreams::new(
                Arc::clone(&cluster),
                Arc::clone(&peers),
                Arc::clone(&topics),
                Arc::clone(&metrics),
            ),
            fan_in: FanIn::new(
                Arc::clone(&cluster),
                Arc::clone(&peers),
                Arc::clone(&lanes),
                Arc::clone(topics.inboxes()),
                Arc::clone(&metrics),
            ),
            handoff: Arc::new(Handoff::new(
                Arc::clone(&cluster),
                Arc::clone(&cache),
                Arc::clone(&peers),
                Arc::clone(&metrics),
            )),
            log_claims: Arc::new(LogClaims::new(
                Arc::clone(&cluster),
                Arc::clone(&peers),
                Arc::clone(&topics),
                durability,
            )),
            metrics,
            topics,
            lanes,
            cache,
            health: Arc::clone(&health),
            server_id: self.server_id,
            subscriptions: Arc::new(Subscriptions::default()),
            publishes,
            replicas,
            replica_links,
            cluster: Arc::clone(&cluster),
            peers,
        });
        if let Some(source) = source {
            tasks.push(tokio::spawn(crate::cluster::source::poll(
                Arc::clone(&cluster),
                source,
                poll_every,
                stop_rx.clone(),
            )));
            tasks.push(tokio::spawn(on_membership_changes(
                Arc::downgrade(&state),
                cluster.changes(),
                stop_rx.clone(),
            )));
            tasks.push(tokio::spawn(handoff::run(
                Arc::downgrade(&state.handoff),
                cluster.changes(),
                poll_every,
                stop_rx.clone(),
            )));
            tasks.push(tokio::spawn(log_peers::run(
                Arc::downgrade(&state.log_claims),
                cluster.changes(),
                poll_every,
                stop_rx.clone(),
            )));
        }
        let buffers = Arc::new(Buffers::new(
            Arc::clone(&cfg),
            server_config,
            state.metrics.connection_buffer_bytes.clone(),
        ));
        let tls_files = TlsFiles {
            server: (!material.self_signed)
                .then(|| cfg.tls_cert_file.clone().zip(cfg.tls_key_file.clone()))
                .flatten(),
            client_ca: cfg.auth_client_ca_file.clone(),
        };
        if tls_files.any() {
            tasks.push(tokio::spawn(tls_reload::run(
                tls_files,
                material,
                Arc::clone(&buffers),
                endpoint.clone(),
                Arc::clone(&state.metrics),
                Duration::from_millis(cfg.auth_reload_interval_ms),
                stop_rx.clone(),
            )));
        }
        if state.topics.replication().enabled() {
            tasks.push(tokio::spawn(sync::run(
                replicas_open,
                Arc::clone(&replica_sync),
                Arc::clone(&policies),
                stop_rx.clone(),
            )));
            open_replicas_on_disk(&state, on_disk, &replica_sync).await;
            health.gate_on(replica_sync);
        }
        tasks.push(tokio::spawn(accept_loop(
            server::ingress(&state),
            Arc::clone(&state.health),
            Arc::clone(&state.metrics),
            endpoint.clone(),
            buffers,
            stop_rx,
        )));
        health.set(Phase::Serving);
        state.metrics.ready.set(1);
        tracing::info!(%quic_addr, %http_addr, profile = %cfg.profile, tier = ?cfg.tier, "broker serving");
        Ok(RunningBroker {
            quic_addr,
            http_addr,
            fingerprint,
            certificate_der,
            state,
            endpoint,
            stop_tx,
            tasks,
        })
    }
}

/// The users source and its first table. A users file must be readable at start (a typo in
/// the path fails loudly); a Secret that cannot be read yet starts the broker with an empty
/// table (only peers get in) until the poll reads it.
async fn first_users(cfg: &BrokerConfig) -> Result<FirstUsers, BrokerError> {
    let Some(source) = UsersSource::from_config(cfg).await? else {
        return Ok(FirstUsers {
            source: None,
            users: starling_access::Users::default(),
            read: Ok(None),
        });
    };
    match source.read().await {
        Ok((text, users)) => {
            tracing::info!(source = %source.describe(), users = users.len(), "users document loaded");
            let count = users.len();
            Ok(FirstUsers {
                source: Some(source),
                users,
                read: Ok(Some((text, count))),
            })
        }
        Err(e) if matches!(source, UsersSource::Secret { .. }) => {
            tracing::warn!(source = %source.describe(), error = %e, "users document not readable yet: admitting no user until it is (not ready meanwhile)");
            Ok(FirstUsers {
                source: Some(source),
                users: starling_access::Users::default(),
                read: Err((e.reason(), e.to_string())),
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// The first read of the users document.
struct FirstUsers {
    /// Where it comes from (`None`: no users document is configured).
    source: Option<UsersSource>,
    /// The table to start with.
    users: starling_access::Users,
    /// The text read and its users, or why the read failed.
    read: Result<Option<(String, usize)>, (auth::health::ReadFailure, String)>,
}

/// Moves subscriptions and upstreams, and closes links to departed members, after every
/// membership change.
async fn on_membership_changes(
    state: std::sync::Weak<State>,
    mut changes: watch::Receiver<u64>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            r = changes.changed() => if r.is_err() { return },
            _ = stop.changed() => return,
        }
        let Some(state) = state.upgrade() else {
            return;
        };
        state.peers.retain(state.cluster.view().current.members());
        server::subscribe::on_membership_change(
            &state.subscriptions,
            &state.cluster,
            &state.upstreams,
        );
    }
}

/// Accepts connection attempts within the admission budgets (see [`admit`]) and spawns a task
/// for each one served.
async fn accept_loop(
    ingress: Arc<conn::Handles>,
    health: Arc<Health>,
    metrics: Arc<Metrics>,
    endpoint: quinn::Endpoint,
    buffers: Arc<Buffers>,
    mut stop: watch::Receiver<bool>,
) {
    let cfg = Arc::clone(&ingress.cfg);
    // Retry before the pending handshakes can fill up with attempts from addresses nobody
    // proved: at half of `max_pending_handshakes` at the latest.
    let limits = admit::Limits {
        max_connections: cfg.max_connections as usize,
        retry_threshold: (cfg.handshake_retry_threshold as usize)
            .min(cfg.max_pending_handshakes as usize / 2),
    };
    let connections = admit::InProgress::default();
    let pending = admit::Pending::new(admit::PendingLimits {
        max: cfg.max_pending_handshakes as usize,
        per_source: cfg.max_pending_handshakes_per_source as usize,
    });
    let peer_sources = Arc::new(admit::PeerSources::default());
    let conn_stop = stop.clone();
    let refuse = |incoming: quinn::Incoming, why: admit::Refusal| {
        metrics.quic_refused.with_label_values(&[why.label()]).inc();
        incoming.refuse();
    };
    // Enters the attempt among the pending handshakes (within the caps, the peers' share kept)
    // and serves it with the pending grant; its full grant is reserved after its `Hello`.
    let serve = |incoming: quinn::Incoming| {
        let Some(tentative) = buffers.tentative() else {
            return refuse(incoming, admit::Refusal::BufferBudget);
        };
        let source = admit::canonical(incoming.remote_address().ip());
        let view = ingress.cluster.view();
        let peer = peer_sources.contains(
            source,
            view.current.members().iter().map(|m| m.addr.as_str()),
        );
        let slot = match pending.try_enter(source, peer) {
            Ok(slot) => slot,
            Err(why) => return refuse(incoming, why),
        };
        let server_config =
            match buffers.pending_server_config(tentative, incoming.remote_address()) {
                Ok(c) => c,
                Err(e) => {
                    tracing::error!(error = %e, "no transport config for pending connections");
                    return refuse(incoming, admit::Refusal::BufferBudget);
                }
            };
        match incoming.accept_with(server_config) {
            Ok(connecting) => {
                let admitted = conn::Admitted {
                    connection: connections.enter(),
                    pending: slot,
                    buffers: Arc::clone(&buffers),
                    peer_sources: Arc::clone(&peer_sources),
                };
                tokio::spawn(conn::serve_connection(
                    Arc::clone(&ingress),
                    connecting,
                    admitted,
                    conn_stop.clone(),
                ));
            }
            Err(e) => tracing::debug!(error = %e, "QUIC handshake failed"),
        }
    };
    loop {
        tokio::select! {
            incoming = endpoint.accept() => match incoming {
                Some(incoming) => {
                    let phase = health.phase();
                    let source = admit::canonical(incoming.remote_address().ip());
                    let view = ingress.cluster.view();
                    let peer = peer_sources.contains(
                        source,
                        view.current.members().iter().map(|m| m.addr.as_str()),
                    );
                    drop(view);
                    let load = admit::Load {
                        serving: phase == Phase::Serving,
                        draining: phase == Phase::Draining,
                        peer,
                        open: connections.count(),
                        handshaking: pending.count(),
                        validated: incoming.remote_address_validated(),
                    };
                    match admit::decide(load, limits) {
                        admit::Admission::Accept => {
                            serve(incoming);
                        }
                        // An unvalidated attempt may always be retried; should quinn say
                        // otherwise, it is served rather than dropped.
                        admit::Admission::Retry => match incoming.retry() {
                            Ok(()) => metrics.quic_retries.inc(),
                            Err(e) => serve(e.into_incoming()),
                        },
                        admit::Admission::Refuse(why) => refuse(incoming, why),
                    }
                }
                None => return,
            },
            _ = stop.changed() => return,
        }
    }
}

impl RunningBroker {
    /// The broker's metrics (for tests and embedding).
    pub fn metrics(&self) -> &Metrics {
        &self.state.metrics
    }

    /// The lifecycle state.
    pub fn health(&self) -> &Health {
        &self.state.health
    }

    /// The effective config.
    pub fn config(&self) -> &BrokerConfig {
        &self.state.cfg
    }

    /// The broker's id (its member id in a cluster).
    pub fn server_id(&self) -> &str {
        &self.state.server_id
    }

    /// The replicas of replicated topics open on this broker, which its peer streams route
    /// Raft RPCs to (a replica registers its `server()` here when its topic opens it).
    pub fn replica_registry(&self) -> Arc<ReplicaRegistry> {
        Arc::clone(&self.state.replicas)
    }

    /// What the replica of replicated topic `topic` open on this broker knows of it (its
    /// leader, term, voters, learners, applied index), if one is open here.
    pub fn replica_status(&self, topic: &str) -> Option<starling_replica::TopicStatus> {
        let open = self.state.topics.replication().open.lock();
        open.get(topic).map(|replica| replica.status())
    }

    /// Raft RPCs to the other members over this broker's peer links: each replicated
    /// topic's transport, and this broker's replica id.
    pub fn replica_links(&self) -> Arc<ReplicaLinks> {
        Arc::clone(&self.state.replica_links)
    }

    /// Stops at once, as a crash would look to peers and clients: no drain, no hand-off; the
    /// connections are closed and the sockets released.
    pub async fn abort(self) {
        let _ = self.stop_tx.send(true);
        self.state.upstreams.stop_all();
        self.state.topics.replication().stop_all().await;
        self.endpoint
            .close(conn::close_code::SHUTDOWN.into(), b"broker aborted");
        for t in self.tasks {
            t.abort();
        }
        self.state.peers.close().await;
        self.state.health.set(Phase::Stopped);
    }

    /// Drains and stops: readiness off, refuse new work, flush topics, wait for subscriber
    /// queues to empty (at most `drain_timeout_ms`), then close every connection with
    /// application code 0 ("broker shutting down").
    pub async fn shutdown(self) {
        let state = &self.state;
        state.health.set(Phase::Draining);
        state.metrics.ready.set(0);
        let deadline = Instant::now() + Duration::from_millis(state.cfg.drain_timeout_ms);
        tracing::info!(timeout_ms = state.cfg.drain_timeout_ms, "draining");
        // Publishes accepted before the phase changed (acked on receipt, perhaps) reach their
        // topics first; new ones are refused from now on.
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        let _ =
            tokio::time::timeout_at(deadline.into(), state.publishes.wait_none_in_flight()).await;
        // The replicas stop as soon as the accepted publishes are through: a draining broker
        // refuses publishes, so a replicated topic it leads would take none until its Raft
        // stopped and the others elected a leader. Stopped now, the others elect one while
        // this broker hands off its cache and finishes its subscribers (a rolling restart
        // keeps the topics writable, `docs/operations.md`).
        state.topics.replication().stop_all().await;
        let _ = tokio::time::timeout_at(deadline.into(), state.topics.flush_all()).await;
        if state.cluster.is_clustered() {
            // Hand this broker's cache entries to the members that own them in its absence,
            // retrying for at most half of what is left of the drain (the rest is for the
            // durable logs and the subscribers).
            let until = Instant::now() + deadline.saturating_duration_since(Instant::now()) / 2;
            if let Ok(pushed) =
                tokio::time::timeout_at(deadline.into(), state.handoff.drain_to_successors(until))
                    .await
                && pushed.left > 0
            {
                tracing::warn!(
                    left = pushed.left,
                    "drain: some cache entries could not be handed off"
                );
            }
        }
        if state.cluster.is_clustered() {
            // Durable logs of topics this broker no longer owns whose claim the owner has not
            // taken yet: one last round.
            if let Ok(claimed) =
                tokio::time::timeout_at(deadline.into(), state.log_claims.round()).await
                && claimed.left > 0
            {
                tracing::warn!(
                    left = claimed.left,
                    "drain: some durable logs were not taken by their topics' owners"
                );
            }
        }
        let counters = state.lanes.counters();
        let _ = tokio::time::timeout_at(deadline.into(), counters.wait_queues_empty()).await;
        let left = counters.queued_batches();
        if left > 0 {
            tracing::warn!(
                batches = left,
                "drain timeout: closing with deliveries still queued"
            );
        }
        // Finish every subscription stream and wait (within the deadline) until the peers have
        // acknowledged the data, so closing the connections cannot discard delivered batches.
        state.upstreams.stop_all();
        let finishing = state
            .subscriptions
            .all()
            .into_iter()
            .map(server::subscribe::finish_for_drain);
        let _ =
            tokio::time::timeout_at(deadline.into(), futures::future::join_all(finishing)).await;
        // A replica opened during the drain (a Raft RPC for a topic not open here) stops too.
        state.topics.replication().stop_all().await;
        let _ = self.stop_tx.send(true);
        self.endpoint
            .close(conn::close_code::SHUTDOWN.into(), b"broker shutting down");
        let _ = tokio::time::timeout(Duration::from_secs(2), self.endpoint.wait_idle()).await;
        state.peers.close().await;
        state.health.set(Phase::Stopped);
        for t in self.tasks {
            t.abort();
        }
        tracing::info!("stopped");
    }
}

/// The settings of replicated topics' replicas: the library's defaults, frames bounded by
/// what one `ReplicaRpc` carries, and the durable logs' retention for the committed log.
fn replica_config(
    cfg: &BrokerConfig,
    max_rpc_bytes: usize,
    segment_bytes: Option<u64>,
) -> starling_replica::ReplicaConfig {
    let nonzero = |v: u64| (v > 0).then_some(v);
    let defaults = starling_replica::ReplicaConfig::default();
    let election = Duration::from_millis(cfg.replica_election_timeout_ms);
    starling_replica::ReplicaConfig {
        heartbeat: Duration::from_millis(cfg.replica_heartbeat_ms),
        election_timeout_min: election,
        election_timeout_max: election * 2,
        segment_bytes: segment_bytes.unwrap_or(defaults.segment_bytes),
        retention: starling_storage::RetentionPolicy {
            max_bytes: nonzero(cfg.storage_retention_max_bytes),
            max_age_ms: nonzero(cfg.storage_retention_max_age_ms),
        },
        ..defaults
    }
    .within_frame(max_rpc_bytes)
}

/// Starts the task of every replicated topic whose replica this broker holds on its volume
/// (a `raft/` directory in the topic's directory), so the replica opens and rejoins its Raft
/// group at start rather than at the first client or Raft RPC, and readiness waits for each
/// to open and catch up (`durable::replicated::sync`). After a full restart this is what lets
/// the replicas elect a leader while no broker is Ready yet (clients reach brokers through the
/// Service only once they are Ready).
async fn open_replicas_on_disk(
    state: &Arc<State>,
    durability: Arc<Durability>,
    sync: &ReplicaSync,
) {
    let root = state.cfg.storage_dir.clone();
    let found = tokio::task::spawn_blocking(move || {
        let Some(root) = root else {
            return Vec::new();
        };
        durability
            .topics_on_disk()
            .into_iter()
            .filter(|t| root.join(escape::dir_name(t)).join("raft").is_dir())
            .collect::<Vec<_>>()
    })
    .await
    .unwrap_or_default();
    let found: Vec<String> = found
        .into_iter()
        .filter(|t| state.topics.is_replicated(t))
        .collect();
    if found.is_empty() {
        return;
    }
    tracing::info!(
        topics = found.len(),
        "opening the replicas found on the volume"
    );
    sync.expect(found.iter().cloned(), tokio::time::Instant::now());
    for topic in &found {
        if let Err(e) = state.topics.reserve(topic) {
            tracing::warn!(topic = %topic, error = %e, "replica found on the volume: not opened");
        }
    }
}
