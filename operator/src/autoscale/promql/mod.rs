//! The optional Prometheus signal source (`--prometheus-url`): instead of scraping every broker
//! pod, a round reads the same five rates from a Prometheus server with PromQL and builds the
//! same [`Observation`] the direct path builds, so the window, the decision, the status and the
//! Events are shared.
//!
//! | module | job |
//! | --- | --- |
//! | [`url`] | [`PrometheusUrl`] (`http://` or `https://`), checked at startup, and a query's URL |
//! | [`query`] | the selector, the PromQL text and the parsing of an answer (pure) |
//! | [`client`] | one query through the autoscaler's HTTP client ([`Fetcher`]) |
//! | this file | [`PromQlSource`]: the five queries of a round, assembled into an [`Observation`] |
//!
//! The range is `max(scrapeInterval, --prometheus-rate-window)`, so `rate()` always sees at
//! least two samples: it is a lookback, and the rates it gives are smoothed over it (not the
//! exact `from..to` interval the direct path measures). `rate()` handles counter resets itself,
//! so `resets` is always 0 here. A pod is rated when it has a series in every one of the five
//! answers; an absent pod or a failed query makes the round incomplete, with the reason in
//! `missing`. The first round of a cluster only sets the baseline (`from`), as the direct path
//! does, so every observation's `from` is the previous one's `to`.

pub mod client;
pub mod query;
pub mod url;

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::fetch::{Fetcher, TlsSetupError, read_token};
use super::prom::{
    CPU_SECONDS, DELIVERED_BYTES, DELIVERED_EVENTS, PUBLISHED_BYTES, PUBLISHED_MESSAGES,
};
use super::rates::{Observation, PodRates};
pub use client::{QueryError, parse_answer, query};
pub use query::{
    ResponseError, SelectorError, check_selector, fill_selector, parse_response, query_text, range,
};
pub use url::{PrometheusUrl, UrlError};

/// The counters queried, in the order of [`PodRates`]' fields.
pub const COUNTERS: [&str; 5] = [
    PUBLISHED_MESSAGES,
    DELIVERED_EVENTS,
    PUBLISHED_BYTES,
    DELIVERED_BYTES,
    CPU_SECONDS,
];
/// Default of `--prometheus-selector`: the cluster's StatefulSet pods in its namespace, by the
/// `namespace` and `pod` target labels of a pod-role scrape.
pub const DEFAULT_SELECTOR: &str = r#"namespace="{namespace}",pod=~"{name}-[0-9]+""#;
/// Default of `--prometheus-rate-window`.
pub const DEFAULT_RATE_WINDOW: &str = "1m";
/// Longest wait for one query.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(5);

/// The observation of a cluster's first round: only the baseline (`from` for the next one),
/// incomplete. Pure.
pub fn baseline(at: Timestamp, pods: &[String], expected: usize) -> Observation {
    Observation {
        from: at,
        to: at,
        total: PodRates::default(),
        pod_cpu: BTreeMap::new(),
        pods_rated: 0,
        pods_expected: expected,
        resets: 0,
        missing: pods
            .iter()
            .map(|p| format!("{p}: first Prometheus round (baseline)"))
            .collect(),
    }
}

/// The observation of one round from the five answers (in [`COUNTERS`] order): a pod is rated
/// when every answer has it; each absent pod and each failed query is a reason in `missing`.
/// Pods in the answers that are not in `pods` (deleted pods still inside the lookback) are
/// ignored. Pure.
pub fn assemble<E: fmt::Display>(
    from: Timestamp,
    to: Timestamp,
    pods: &[String],
    expected: usize,
    answers: &[Result<BTreeMap<String, f64>, E>; 5],
) -> Observation {
    let mut missing: Vec<String> = Vec::new();
    for (counter, a) in COUNTERS.iter().zip(answers) {
        if let Err(e) = a {
            let why = format!("prometheus: {counter}: {e}");
            if !missing.contains(&why) {
                missing.push(why);
            }
        }
    }
    let mut total = PodRates::default();
    let mut pod_cpu = BTreeMap::new();
    let mut rated = 0;
    for pod in pods {
        let values: Vec<Option<f64>> = answers
            .iter()
            .map(|a| a.as_ref().ok().and_then(|m| m.get(pod).copied()))
            .collect();
        match values.as_slice() {
            [Some(p), Some(d), Some(pb), Some(db), Some(cpu)] => {
                rated += 1;
                total.publish += p;
                total.delivered += d;
                total.published_bytes += pb;
                total.delivered_bytes += db;
                total.cpu_cores += cpu;
                pod_cpu.insert(pod.clone(), *cpu);
            }
            _ => {
                let absent: Vec<&str> = COUNTERS
                    .iter()
                    .zip(answers.iter().zip(&values))
                    .filter(|(_, (a, v))| a.is_ok() && v.is_none())
                    .map(|(c, _)| *c)
                    .collect();
                if !absent.is_empty() {
                    missing.push(format!(
                        "no series in Prometheus for pod {pod} ({})",
                        absent.join(", ")
                    ));
                }
            }
        }
    }
    if expected > pods.len() {
        missing.push(format!(
            "{} of {expected} expected broker pods exist",
            pods.len()
        ));
    }
    Observation {
        from,
        to,
        total,
        pod_cpu,
        pods_rated: rated,
        pods_expected: expected,
        resets: 0,
        missing,
    }
}

/// Why the Prometheus source could not be set up from the flags.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// `--prometheus-selector`.
    #[error(transparent)]
    Selector(#[from] SelectorError),
    /// `--prometheus-ca`.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
}

/// How the source authenticates to Prometheus and trusts it (beyond the system's roots).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// `--prometheus-ca`: a PEM bundle trusted for an `https://` URL.
    pub ca_file: Option<PathBuf>,
    /// `--prometheus-token-file`: sent as `Authorization: Bearer`, read every round.
    pub bearer_token_file: Option<PathBuf>,
}

/// The Prometheus source as configured by the flags.
#[derive(Debug, Clone)]
pub struct PromQlSource {
    /// `--prometheus-url`.
    pub url: PrometheusUrl,
    /// `--prometheus-selector`, with `{namespace}` and `{name}`.
    pub selector: String,
    /// `--prometheus-rate-window`.
    pub rate_window: Duration,
    /// Per query.
    pub timeout: Duration,
    /// The token file, when one is given.
    pub bearer_token_file: Option<PathBuf>,
    fetcher: Fetcher,
}

impl PromQlSource {
    /// A source with a checked selector, its HTTP client and the default timeout.
    pub fn new(
        url: PrometheusUrl,
        selector: &str,
        rate_window: Duration,
        access: Access,
    ) -> Result<Self, SourceError> {
        check_selector(selector)?;
        let fetcher = Fetcher::new(access.ca_file.as_deref())?;
        Ok(PromQlSource {
            url,
            selector: selector.to_string(),
            rate_window,
            timeout: QUERY_TIMEOUT,
            bearer_token_file: access.bearer_token_file,
            fetcher,
        })
    }

    /// One round for the cluster `namespace/name` whose broker pods are `pods` (`expected` of
    /// them should exist), evaluated at `at`. `prev` is the previous round's `to`; without it
    /// the round is the baseline and nothing is queried.
    #[allow(clippy::too_many_arguments)]
    pub async fn observe(
        &self,
        namespace: &str,
        name: &str,
        pods: &[String],
        expected: usize,
        interval: Duration,
        prev: Option<Timestamp>,
        at: Timestamp,
    ) -> Observation {
        let Some(from) = prev else {
            return baseline(at, pods, expected);
        };
        let every = |why: String| {
            let err = || Err::<BTreeMap<String, f64>, _>(why.clone());
            assemble(
                from,
                at,
                pods,
                expected,
                &[err(), err(), err(), err(), err()],
            )
        };
        let selector = match fill_selector(&self.selector, namespace, name) {
            Ok(s) => s,
            Err(e) => return every(e.to_string()),
        };
        let token = match self
            .bearer_token_file
            .as_deref()
            .map(read_token)
            .transpose()
        {
            Ok(t) => t,
            Err(e) => return every(e.to_string()),
        };
        let range = range(interval, self.rate_window);
        let token = token.as_deref();
        let [a, b, c, d, e] = COUNTERS.map(|counter| {
            let q = query_text(counter, &selector, range);
            async move { query(&self.fetcher, &self.url, token, &q, at, self.timeout).await }
        });
        let answers = tokio::join!(a, b, c, d, e);
        assemble(
            from,
            at,
            pods,
            expected,
            &[answers.0, answers.1, answers.2, answers.3, answers.4],
        )
    }
}

/// Parses `--prometheus-rate-window` (`1m`, `90s`, `1m30s`; at least 1s).
pub fn parse_rate_window(text: &str) -> Result<Duration, String> {
    match crate::crd::duration::parse(text) {
        Some(d) if d >= Duration::from_secs(1) => Ok(d),
        Some(_) => Err("the rate window must be at least 1s".into()),
        None => Err(format!(
            "`{text}` is not a duration such as 1m, 90s or 1m30s (at least 1s)"
        )),
    }
}

#[cfg(test)]
mod tests;
