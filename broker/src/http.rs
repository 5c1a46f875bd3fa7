//! The HTTP listener: `/metrics` (Prometheus text), `/healthz`, `/readyz` and `/config`.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::cache::Cache;
use crate::health::{Health, Phase};
use crate::metrics::Metrics;

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
}

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

/// Answers one request. Pure apart from reading the shared state.
pub fn route(state: &HttpState, method: &Method, path: &str) -> Response<Full<Bytes>> {
    const PLAIN: &str = "text/plain; charset=utf-8";
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
        "/readyz" => match state.health.phase() {
            Phase::Serving => text(StatusCode::OK, PLAIN, "ready\n"),
            Phase::Starting => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "starting\n"),
            Phase::Draining => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "draining\n"),
            Phase::Stopped => text(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "stopped\n"),
        },
        "/config" => text(
            StatusCode::OK,
            "application/yaml",
            state.config_yaml.clone(),
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            PLAIN,
            "not found: try /metrics, /healthz, /readyz or /config\n",
        ),
    }
}

/// Serves HTTP/1.1 on `listener` until `stop` turns true.
pub async fn serve(listener: TcpListener, state: Arc<HttpState>, mut stop: watch::Receiver<bool>) {
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!(error = %e, "http accept failed");
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let svc = service_fn(move |req: Request<Incoming>| {
                let resp = route(&state, req.method(), req.uri().path());
                async move { Ok::<_, Infallible>(resp) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc);
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "http connection error");
            }
        });
    }
}
