//! The HTTP listener: `/metrics` (Prometheus text), `/healthz`, `/livez`, `/readyz`, `/config`,
//! `/replicas` (the replicated topics' replicas open here, JSON) and `/storage` (the storage
//! volume's free bytes and whether it is full, JSON: what the operator's `DiskFull` condition
//! reads) and `/users` (the users table's health, JSON: what the operator's `UsersTableHealthy`
//! condition reads; no user's name).
//!
//! The listener has fixed budgets, so a client that opens connections and never finishes a
//! request (slowloris) cannot hold the port or the broker's memory: at most
//! [`MAX_CONNECTIONS`] connections are served at once for any endpoint, at most
//! [`MAX_CONNECTIONS_PER_SOURCE`] of them from one source address, a request head must arrive
//! within [`HEADER_READ_TIMEOUT`], and a connection lives at most [`CONNECTION_LIFETIME`].
//! Once those slots are taken (or the source's share of them), [`PROBE_SLOTS`] more are kept
//! for the probes, at most [`PROBE_SLOTS_PER_SOURCE`] per source: such a connection is answered
//! on `/livez`, `/healthz` and `/readyz` only, must send its request within
//! [`PROBE_HEADER_TIMEOUT`] and is closed after one answer, so the kubelet's probes are answered
//! while others hold every general slot (see `http_slots`). Past both, a connection is closed as
//! soon as it is accepted. Each closure is counted in `starling_http_refused_total{reason}`.
//! An accept error (for example EMFILE) backs off from [`ACCEPT_BACKOFF_MIN`] up to
//! [`ACCEPT_BACKOFF_MAX`] instead of retrying in a hot loop. The endpoints are for the kubelet's
//! probes and Prometheus, a handful of clients, so the budgets are constants, not config knobs.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::auth::health::UsersHealth;
use crate::cache::Cache;
use crate::durable::policy::{Policies, TopicReport};
use crate::durable::replicated::ReplicaSync;
use crate::durable::{Volume, VolumeReport};
use crate::health::{Health, NotReady, Phase};
use crate::http_slots::{HttpSlots, Pool, SlotLimits, SlotRefusal};
use crate::metrics::{Metrics, http_refusal};

/// What the HTTP endpoints read.
pub struct HttpState {
    /// Metrics to render.
    pub metrics: Arc<Metrics>,
    /// Cache whose counters are copied into the metrics at scrape time.
    pub cache: Arc<Cache>,
    /// Lifecycle state.
    pub health: Arc<Health>,
    /// The effective config as YAML.
    pub config_yaml: String,
    /// The replicas open here and whether each is in sync.
    pub replicas: Arc<ReplicaSync>,
    /// The storage volume.
    pub volume: Arc<Volume>,
    /// What applies to each durable topic open here (`/storage`'s `topics`).
    pub policies: Arc<Policies>,
    /// The users table's health (`None`: no users document is configured).
    pub users: Option<Arc<UsersHealth>>,
}

/// The answer of `GET /storage`: the volume's fields, and the durable topics open here.
#[derive(serde::Serialize)]
struct StorageAnswer {
    #[serde(flatten)]
    volume: VolumeReport,
    topics: Vec<TopicReport>,
}

/// HTTP connections served at once for any endpoint. Probes and scrapes need a few; more go to
/// the probe slots or are closed on accept. It bounds the listener's memory and file
/// descriptors; keeping strangers off the port is the NetworkPolicy's job.
pub const MAX_CONNECTIONS: usize = 256;
/// Of [`MAX_CONNECTIONS`], the most from one source address.
pub const MAX_CONNECTIONS_PER_SOURCE: usize = 32;
/// Connections kept for the probes once the general slots (or the source's share) are taken.
pub const PROBE_SLOTS: usize = 32;
/// Of [`PROBE_SLOTS`], the most from one source address.
pub const PROBE_SLOTS_PER_SOURCE: usize = 4;
/// Time a connection has to deliver a complete request head (first byte included).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Time a connection on a probe slot has to deliver its request head; it is closed after one
/// answer.
pub const PROBE_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest life of one connection, keep-alive included.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(60);
/// Longest life of a connection on a probe slot.
pub const PROBE_LIFETIME: Duration = Duration::from_secs(5);
/// First pause after a failed accept; it doubles on each further failure.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause after failed accepts.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The listener's slot pools.
pub const SLOT_LIMITS: SlotLimits = SlotLimits {
    general: MAX_CONNECTIONS,
    general_per_source: MAX_CONNECTIONS_PER_SOURCE,
    probe: PROBE_SLOTS,
    probe_per_source: PROBE_SLOTS_PER_SOURCE,
};

/// The Prometheus text exposition content type.
pub const METRICS_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

fn text(status: StatusCode, content_type: &str, body: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(body.into()));
    *resp.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    resp
}

const PLAIN: &str = "text/plain; charset=utf-8";

/// Whether `path` is one of the probes a probe slot answers.
pub fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/livez" | "/readyz")
}

/// Answers one request on a connection of `pool`: a probe slot answers the probes only.
pub fn route_in(
    pool: Pool,
    state: &HttpState,
    method: &Method,
    path: &str,
) -> Response<Full<Bytes>> {
    match pool {
        Pool::Probe if !is_probe(path) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            PLAIN,
            "busy: only /livez, /healthz and /readyz are answered now\n",
        ),
        _ => route(state, method, path),
    }
}

/// Answers one request. Pure apart from reading the shared state.
pub fn route(state: &HttpState, method: &Method, path: &str) -> Response<Full<Bytes>> {
    if method != Method::GET && method != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, PLAIN, "only GET and HEAD\n");
    }
    match path {
        "/metrics" => {
            state.metrics.observe_cache(&state.cache.stats());
            state.metrics.observe_process();
            state.metrics.ready.set(i64::from(state.health.is_ready()));
            text(StatusCode::OK, METRICS_CONTENT_TYPE, state.metrics.render())
        }
        "/healthz" | "/livez" => match state.health.is_live() {
            true => text(StatusCode::OK, PLAIN, "ok\n"),
            false => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "stopped\n"),
        },
        "/readyz" => match state.health.readiness() {
            Ok(()) => text(StatusCode::OK, PLAIN, "ready\n"),
            Err(NotReady::Phase(Phase::Starting | Phase::Serving)) => {
                text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "starting\n")
            }
            Err(NotReady::Phase(Phase::Draining)) => {
                text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "draining\n")
            }
            Err(NotReady::Phase(Phase::Stopped)) => {
                text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "stopped\n")
            }
            Err(NotReady::Gate(why)) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                PLAIN,
                format!("catching up: {why}\n"),
            ),
        },
        "/replicas" => json("replicas", &state.replicas.topics()),
        "/storage" => json(
            "storage",
            &StorageAnswer {
                volume: state.volume.report(),
                topics: state.policies.open_topics(),
            },
        ),
        "/users" => match &state.users {
            Some(users) => json("users", &users.report()),
            None => text(
                StatusCode::NOT_FOUND,
                PLAIN,
                "no users document is configured\n",
            ),
        },
        "/config" => text(
            StatusCode::OK,
            "application/yaml",
            state.config_yaml.clone(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try /metrics, /healthz, /readyz, /config, /replicas, /storage or /users\n",
        ),
    }
}

/// `value` as a JSON answer (the endpoint's name in the error, should it not serialise).
fn json(endpoint: &str, value: &impl serde::Serialize) -> Response<Full<Bytes>> {
    match serde_json::to_string(value) {
        Ok(body) => text(StatusCode::OK, "application/json", body),
        Err(e) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            PLAIN,
            format!("{endpoint}: {e}\n"),
        ),
    }
}

/// Serves HTTP/1.1 on `listener` until `stop` turns true, within the module's budgets.
pub async fn serve_http(
    listener: TcpListener,
    state: Arc<HttpState>,
    mut stop: watch::Receiver<bool>,
) {
    let slots = HttpSlots::new(SLOT_LIMITS);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => {
                    backoff = ACCEPT_BACKOFF_MIN;
                    a
                }
                Err(e) => {
                    tracing::warn!(error = %e, pause_ms = backoff.as_millis() as u64, "http accept failed");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = stop.changed() => return,
                    }
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let slot = match slots.take(crate::server::admit::canonical(peer.ip())) {
            Ok(slot) => slot,
            Err(why) => {
                let reason = match why {
                    SlotRefusal::ConnectionCap => http_refusal::CONNECTION_CAP,
                    SlotRefusal::PerSourceCap => http_refusal::PER_SOURCE_CAP,
                };
                state
                    .metrics
                    .http_refused
                    .with_label_values(&[reason])
                    .inc();
                drop(stream);
                continue;
            }
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let pool = slot.pool();
            let _slot = slot;
            let metrics = Arc::clone(&state.metrics);
            let svc = service_fn(move |req: Request<Incoming>| {
                let resp = route_in(pool, &state, req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(resp) }
            });
            let (header_timeout, lifetime) = match pool {
                Pool::General => (HEADER_READ_TIMEOUT, CONNECTION_LIFETIME),
                Pool::Probe => (PROBE_HEADER_TIMEOUT, PROBE_LIFETIME),
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(pool == Pool::General)
                .serve_connection(TokioIo::new(stream), svc);
            match tokio::time::timeout(lifetime, conn).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) if e.is_timeout() => {
                    metrics
                        .http_refused
                        .with_label_values(&[http_refusal::HEADER_TIMEOUT])
                        .inc();
                    tracing::debug!(error = %e, "http connection closed: no request head in time");
                }
                Ok(Err(e)) => tracing::debug!(error = %e, "http connection error"),
                Err(_) => {
                    metrics
                        .http_refused
                        .with_label_values(&[http_refusal::LIFETIME])
                        .inc();
                    tracing::debug!("http connection closed: lifetime reached");
                }
            }
        });
    }
}
