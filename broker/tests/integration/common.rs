//! Shared harness: start a broker on ephemeral ports, connect SDK or raw QUIC clients, scrape
//! HTTP endpoints.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use rustls::pki_types::CertificateDer;
use starling_broker::{Broker, RunningBroker};
use starling_client::{Client, ClientConfig, Subscription, Trust};
use starling_config::{AuthMode, ConfigOverrides, Profile, compose};
use starling_proto::{Frame, FrameDecoder, Hello, PROTOCOL_VERSION, read_frame, write_frame};

pub use starling_testkit::http::http_get;
pub use starling_testkit::payload::{index, payload};

/// Generous upper bound for anything that should happen "soon" on a loaded 2-core machine.
pub const SOON: Duration = Duration::from_secs(10);

pub struct TestBroker {
    pub running: RunningBroker,
}

/// Overrides every test starts from: loopback ephemeral ports, quiet logs, and
/// `auth_mode: none` (the access-control tests, `auth.rs`, set up their own identities).
pub fn base_overrides() -> ConfigOverrides {
    ConfigOverrides {
        auth_mode: Some(AuthMode::None),
        quic_listen: Some("127.0.0.1:0".parse().expect("addr")),
        http_listen: Some("127.0.0.1:0".parse().expect("addr")),
        drain_timeout_ms: Some(2_000),
        ..ConfigOverrides::default()
    }
}

pub async fn start(profile: Profile, overrides: ConfigOverrides) -> TestBroker {
    if std::env::var_os("RUST_LOG").is_some() {
        starling_broker::telemetry::init(starling_config::LogFormat::Text, "info");
    }
    let mut o = base_overrides();
    o.merge(&overrides);
    let cfg = compose(profile, None, &o);
    let running = Broker::new(cfg)
        .expect("valid config")
        .start()
        .await
        .expect("broker starts");
    TestBroker { running }
}

pub async fn start_default() -> TestBroker {
    start(Profile::Balanced, ConfigOverrides::default()).await
}

impl TestBroker {
    pub fn addr(&self) -> SocketAddr {
        self.running.quic_addr
    }

    pub fn client_config(&self) -> ClientConfig {
        let pem = pem_of(&self.running.certificate_der);
        ClientConfig::new(self.addr().to_string(), Trust::CaPem(pem.into_bytes()))
            .with_server_name("localhost")
    }

    pub async fn client(&self) -> Client {
        Client::connect(self.client_config())
            .await
            .expect("client connects")
    }

    pub async fn http_get(&self, path: &str) -> (u16, String) {
        http_get(self.running.http_addr, path).await
    }

    pub async fn metrics(&self) -> Metrics {
        let (status, body) = self.http_get("/metrics").await;
        assert_eq!(status, 200, "/metrics: {body}");
        Metrics::parse(&body)
    }

    /// Raw QUIC connection (ALPN `starling/1`) trusting the broker's certificate.
    pub async fn raw(&self, stream_window: Option<u32>) -> quinn::Connection {
        self.try_raw(stream_window).await.expect("handshake")
    }

    /// [`raw`](Self::raw), returning a refused or failed handshake instead of failing the test.
    pub async fn try_raw(
        &self,
        stream_window: Option<u32>,
    ) -> Result<quinn::Connection, quinn::ConnectionError> {
        let ep = self.raw_endpoint(stream_window);
        ep.connect(self.addr(), "localhost").expect("connect").await
    }

    /// A client endpoint (one UDP socket) for raw connections to this broker; many connections
    /// may share it.
    pub fn raw_endpoint(&self, stream_window: Option<u32>) -> quinn::Endpoint {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from(self.running.certificate_der.clone()))
            .expect("cert");
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut crypto = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("tls13")
            .with_root_certificates(roots)
            .with_no_client_auth();
        crypto.alpn_protocols = vec![b"starling/1".to_vec()];
        let quic = quinn::crypto::rustls::QuicClientConfig::try_from(crypto).expect("quic tls");
        let mut cfg = quinn::ClientConfig::new(Arc::new(quic));
        if let Some(w) = stream_window {
            let mut t = quinn::TransportConfig::default();
            t.stream_receive_window(w.into());
            t.receive_window((w * 4).into());
            cfg.transport_config(Arc::new(t));
        }
        let mut ep =
            quinn::Endpoint::client("127.0.0.1:0".parse().expect("addr")).expect("endpoint");
        ep.set_default_client_config(cfg);
        ep
    }

    /// Raw connection that has completed the Starling handshake.
    pub async fn raw_ready(&self, stream_window: Option<u32>) -> quinn::Connection {
        let conn = self.raw(stream_window).await;
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        write_frame(&mut send, &hello(PROTOCOL_VERSION, PROTOCOL_VERSION))
            .await
            .expect("hello");
        match read_one(&mut recv).await {
            Some(Frame::HelloOk(_)) => {}
            other => panic!("expected HelloOk, got {other:?}"),
        }
        conn
    }

    /// A raw connection past a `Hello` granted `WILDCARDS` (its `Subscribe` topics may be
    /// patterns).
    pub async fn wildcard_ready(&self) -> quinn::Connection {
        self.ready_with(starling_proto::features::WILDCARDS).await
    }

    /// A raw connection past a `Hello` asking for, and granted, every feature of `features`.
    pub async fn ready_with(&self, features: u64) -> quinn::Connection {
        let conn = self.raw(None).await;
        let (mut send, mut recv) = conn.open_bi().await.expect("stream");
        let mut hello = hello(PROTOCOL_VERSION, PROTOCOL_VERSION);
        if let Frame::Hello(h) = &mut hello {
            h.features = features;
        }
        write_frame(&mut send, &hello).await.expect("hello");
        match read_one(&mut recv).await {
            Some(Frame::HelloOk(ok)) => {
                assert_eq!(ok.features & features, features, "features granted");
            }
            other => panic!("expected HelloOk, got {other:?}"),
        }
        conn
    }
}

pub fn hello(min: u8, max: u8) -> Frame {
    Frame::Hello(Hello {
        min_version: min,
        max_version: max,
        features: 0,
        client_name: "test".into(),
        auth_token: None,
    })
}

pub async fn read_one(recv: &mut quinn::RecvStream) -> Option<Frame> {
    read_next(recv, &mut BytesMut::new()).await
}

/// The next frame of a stream that carries several, `buf` keeping what was read past it.
pub async fn read_next(recv: &mut quinn::RecvStream, buf: &mut BytesMut) -> Option<Frame> {
    let dec = FrameDecoder::new(64 << 20);
    tokio::time::timeout(SOON, read_frame(recv, buf, &dec, 4096))
        .await
        .ok()?
        .ok()?
}

fn pem_of(der: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::new();
    for chunk in der.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |acc, (i, b)| acc | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                b64.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let body: Vec<String> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| String::from_utf8_lossy(c).into_owned())
        .collect();
    format!(
        "-----BEGIN CERTIFICATE-----\n{}\n-----END CERTIFICATE-----\n",
        body.join("\n")
    )
}

/// Parsed `/metrics`: samples keyed by `name{sorted labels}`.
pub struct Metrics(pub HashMap<String, f64>);

impl Metrics {
    pub fn parse(body: &str) -> Metrics {
        let lines = body.lines().map(|l| Ok(l.to_string()));
        let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text format");
        let mut out = HashMap::new();
        for s in scrape.samples {
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            labels.sort();
            let key = if labels.is_empty() {
                s.metric.clone()
            } else {
                let l: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                format!("{}{{{}}}", s.metric, l.join(","))
            };
            let v = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            };
            out.insert(key, v);
        }
        Metrics(out)
    }

    pub fn get(&self, key: &str) -> f64 {
        self.0.get(key).copied().unwrap_or(0.0)
    }

    /// Sum over every series of a metric whose key starts with `prefix`.
    pub fn sum(&self, prefix: &str) -> f64 {
        self.0
            .iter()
            .filter(|(k, _)| k.starts_with(prefix))
            .map(|(_, v)| v)
            .sum()
    }
}

/// Receives `n` events, failing the test on error or timeout.
pub async fn recv_n(sub: &mut Subscription, n: usize) -> Vec<(u64, Bytes)> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(ev))) => out.push((ev.seq, ev.payload)),
            Ok(Some(Err(e))) => panic!("subscription error after {} events: {e}", out.len()),
            Ok(None) => panic!("subscription ended after {} of {n} events", out.len()),
            Err(_) => panic!("timed out after {} of {n} events", out.len()),
        }
    }
    out
}

/// Polls `/metrics` until `pred` holds.
pub async fn wait_metrics(b: &TestBroker, what: &str, pred: impl Fn(&Metrics) -> bool) -> Metrics {
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        let m = b.metrics().await;
        if pred(&m) {
            return m;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("metrics never satisfied: {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Resident set size of this test process (broker and clients together), in bytes.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// A well-behaved client that publishes to its own topic and receives each message back, timing
/// every round trip: what an ordinary user sees while a test attacks the broker.
pub struct Bystander {
    client: Client,
    sub: Subscription,
    next: u32,
    /// The slowest round trip so far.
    pub worst: Duration,
}

impl Bystander {
    /// Subscribes to `bystander` and makes a first round trip.
    pub async fn start(b: &TestBroker) -> Bystander {
        let client = b.client().await;
        let sub = client.subscribe("bystander").await.expect("subscribe");
        let mut me = Bystander {
            client,
            sub,
            next: 0,
            worst: Duration::ZERO,
        };
        me.round_trip().await;
        me.worst = Duration::ZERO;
        me
    }

    /// One acked publish and its delivery, in order; returns how long it took.
    pub async fn round_trip(&mut self) -> Duration {
        let t0 = std::time::Instant::now();
        self.client
            .publish_acked("bystander", payload(self.next))
            .await
            .expect("bystander publish");
        let got = recv_n(&mut self.sub, 1).await;
        assert_eq!(
            index(&got[0].1),
            self.next,
            "bystander message out of order"
        );
        self.next += 1;
        let took = t0.elapsed();
        self.worst = self.worst.max(took);
        took
    }

    /// Round trips every 10 ms until `task` has finished; returns how many were made.
    pub async fn until_finished<T>(&mut self, task: &tokio::task::JoinHandle<T>) -> u32 {
        let mut n = 0;
        while !task.is_finished() {
            self.round_trip().await;
            n += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        n
    }
}
