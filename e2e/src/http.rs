//! HTTP GETs for broker, operator and Prometheus endpoints reachable from the node (pod IPs are
//! routed on the node, and Service ClusterIPs through kube-proxy), through the operator's own
//! HTTP client (`starling_operator::autoscale::fetch`), so the suite parses no HTTP by hand.

use std::net::SocketAddr;
use std::sync::OnceLock;
use std::time::Duration;

use starling_operator::autoscale::fetch::Fetcher;

use crate::E2eError;

/// Longest wait for one answer.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Largest body read.
const MAX_BODY: usize = 64 * 1024 * 1024;

fn fetcher() -> Result<&'static Fetcher, E2eError> {
    static FETCHER: OnceLock<Result<Fetcher, String>> = OnceLock::new();
    FETCHER
        .get_or_init(|| Fetcher::new(None).map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|e| E2eError::Http(e.clone()))
}

/// `GET path` on `addr`: status code and body.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), E2eError> {
    get_url(&format!("http://{addr}{path}")).await
}

/// `GET url`: status code and body.
pub async fn get_url(url: &str) -> Result<(u16, String), E2eError> {
    let answer = fetcher()?
        .get(url, "*/*", None, TIMEOUT, MAX_BODY)
        .await
        .map_err(|e| E2eError::Http(format!("{url}: {e}")))?;
    Ok((
        answer.status,
        String::from_utf8_lossy(&answer.body).into_owned(),
    ))
}
