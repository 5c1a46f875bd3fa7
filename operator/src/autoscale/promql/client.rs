//! One instant query against Prometheus's HTTP API, through the autoscaler's HTTP client
//! ([`Fetcher`]): the only I/O of the Prometheus source.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::query::{ResponseError, parse_response};
use super::url::PrometheusUrl;
use crate::autoscale::fetch::{FetchError, Fetcher};

/// Largest answer read.
const MAX_RESPONSE: usize = 4 * 1024 * 1024;

/// Why one query gave no values.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The request could not be made or answered (connect, TLS, timeout, size, token file).
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// Not a 200 and no API error in the body.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// The body is not a usable answer.
    #[error(transparent)]
    Response(#[from] ResponseError),
}

/// Reads an answer: an API error in the body wins over the status code (Prometheus answers
/// 400/422/503 with one). Pure.
pub fn parse_answer(status: u16, body: &[u8]) -> Result<BTreeMap<String, f64>, QueryError> {
    let text = String::from_utf8_lossy(body);
    match parse_response(&text) {
        Err(e @ ResponseError::Failed { .. }) => Err(e.into()),
        _ if status != 200 => Err(QueryError::Status(status)),
        r => Ok(r?),
    }
}

/// One instant query of `promql` at `at`, with `bearer` as the token when given.
pub async fn query(
    fetcher: &Fetcher,
    url: &PrometheusUrl,
    bearer: Option<&str>,
    promql: &str,
    at: Timestamp,
    timeout: Duration,
) -> Result<BTreeMap<String, f64>, QueryError> {
    let answer = fetcher
        .get(
            &url.query_url(promql, at),
            "application/json",
            bearer,
            timeout,
            MAX_RESPONSE,
        )
        .await?;
    parse_answer(answer.status, &answer.body)
}
