//! The operator's HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (the process is up)
//! and `/readyz` (the operator is initialised: its API client works and, with leader election,
//! the elector runs; standby replicas are ready too).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::metrics::Metrics;

/// Readiness flag shared with the HTTP endpoint.
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    /// Marks the process ready or not.
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::SeqCst);
    }

    /// Whether the process is ready.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::SeqCst)
    }
}

/// The response to a GET of `path`: status, content type and body.
pub fn respond(
    path: &str,
    metrics: &Metrics,
    health: &Health,
) -> (StatusCode, &'static str, String) {
    const TEXT: &str = "text/plain; charset=utf-8";
    match path {
        "/metrics" => (
            StatusCode::OK,
            "text/plain; version=0.0.4",
            metrics.render(),
        ),
        "/healthz" => (StatusCode::OK, TEXT, "ok\n".to_string()),
        "/readyz" if health.is_ready() => (StatusCode::OK, TEXT, "ready\n".to_string()),
        "/readyz" => (
            StatusCode::SERVICE_UNAVAILABLE,
            TEXT,
            "starting\n".to_string(),
        ),
        _ => (StatusCode::NOT_FOUND, TEXT, "not found\n".to_string()),
    }
}

/// Serves the endpoint on `addr` until `shutdown` turns true.
pub async fn serve(
    addr: SocketAddr,
    metrics: Metrics,
    health: Arc<Health>,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let listener = TcpListener::bind(addr).await?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted?,
            _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        };
        let metrics = metrics.clone();
        let health = health.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req: Request<Incoming>| {
                let (status, content_type, body) = respond(req.uri().path(), &metrics, &health);
                let mut resp = Response::new(Full::new(Bytes::from(body)));
                *resp.status_mut() = status;
                if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
                    resp.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
                }
                async move { Ok::<_, Infallible>(resp) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, "http connection ended with an error");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes() -> Result<(), prometheus::Error> {
        let m = Metrics::new()?;
        let h = Health::default();
        assert_eq!(respond("/healthz", &m, &h).0, StatusCode::OK);
        assert_eq!(
            respond("/readyz", &m, &h).0,
            StatusCode::SERVICE_UNAVAILABLE
        );
        h.set_ready(true);
        assert_eq!(respond("/readyz", &m, &h).0, StatusCode::OK);
        let (code, _, body) = respond("/metrics", &m, &h);
        assert_eq!(code, StatusCode::OK);
        assert!(body.contains("starling_operator_leader"));
        assert_eq!(respond("/nope", &m, &h).0, StatusCode::NOT_FOUND);
        Ok(())
    }

    #[tokio::test]
    async fn serves_over_tcp_until_shutdown() -> Result<(), Box<dyn std::error::Error>> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let health = Arc::new(Health::default());
        health.set_ready(true);
        let (tx, rx) = watch::channel(false);
        let server = tokio::spawn(serve(addr, Metrics::new()?, health, rx));
        let mut response = String::new();
        for _ in 0..50 {
            if let Ok(mut s) = tokio::net::TcpStream::connect(addr).await {
                s.write_all(b"GET /readyz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
                    .await?;
                s.read_to_string(&mut response).await?;
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        assert!(response.ends_with("ready\n"), "{response}");
        tx.send(true)?;
        tokio::time::timeout(std::time::Duration::from_secs(5), server).await???;
        Ok(())
    }
}
