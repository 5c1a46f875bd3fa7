//! The `starling-operator` process: flags (each also readable from an environment variable) and
//! the main loop: logs, metrics endpoint, leader election, controllers (fenced by the lease:
//! they stop and the process exits when it is lost), graceful shutdown.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::watch;

use crate::api_requests;
use crate::autoscale::fetch::Fetcher;
use crate::autoscale::promql::{self, PromQlSource, PrometheusUrl};
use crate::autoscale::runner::AutoscaleContext;
use crate::context::Context;
use crate::controller;
use crate::fence::{Fence, fence};
use crate::http::{self, Health};
use crate::leader::{LeaderElector, LeaseConfig};
use crate::metrics::Metrics;
use crate::names::FIELD_MANAGER;
use crate::telemetry::{self, LogFormat};
use crate::validate::OperatorDefaults;
use starling_config::TierTable;

/// The error of the process's main loop.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Broker image used when neither `spec.image` nor `--broker-image` is given.
pub const DEFAULT_BROKER_IMAGE: &str = concat!("starling/broker:", env!("CARGO_PKG_VERSION"));

/// Flags of the operator.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "starling-operator",
    version,
    about = "Reconciles BrokerCluster resources into Starling broker clusters"
)]
pub struct Args {
    /// Namespaces to watch, comma-separated. Empty: every namespace.
    #[arg(
        long = "watch-namespaces",
        env = "STARLING_OPERATOR_WATCH_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    pub namespaces: Vec<String>,
    /// Broker image for clusters that do not set `spec.image`.
    #[arg(long, env = "STARLING_OPERATOR_BROKER_IMAGE", default_value = DEFAULT_BROKER_IMAGE)]
    pub broker_image: String,
    /// YAML file overriding the tier table (replicas, CPU, memory, capacity per tier), e.g.
    /// rendered from the Helm chart's `tiers` values. Unset: the built-in tiers.
    #[arg(long, env = "STARLING_OPERATOR_TIER_OVERRIDES", value_name = "FILE")]
    pub tier_overrides: Option<std::path::PathBuf>,
    /// DNS domain of the Kubernetes cluster, used in the brokers' member addresses
    /// (`<pod>.<cluster>-headless.<namespace>.svc.<domain>`) and the generated certificates.
    #[arg(
        long,
        env = "STARLING_OPERATOR_CLUSTER_DOMAIN",
        default_value = crate::names::DEFAULT_CLUSTER_DOMAIN
    )]
    pub cluster_domain: String,
    /// Seconds between removing brokers from the member list and stopping them when a cluster
    /// scales down, so they hand their cache keys and subscriptions to the remaining brokers.
    #[arg(long, env = "STARLING_OPERATOR_HANDOFF_GRACE_SECONDS", default_value_t = crate::members::DEFAULT_HANDOFF_GRACE.as_secs())]
    pub handoff_grace_seconds: u64,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(
        long,
        env = "STARLING_OPERATOR_METRICS_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub metrics_addr: SocketAddr,
    /// Elect a leader through a Lease so several replicas can run (`--leader-election=false`
    /// to disable).
    #[arg(long, env = "STARLING_OPERATOR_LEADER_ELECTION", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_election: bool,
    /// Name of the leader Lease.
    #[arg(
        long,
        env = "STARLING_OPERATOR_LEASE_NAME",
        default_value = "starling-operator"
    )]
    pub lease_name: String,
    /// Namespace of the leader Lease. Default: the operator's own namespace.
    #[arg(long, env = "POD_NAMESPACE")]
    pub lease_namespace: Option<String>,
    /// This replica's identity in the Lease. Default: the pod name.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Prometheus server the tier autoscaler reads its signals from with PromQL
    /// (`http(s)://host[:port][/prefix]`). Unset: it scrapes every broker pod's `/metrics`
    /// directly.
    #[arg(long, env = "STARLING_OPERATOR_PROMETHEUS_URL", value_name = "URL")]
    pub prometheus_url: Option<PrometheusUrl>,
    /// PEM bundle of the CA(s) that sign an `https://` Prometheus's certificate, trusted on top
    /// of the system's roots. Used only with `--prometheus-url`.
    #[arg(long, env = "STARLING_OPERATOR_PROMETHEUS_CA", value_name = "FILE")]
    pub prometheus_ca: Option<PathBuf>,
    /// File holding a bearer token sent to Prometheus (`Authorization: Bearer`), read again for
    /// every round so a rotated (projected service-account) token is picked up. Used only with
    /// `--prometheus-url`.
    #[arg(
        long,
        env = "STARLING_OPERATOR_PROMETHEUS_TOKEN_FILE",
        value_name = "FILE"
    )]
    pub prometheus_token_file: Option<PathBuf>,
    /// Series selector of the broker pods' series in Prometheus, with `{namespace}` and
    /// `{name}` (the BrokerCluster's) filled in. Used only with `--prometheus-url`.
    #[arg(
        long,
        env = "STARLING_OPERATOR_PROMETHEUS_SELECTOR",
        default_value = promql::DEFAULT_SELECTOR,
        value_parser = parse_selector
    )]
    pub prometheus_selector: String,
    /// Lookback of `rate()` in the PromQL queries; the range used is the larger of this and the
    /// cluster's `scrapeInterval`. Keep it at least twice Prometheus's scrape interval. Used only
    /// with `--prometheus-url`.
    #[arg(
        long,
        env = "STARLING_OPERATOR_PROMETHEUS_RATE_WINDOW",
        default_value = promql::DEFAULT_RATE_WINDOW,
        value_parser = promql::parse_rate_window
    )]
    pub prometheus_rate_window: Duration,
    /// Log format.
    #[arg(
        long,
        env = "STARLING_OPERATOR_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
    /// Log filter directive (`RUST_LOG` wins when set).
    #[arg(
        long,
        env = "STARLING_OPERATOR_LOG_LEVEL",
        default_value = "info,kube=warn"
    )]
    pub log_level: String,
}

fn parse_selector(text: &str) -> Result<String, promql::SelectorError> {
    promql::check_selector(text).map(|()| text.to_string())
}

impl Args {
    /// The autoscaler's Prometheus source, when `--prometheus-url` is set.
    pub fn prometheus_source(&self) -> Result<Option<PromQlSource>, promql::SourceError> {
        self.prometheus_url
            .clone()
            .map(|url| {
                PromQlSource::new(
                    url,
                    &self.prometheus_selector,
                    self.prometheus_rate_window,
                    promql::Access {
                        ca_file: self.prometheus_ca.clone(),
                        bearer_token_file: self.prometheus_token_file.clone(),
                    },
                )
            })
            .transpose()
    }

    /// Watched namespaces without blanks.
    pub fn watch_namespaces(&self) -> Vec<String> {
        self.namespaces
            .iter()
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty())
            .collect()
    }
}

/// Reads `--tier-overrides`; a missing or invalid file stops the operator with the reason.
pub fn load_tier_overrides(path: Option<&std::path::Path>) -> Result<TierTable, BoxError> {
    let Some(path) = path else {
        return Ok(TierTable::default());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read tier overrides {}: {e}", path.display()))?;
    Ok(TierTable::from_yaml(&text, &path.display().to_string())?)
}

fn identity(args: &Args) -> String {
    args.identity
        .clone()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| format!("starling-operator-{}", std::process::id()))
}

async fn signals(tx: watch::Sender<bool>) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
    tracing::info!("shutting down");
    let _ = tx.send(true);
}

/// Runs the operator until SIGTERM/SIGINT, or until leadership is lost (an error).
pub async fn run(args: Args) -> Result<(), BoxError> {
    telemetry::init(args.log_format, &args.log_level)?;
    let metrics = Metrics::new()?;
    let health = Arc::new(Health::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(signals(stop_tx.clone()));
    let server = {
        let (metrics, health, stop) = (metrics.clone(), health.clone(), stop_rx.clone());
        let addr = args.metrics_addr;
        tokio::spawn(async move {
            if let Err(e) = http::serve(addr, metrics, health, stop).await {
                tracing::error!(%addr, error = %e, "the metrics and health endpoint stopped");
            }
        })
    };

    let client = api_requests::client(kube::Config::infer().await?, metrics.api_requests())?;
    let me = identity(&args);
    let reporter = Reporter {
        controller: FIELD_MANAGER.to_string(),
        instance: Some(me.clone()),
    };
    let prometheus = args.prometheus_source()?;
    let ctx = Context::new(
        client.clone(),
        Recorder::new(client.clone(), reporter),
        metrics.clone(),
        OperatorDefaults {
            broker_image: args.broker_image.clone(),
            tiers: load_tier_overrides(args.tier_overrides.as_deref())?,
            cluster_domain: args.cluster_domain.trim().trim_end_matches('.').to_string(),
            handoff_grace: Duration::from_secs(args.handoff_grace_seconds),
            operator_namespace: args.lease_namespace.clone(),
        },
    );
    // The brokers' `/storage` and `/replicas` (plain HTTP on the pod network, like their
    // `/metrics`).
    let ctx = match Fetcher::new(None) {
        Ok(fetcher) => ctx.with_brokers(fetcher),
        Err(e) => {
            tracing::warn!(error = %e, "cannot build the HTTP client: DiskFull stays Unknown and replicated rolls wait");
            ctx
        }
    };
    let autoscaler = AutoscaleContext {
        client: client.clone(),
        recorder: ctx.recorder.clone(),
        decisions: metrics.autoscale_decisions(),
        tiers: ctx.defaults.tiers.clone(),
        prometheus: prometheus.clone(),
        fence: Fence::never(),
    };
    let namespaces = args.watch_namespaces();
    health.set_ready(true);
    tracing::info!(
        namespaces = ?namespaces,
        broker_image = %args.broker_image,
        leader_election = args.leader_election,
        autoscaler_source = %prometheus.as_ref().map_or_else(
            || "broker pods' /metrics".to_string(),
            |p| format!("prometheus {} (rate window {:?})", p.url, p.rate_window)
        ),
        "starling-operator starting"
    );

    let outcome = if args.leader_election {
        let elector = LeaderElector::new(
            client.clone(),
            LeaseConfig::standard(
                args.lease_name.clone(),
                args.lease_namespace
                    .clone()
                    .unwrap_or_else(|| client.default_namespace().to_string()),
                me,
            ),
        );
        elector.config().check()?;
        let mut rx = stop_rx.clone();
        if elector.acquire(&mut rx).await? {
            tracing::info!("became leader");
            metrics.leader.set(1);
            // Everything that writes is fenced by this lease.
            let (fencer, fenced) = fence();
            let ctx = Arc::new(ctx.with_fence(fenced.clone()));
            let autoscaler = AutoscaleContext {
                fence: fenced,
                ..autoscaler
            };
            let controllers = tokio::spawn(controller::run(
                ctx,
                autoscaler,
                namespaces,
                stop_rx.clone(),
            ));
            let held = elector.hold(&mut rx, &fencer).await;
            metrics.leader.set(0);
            match &held {
                Err(e) => {
                    // The fence is tripped: in-flight reconciles and autoscaler rounds have
                    // been dropped. Stop the rest and exit, so nothing here writes next to
                    // the new leader.
                    tracing::error!(error = %e, "lost the leader lease; stopping");
                    controllers.abort();
                    let _ = controllers.await;
                }
                Ok(()) => {
                    let _ = controllers.await;
                    fencer.trip();
                    if let Err(e) = elector.release().await {
                        tracing::warn!(error = %e, "could not release the lease");
                    }
                }
            }
            held.map_err(Into::into)
        } else {
            Ok(())
        }
    } else {
        controller::run(Arc::new(ctx), autoscaler, namespaces, stop_rx.clone()).await;
        Ok(())
    };
    let _ = stop_tx.send(true);
    let _ = server.await;
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_with_defaults_and_lists() {
        let a = Args::try_parse_from(["starling-operator"]).map_err(|e| e.to_string());
        let a = a.unwrap_or_else(|e| panic!("{e}"));
        assert!(a.watch_namespaces().is_empty());
        assert!(a.leader_election);
        assert_eq!(a.broker_image, DEFAULT_BROKER_IMAGE);
        assert_eq!(a.cluster_domain, "cluster.local");
        assert_eq!(a.handoff_grace_seconds, 15);
        let b = Args::try_parse_from([
            "starling-operator",
            "--watch-namespaces",
            "a, b",
            "--leader-election=false",
            "--log-format",
            "json",
            "--broker-image",
            "reg/starling:1",
            "--cluster-domain",
            "corp.example",
            "--handoff-grace-seconds",
            "30",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.watch_namespaces(), vec!["a".to_string(), "b".to_string()]);
        assert!(!b.leader_election);
        assert_eq!(b.log_format, LogFormat::Json);
        assert_eq!(b.broker_image, "reg/starling:1");
        assert_eq!(b.cluster_domain, "corp.example");
        assert_eq!(b.handoff_grace_seconds, 30);
    }

    #[test]
    fn prometheus_flags_parse_and_bad_values_are_clean_errors() {
        let a = Args::try_parse_from(["starling-operator"]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(a.prometheus_url, None);
        assert!(matches!(a.prometheus_source(), Ok(None)));
        assert_eq!(a.prometheus_selector, promql::DEFAULT_SELECTOR);
        assert_eq!(a.prometheus_rate_window, Duration::from_secs(60));
        let b = Args::try_parse_from([
            "starling-operator",
            "--prometheus-url",
            "http://prometheus.monitoring:9090",
            "--prometheus-rate-window",
            "2m",
            "--prometheus-selector",
            r#"kubernetes_namespace="{namespace}",kubernetes_pod_name=~"{name}-[0-9]+""#,
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let src = b.prometheus_source().unwrap_or_else(|e| panic!("{e}"));
        let src = src.unwrap_or_else(|| panic!("a source"));
        assert_eq!(src.url.host(), "prometheus.monitoring");
        assert_eq!(src.url.port(), 9090);
        assert_eq!(src.rate_window, Duration::from_secs(120));
        assert!(src.selector.starts_with("kubernetes_namespace="));
        for (flag, value, want) in [
            (
                "--prometheus-url",
                "prometheus:9090",
                "scheme must be http or https",
            ),
            ("--prometheus-url", "http://p:99999", "port"),
            ("--prometheus-rate-window", "1 minute", "not a duration"),
            (
                "--prometheus-selector",
                "pod=\"x\"}",
                "brace outside quotes",
            ),
        ] {
            let err = Args::try_parse_from(["starling-operator", flag, value])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(
                err.contains(flag) && err.contains(want),
                "{flag} {value}: {err}"
            );
        }
    }
}
