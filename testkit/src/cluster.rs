//! The cluster harness: a cluster CA (rcgen) signing the brokers' server certificate (one leaf,
//! copied per broker so one broker's can be rotated) and their `starling:peer` certificate, a
//! members file, brokers started and stopped by id, clients (routing or plain) and metric
//! scrapes. Peers authenticate each other by certificate; clients connect anonymously
//! (`auth_mode: none` with a client CA, so `PEER` is granted only to the peer certificate).
//! Used by the broker's cluster tests and the CLI's cluster test.

use std::collections::BTreeMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use starling_broker::{Broker, RunningBroker};
use starling_client::{Client, ClientConfig, Trust};
use starling_config::{AckLevel, AuthMode, ConfigOverrides, Profile, StorageFsync, compose};
use starling_placement::Kind;

use crate::http::http_get;
use crate::pki;

pub use crate::payload::{index64 as index, payload64 as payload};

/// Upper bound for anything that should happen "soon" on a loaded 2-core machine.
pub const SOON: Duration = Duration::from_secs(15);
/// The topics document's file in the cluster's directory ([`TestCluster::start_with_topics`]).
const TOPICS_FILE: &str = "topics.json";

/// How often the brokers re-read the members file in these tests.
pub const POLL: Duration = Duration::from_millis(100);

/// Brokers sharing one certificate and one member list (a file per broker).
pub struct TestCluster {
    dir: PathBuf,
    /// Every broker ever started, by id, with its fixed QUIC port.
    ports: BTreeMap<String, u16>,
    /// The running brokers.
    pub running: BTreeMap<String, RunningBroker>,
    fingerprint: [u8; 32],
    /// The member list last written for every broker: a broker started later reads it.
    current: Vec<String>,
    /// The cluster CA (server, peer and client certificates).
    pub ca: pki::Ca,
    /// Durable topic patterns: with them every broker keeps its logs in `data-<id>` of the
    /// cluster's directory (kept across its restarts), fsyncs `always` and acks `persisted`.
    durable: Vec<String>,
    /// `durable_replicas` of every broker.
    replicas: u32,
    /// Segment size of replicated topics' logs (`Broker::with_replica_segment_bytes`).
    replica_segment_bytes: Option<u64>,
}

impl TestCluster {
    /// Starts brokers `ids` as one cluster whose clients connect anonymously.
    pub async fn start(tag: &str, ids: &[&str]) -> TestCluster {
        Self::start_with_users(tag, ids, None).await
    }

    /// Starts brokers `ids` as one cluster; with `users` (a users document), every broker runs
    /// with `auth_mode: required` and reads it from the cluster's `users.yaml`.
    pub async fn start_with_users(tag: &str, ids: &[&str], users: Option<&str>) -> TestCluster {
        Self::start_inner(tag, ids, users, None, &[], 1, None).await
    }

    /// Starts brokers `ids` as one cluster whose topics matching `durable` are durable.
    pub async fn start_durable(tag: &str, ids: &[&str], durable: &[&str]) -> TestCluster {
        Self::start_inner(tag, ids, None, None, durable, 1, None).await
    }

    /// Starts brokers `ids` as one cluster whose topics matching `durable` are durable, each
    /// with `replicas` copies (`durable_replicas`).
    pub async fn start_replicated(
        tag: &str,
        ids: &[&str],
        durable: &[&str],
        replicas: u32,
    ) -> TestCluster {
        Self::start_inner(tag, ids, None, None, durable, replicas, None).await
    }

    /// Like [`TestCluster::start_replicated`], with every broker reading the topics document
    /// `topics` (JSON, `topics_file`) from the cluster's directory.
    pub async fn start_with_topics(
        tag: &str,
        ids: &[&str],
        durable: &[&str],
        replicas: u32,
        topics: &str,
    ) -> TestCluster {
        Self::start_inner(tag, ids, None, Some(topics), durable, replicas, None).await
    }

    /// Like [`TestCluster::start_with_topics`], with replicated topics' Raft and committed
    /// logs in segments of `segment_bytes`, so a test sees retention delete whole segments
    /// of them without writing 64 MiB.
    pub async fn start_with_topics_in_segments(
        tag: &str,
        ids: &[&str],
        replicas: u32,
        topics: &str,
        segment_bytes: u64,
    ) -> TestCluster {
        Self::start_inner(
            tag,
            ids,
            None,
            Some(topics),
            &[],
            replicas,
            Some(segment_bytes),
        )
        .await
    }

    /// Starts brokers `ids` as one cluster reading the topics document `topics` (durable
    /// topics only by its policies, `durable_replicas` 1) and waits until each of them holds
    /// the member list: the setup of the tests of per-topic replicated topics.
    pub async fn start_converged_with_topics(tag: &str, ids: &[&str], topics: &str) -> TestCluster {
        let c = Self::start_with_topics(tag, ids, &[], 1, topics).await;
        c.converge(ids).await;
        c
    }

    /// Rewrites the topics document (write-then-rename, as a ConfigMap volume swaps its
    /// files): every broker puts it in force at its next read (`auth_reload_interval_ms`).
    pub fn write_topics(&self, topics: &str) {
        let tmp = self.dir.join(format!("{TOPICS_FILE}.tmp"));
        std::fs::write(&tmp, topics).expect("write topics");
        std::fs::rename(&tmp, self.dir.join(TOPICS_FILE)).expect("rename topics");
    }

    async fn start_inner(
        tag: &str,
        ids: &[&str],
        users: Option<&str>,
        topics: Option<&str>,
        durable: &[&str],
        replicas: u32,
        replica_segment_bytes: Option<u64>,
    ) -> TestCluster {
        if let Ok(filter) = std::env::var("RUST_LOG") {
            starling_broker::telemetry::init(starling_config::LogFormat::Text, &filter);
        }
        let dir =
            std::env::temp_dir().join(format!("starling-cluster-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        if let Some(users) = users {
            std::fs::write(dir.join("users.yaml"), users).expect("write users");
        }
        if let Some(topics) = topics {
            std::fs::write(dir.join(TOPICS_FILE), topics).expect("write topics");
        }
        let ca = pki::Ca::new("starling test cluster CA");
        let server = ca.issue("localhost", &["localhost"]);
        std::fs::write(dir.join("ca.crt"), &ca.pem).expect("write ca");
        std::fs::write(dir.join("tls.crt"), &server.cert).expect("write cert");
        std::fs::write(dir.join("tls.key"), &server.key).expect("write key");
        let peer = ca.client(starling_broker::auth::PEER_IDENTITY);
        std::fs::write(dir.join("peer.crt"), &peer.cert).expect("write peer cert");
        std::fs::write(dir.join("peer.key"), &peer.key).expect("write peer key");
        let fingerprint = {
            use sha2::Digest;
            sha2::Sha256::digest(&server.der).into()
        };
        let mut c = TestCluster {
            dir,
            ports: BTreeMap::new(),
            running: BTreeMap::new(),
            fingerprint,
            current: Vec::new(),
            ca,
            durable: durable.iter().map(|p| (*p).to_string()).collect(),
            replicas,
            replica_segment_bytes,
        };
        for id in ids {
            c.ports.insert((*id).to_string(), free_udp_port());
        }
        c.write_members(ids);
        let started = futures::future::join_all(ids.iter().map(|id| c.boot(id))).await;
        for (id, b) in ids.iter().zip(started) {
            c.running.insert((*id).to_string(), b);
        }
        c
    }

    /// Broker `viewer`'s own members file: each broker reads its own, so a test can let one
    /// learn of a change later than the others.
    fn members_path(&self, viewer: &str) -> PathBuf {
        self.dir.join(format!("members-{viewer}"))
    }

    /// Writes the member list `ids` (ports assigned on first sight) for every broker ever
    /// started and every broker in `ids`.
    pub fn write_members(&mut self, ids: &[&str]) {
        for id in ids {
            self.ports
                .entry((*id).to_string())
                .or_insert_with(free_udp_port);
        }
        let viewers: Vec<String> = self.ports.keys().cloned().collect();
        let viewers: Vec<&str> = viewers.iter().map(String::as_str).collect();
        self.write_members_seen_by(&viewers, ids);
        self.current = ids.iter().map(|id| (*id).to_string()).collect();
    }

    /// Writes the member list `ids` for the brokers `viewers` only: the others keep the list
    /// they have until a later write reaches them.
    pub fn write_members_seen_by(&mut self, viewers: &[&str], ids: &[&str]) {
        let mut text = String::from("# test cluster\n");
        for id in ids {
            let port = *self
                .ports
                .entry((*id).to_string())
                .or_insert_with(free_udp_port);
            text.push_str(&format!("{id} 127.0.0.1:{port}\n"));
        }
        for viewer in viewers {
            // Write-then-rename, so a poll never sees half a file.
            let tmp = self.dir.join(format!("members-{viewer}.tmp"));
            std::fs::write(&tmp, &text).expect("write members");
            std::fs::rename(&tmp, self.members_path(viewer)).expect("rename members");
        }
    }

    /// The epoch the brokers compute for `ids`.
    pub fn epoch_of(&self, ids: &[&str]) -> u64 {
        let addrs: Vec<(String, String)> = ids
            .iter()
            .map(|id| ((*id).to_string(), format!("127.0.0.1:{}", self.ports[*id])))
            .collect();
        starling_placement::epoch(addrs.iter().map(|(a, b)| (a.as_str(), b.as_str())))
    }

    /// The cluster's directory (CA, certificates, member lists).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// Broker `id`'s server certificate and key files: a copy of the cluster's leaf until
    /// [`TestCluster::rotate_server_cert`] gives it its own.
    fn server_files(&self, id: &str) -> (PathBuf, PathBuf) {
        let (cert, key) = (
            self.dir.join(format!("tls-{id}.crt")),
            self.dir.join(format!("tls-{id}.key")),
        );
        if !cert.exists() {
            std::fs::copy(self.dir.join("tls.crt"), &cert).expect("copy cert");
            std::fs::copy(self.dir.join("tls.key"), &key).expect("copy key");
        }
        (cert, key)
    }

    /// Gives broker `id` a new server certificate signed by the cluster CA, in place (as a
    /// renewed Secret changes its mounted files); returns the new leaf's SHA-256.
    pub fn rotate_server_cert(&self, id: &str) -> [u8; 32] {
        use sha2::Digest;
        let (cert, key) = self.server_files(id);
        let leaf = self.ca.issue("localhost", &["localhost"]);
        pki::write_atomic(&key, &leaf.key);
        pki::write_atomic(&cert, &leaf.cert);
        sha2::Sha256::digest(&leaf.der).into()
    }

    /// The overrides of broker `id` (listeners, certificates, members file, peers by
    /// certificate, anonymous clients).
    pub fn overrides(&self, id: &str) -> ConfigOverrides {
        let port = self.ports[id];
        let topics = self.dir.join(TOPICS_FILE).exists();
        let storage = !self.durable.is_empty() || topics;
        let (cert, key) = self.server_files(id);
        ConfigOverrides {
            quic_listen: Some(SocketAddr::from(([127, 0, 0, 1], port))),
            http_listen: Some("127.0.0.1:0".parse().expect("addr")),
            tls_cert_file: Some(Some(cert)),
            tls_key_file: Some(Some(key)),
            auth_mode: Some(if self.dir.join("users.yaml").exists() {
                AuthMode::Required
            } else {
                AuthMode::None
            }),
            auth_users_file: self
                .dir
                .join("users.yaml")
                .exists()
                .then(|| Some(self.dir.join("users.yaml"))),
            auth_client_ca_file: Some(Some(self.dir.join("ca.crt"))),
            auth_reload_interval_ms: Some(200),
            cluster_peer_cert_file: Some(Some(self.dir.join("peer.crt"))),
            cluster_peer_key_file: Some(Some(self.dir.join("peer.key"))),
            cluster_members_file: Some(Some(self.members_path(id))),
            cluster_poll_interval_ms: Some(POLL.as_millis() as u64),
            cluster_peer_timeout_ms: Some(300),
            drain_timeout_ms: Some(3_000),
            durable_topics: (!self.durable.is_empty()).then(|| self.durable.clone()),
            topics_file: topics.then(|| Some(self.dir.join(TOPICS_FILE))),
            storage_dir: storage.then(|| Some(self.dir.join(format!("data-{id}")))),
            storage_fsync: storage.then_some(StorageFsync::Always),
            ack_level: storage.then_some(AckLevel::Persisted),
            durable_replicas: Some(self.replicas),
            ..ConfigOverrides::default()
        }
    }

    async fn boot(&self, id: &str) -> RunningBroker {
        let o = ConfigOverrides {
            ..self.overrides(id)
        };
        // A restarted member takes its predecessor's port, which the OS may not have released
        // yet (in Kubernetes a new pod has a new network namespace).
        let deadline = Instant::now() + SOON;
        loop {
            let mut broker = Broker::new(compose(Profile::Balanced, None, &o))
                .expect("valid config")
                .with_server_id(id);
            if let Some(bytes) = self.replica_segment_bytes {
                broker = broker.with_replica_segment_bytes(bytes);
            }
            let started = broker.start().await;
            match started {
                Ok(b) => return b,
                Err(starling_broker::BrokerError::Bind { .. }) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("broker {id} starts: {e}"),
            }
        }
    }

    /// Starts broker `id` (not yet in the members file unless written so).
    pub async fn start_broker(&mut self, id: &str) {
        self.ports
            .entry(id.to_string())
            .or_insert_with(free_udp_port);
        if !self.members_path(id).exists() {
            let current = self.current.clone();
            let current: Vec<&str> = current.iter().map(String::as_str).collect();
            self.write_members_seen_by(&[id], &current);
        }
        let b = self.boot(id).await;
        self.running.insert(id.to_string(), b);
    }

    /// Drains and stops broker `id` (the SIGTERM path).
    pub async fn stop(&mut self, id: &str) {
        if let Some(b) = self.running.remove(id) {
            b.shutdown().await;
        }
    }

    /// Stops broker `id` at once, without a drain (a crash).
    pub async fn kill(&mut self, id: &str) {
        if let Some(b) = self.running.remove(id) {
            b.abort().await;
        }
    }

    /// Waits until every running broker in `ids` reports the epoch of `ids`.
    pub async fn converge(&self, ids: &[&str]) {
        let want = self.epoch_of(ids);
        let deadline = Instant::now() + SOON;
        for id in ids {
            let c = self.plain_client(id).await;
            loop {
                let epoch = c.cluster_info().await.map(|i| i.epoch).unwrap_or(0);
                if epoch == want {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{id} did not reach epoch {want:#x}"
                );
                tokio::time::sleep(POLL).await;
            }
            c.close().await;
        }
    }

    /// Broker `id`'s QUIC address.
    pub fn addr(&self, id: &str) -> String {
        format!("127.0.0.1:{}", self.ports[id])
    }

    /// The cluster certificate's SHA-256, as hex.
    pub fn fingerprint_hex(&self) -> String {
        self.fingerprint
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The SHA-256 of the server certificate every broker starts with.
    pub fn fingerprint(&self) -> [u8; 32] {
        self.fingerprint
    }

    /// Client config for broker `id`, trusting the cluster CA (so a rotated server certificate
    /// is trusted too).
    pub fn config(&self, id: &str) -> ClientConfig {
        let mut cfg = ClientConfig::new(
            format!("127.0.0.1:{}", self.ports[id]),
            Trust::CaPem(self.ca.pem.clone().into_bytes()),
        )
        .with_server_name("localhost");
        cfg.cluster_refresh = Duration::from_millis(200);
        cfg.request_timeout = Duration::from_secs(5);
        cfg
    }

    /// A routing SDK client bootstrapped at `id`.
    pub async fn routing_client(&self, id: &str) -> Client {
        Client::connect(self.config(id))
            .await
            .expect("client connects")
    }

    /// A client that sends everything to `id` (like the CLI with `--direct`).
    pub async fn plain_client(&self, id: &str) -> Client {
        Client::connect(self.config(id).without_cluster_routing())
            .await
            .expect("client connects")
    }

    /// One metric of broker `id` (sum over label sets whose labels contain `labels`).
    pub async fn metric(&self, id: &str, name: &str, labels: &str) -> f64 {
        let addr = self.running[id].http_addr;
        let body = http_body(addr, "/metrics").await;
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
                (metric == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }

    /// The body of `GET path` on broker `id`'s HTTP listener.
    pub async fn http(&self, id: &str, path: &str) -> String {
        http_body(self.running[id].http_addr, path).await
    }

    /// `name` summed over every running broker.
    pub async fn metric_sum(&self, name: &str, labels: &str) -> f64 {
        let mut total = 0.0;
        for id in self.running.keys() {
            total += self.metric(id, name, labels).await;
        }
        total
    }

    /// Stops everything: every broker drains (the SIGTERM path), all at once, as when a whole
    /// cluster is deleted (one after the other took a test about two seconds per broker).
    pub async fn shutdown(mut self) {
        let running = std::mem::take(&mut self.running);
        futures::future::join_all(running.into_values().map(RunningBroker::shutdown)).await;
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A name (prefix + number) whose owner of `kind` among `members` is `owner`.
pub fn key_owned_by(prefix: &str, kind: Kind, members: &[&str], owner: &str) -> String {
    (0..100_000)
        .map(|i| format!("{prefix}-{i}"))
        .find(|k| {
            starling_placement::owner(members.iter().copied(), kind, k.as_bytes()) == Some(owner)
        })
        .expect("some key maps to the owner")
}

fn free_udp_port() -> u16 {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr").port()
}

/// The body of `GET path` at `addr`, failing the test when nothing answers.
async fn http_body(addr: SocketAddr, path: &str) -> String {
    let (status, body) = http_get(addr, path).await;
    assert_ne!(status, 0, "GET {path} at {addr}: {body}");
    body
}
