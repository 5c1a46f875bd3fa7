//! [`Target`]: the broker a run talks to — in-process (`--embedded`, with `auth_mode: none`)
//! or external (`--server`, with the credential options) — with the client config to reach
//! it, the slow-subscriber policy in force and the broker's CPU clock. Against an external
//! broker the client takes the broker's path settings (MTU, socket buffers, congestion
//! controller, ACK frequency) from its `/config`.

use std::net::SocketAddr;

use starling_broker::client_settings::{path_tuning, sdk_profile};
use starling_client::{ClientConfig, Credentials, Trust, certificate_fingerprint};
use starling_config::{AuthMode, ConfigOverrides, Profile, SlowSubscriberPolicy, compose};

use super::args::TargetArgs;
use super::embedded::{BROKER_THREAD, EmbeddedBroker};
use super::error::BenchError;
use super::probe;
use crate::args::Globals;

/// Thread-name prefixes of the embedded broker (runtime and batch timer).
const BROKER_THREADS: &[&str] = &[BROKER_THREAD, "starling-hires"];
/// The external broker when neither `--server` nor a credentials directory names one.
const DEFAULT_SERVER: &str = "127.0.0.1:7400";
/// Default HTTP port of an external broker.
const DEFAULT_HTTP_PORT: u16 = starling_config::DEFAULT_HTTP_PORT;

/// A broker under test.
pub(crate) struct Target {
    base: ClientConfig,
    metrics_addr: Option<String>,
    broker_pid: Option<u32>,
    /// Slow-subscriber policy in force, when known.
    pub(crate) policy: Option<SlowSubscriberPolicy>,
    /// The profile the clients (and an embedded broker) use.
    pub(crate) profile: Profile,
    embedded: Option<EmbeddedBroker>,
}

/// The broker's CPU clock at one instant.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct CpuMark {
    metrics: Option<f64>,
    threads: Option<f64>,
    process: Option<f64>,
    /// This process (the load generator), less the embedded broker's threads.
    client: Option<f64>,
}

impl Target {
    /// Starts the embedded broker or describes the external one.
    pub(crate) async fn open(g: &Globals, t: &TargetArgs) -> Result<Self, BenchError> {
        if t.embedded {
            return Self::embedded(g, t).await;
        }
        let usage = |e: starling_client::ClientError| BenchError::Usage(e.to_string());
        let id = &g.identity;
        let chosen = Credentials::select(
            id.cert.as_deref(),
            id.key.as_deref(),
            id.token.as_ref().and_then(Credentials::auth_token),
            id.dir.as_deref(),
        )
        .map_err(usage)?;
        let trust = Trust::select_or(
            g.ca.clone(),
            g.insecure,
            g.fingerprint.as_deref(),
            chosen.trust,
        )
        .map_err(usage)?;
        let server = g
            .server
            .clone()
            .or(chosen.address)
            .unwrap_or_else(|| DEFAULT_SERVER.to_string());
        let mut base = client_config(g, server.clone(), trust).with_credentials(chosen.credentials);
        base.server_name = g.server_name.clone();
        let metrics_addr = t
            .metrics_addr
            .clone()
            .unwrap_or_else(|| default_metrics_addr(&server));
        let yaml = probe::http_get(&metrics_addr, "/config").await;
        if yaml.is_none() {
            tracing::warn!(%metrics_addr, "cannot read the broker's /config or /metrics: no CPU figures, policy unknown, path settings the profile's");
        }
        let broker_config = yaml.as_deref().and_then(probe::parse_config);
        let reported = match &broker_config {
            Some(c) => Some(c.slow_subscriber_policy),
            None => yaml.as_deref().and_then(probe::parse_policy),
        };
        // The bench's connections take the broker's path settings (datagram sizes, socket
        // buffers, congestion controller, ACK frequency), so a broker set up for jumbo frames
        // is measured with a client that is too.
        if let Some(c) = &broker_config {
            base.transport.path = path_tuning(c);
        }
        if let (Some(given), Some(seen)) = (t.policy, reported)
            && given != seen
        {
            tracing::warn!(%given, %seen, "--policy differs from the broker's slow_subscriber_policy; using the broker's");
        }
        Ok(Target {
            base,
            metrics_addr: Some(metrics_addr),
            broker_pid: t.broker_pid,
            policy: reported.or(t.policy),
            profile: g.profile,
            embedded: None,
        })
    }

    /// The in-process broker runs with `auth_mode: none`: the bench measures the data path,
    /// and the broker's own tests cover authentication.
    async fn embedded(g: &Globals, t: &TargetArgs) -> Result<Self, BenchError> {
        if g.identity.is_given() {
            tracing::warn!(
                "--embedded runs its broker without authentication; the credential options are ignored"
            );
        }
        let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
        let overrides = ConfigOverrides {
            auth_mode: Some(AuthMode::None),
            quic_listen: Some(loopback(0)),
            http_listen: Some(loopback(0)),
            slow_subscriber_policy: t.policy,
            drain_timeout_ms: Some(2_000),
            ..ConfigOverrides::default()
        };
        let cfg = compose(g.profile, None, &overrides);
        let policy = cfg.slow_subscriber_policy;
        let broker = EmbeddedBroker::start(cfg).await?;
        let trust = Trust::Fingerprint(certificate_fingerprint(&broker.certificate_der));
        let base = client_config(g, broker.quic_addr.to_string(), trust);
        Ok(Target {
            base,
            metrics_addr: Some(broker.http_addr.to_string()),
            broker_pid: None,
            policy: Some(policy),
            profile: g.profile,
            embedded: Some(broker),
        })
    }

    /// A client config for this broker (pool sizes from the profile).
    pub(crate) fn client_config(&self) -> ClientConfig {
        self.base.clone()
    }

    /// Whether the broker runs in this process.
    pub(crate) fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// Reads the broker's CPU clock.
    pub(crate) async fn cpu(&self) -> CpuMark {
        let metrics = match &self.metrics_addr {
            Some(addr) => probe::http_get(addr, "/metrics")
                .await
                .and_then(|body| probe::parse_cpu(&body)),
            None => None,
        };
        let threads = if self.is_embedded() {
            probe::threads_cpu_s(BROKER_THREADS)
        } else {
            None
        };
        let process = self.broker_pid.and_then(probe::process_cpu_s);
        let client =
            probe::process_cpu_s(std::process::id()).map(|own| own - threads.unwrap_or(0.0));
        CpuMark {
            metrics,
            threads,
            process,
            client,
        }
    }

    /// CPU seconds the load generator (this process, less an embedded broker) used between two marks.
    pub(crate) fn client_cpu_used(before: CpuMark, after: CpuMark) -> Option<f64> {
        Some((after.client? - before.client?).max(0.0))
    }

    /// Broker CPU seconds between two marks and where they came from, best
    /// source first: for an embedded broker its threads (the process clock
    /// also counts the load generator); for an external one `/proc/PID/stat`
    /// when `--broker-pid` is given (10 ms resolution), else `/metrics`'
    /// `process_cpu_seconds_total` (whole seconds only).
    pub(crate) fn cpu_used(before: CpuMark, after: CpuMark) -> (Option<f64>, Option<String>) {
        let diff = |a: Option<f64>, b: Option<f64>| Some((b? - a?).max(0.0));
        if let Some(s) = diff(before.threads, after.threads) {
            return (Some(s), Some("threads".into()));
        }
        if let Some(s) = diff(before.process, after.process) {
            return (Some(s), Some("proc".into()));
        }
        match diff(before.metrics, after.metrics) {
            Some(s) => (Some(s), Some("metrics".into())),
            None => (None, None),
        }
    }

    /// Stops an embedded broker.
    pub(crate) async fn close(self) {
        if let Some(broker) = self.embedded {
            broker.shutdown().await;
        }
    }
}

fn client_config(g: &Globals, server: String, trust: Trust) -> ClientConfig {
    let mut cfg = ClientConfig::new(server, trust)
        .with_profile(sdk_profile(g.profile))
        .with_client_name(format!("starling-bench/{}", env!("CARGO_PKG_VERSION")));
    cfg.request_timeout = g.timeout;
    cfg.connect_timeout = g.timeout;
    cfg
}

/// `host:9400` for a `--server` of `host:port` (or a bare host).
fn default_metrics_addr(server: &str) -> String {
    let host = match server.rsplit_once(':') {
        Some((host, port)) if port.parse::<u16>().is_ok() => host,
        _ => server,
    };
    format!("{host}:{DEFAULT_HTTP_PORT}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_address_follows_the_server_host() {
        assert_eq!(default_metrics_addr("127.0.0.1:7400"), "127.0.0.1:9400");
        assert_eq!(default_metrics_addr("broker"), "broker:9400");
        assert_eq!(default_metrics_addr("[::1]:7400"), "[::1]:9400");
    }

    #[test]
    fn thread_clock_wins_over_process_clock() {
        let before = CpuMark {
            metrics: Some(1.0),
            threads: Some(0.5),
            process: None,
            client: None,
        };
        let after = CpuMark {
            metrics: Some(3.0),
            threads: Some(1.5),
            process: None,
            client: None,
        };
        assert_eq!(
            Target::cpu_used(before, after),
            (Some(1.0), Some("threads".into()))
        );
        let external = |m| CpuMark {
            metrics: m,
            threads: None,
            process: None,
            client: None,
        };
        let with_pid = |p| CpuMark {
            metrics: Some(1.0),
            threads: None,
            process: Some(p),
            client: None,
        };
        assert_eq!(
            Target::cpu_used(with_pid(2.0), with_pid(2.5)),
            (Some(0.5), Some("proc".into()))
        );
        assert_eq!(
            Target::cpu_used(external(Some(1.0)), external(Some(1.25))),
            (Some(0.25), Some("metrics".into()))
        );
        assert_eq!(
            Target::cpu_used(external(None), external(Some(1.0))),
            (None, None)
        );
    }
}
