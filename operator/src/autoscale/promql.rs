//! The optional Prometheus signal source (`--prometheus-url`): instead of scraping every broker
//! pod, a round reads the same five rates from a Prometheus server with PromQL and builds the
//! same [`Observation`] the direct path builds, so the window, the decision, the status and the
//! Events are shared.
//!
//! This module owns:
//! - [`PrometheusUrl`]: the `--prometheus-url` value (`http://` only), checked at startup;
//! - the series selector (`--prometheus-selector`, with `{namespace}` and `{name}`) and the
//!   query text, `sum by (pod) (rate(<counter>{<selector>}[<range>]))`. Pure;
//! - the parsing of a `/api/v1/query` answer into one value per pod, with typed errors. Pure;
//! - the assembly of the five answers into an [`Observation`]. Pure;
//! - [`query`]: the one HTTP GET (HTTP/1.0 over a `TcpStream`, with a timeout and a body cap).
//!
//! The range is `max(scrapeInterval, --prometheus-rate-window)`, so `rate()` always sees at
//! least two samples: it is a lookback, and the rates it gives are smoothed over it (not the
//! exact `from..to` interval the direct path measures). `rate()` handles counter resets itself,
//! so `resets` is always 0 here. A pod is rated when it has a series in every one of the five
//! answers; an absent pod or a failed query makes the round incomplete, with the reason in
//! `missing`. The first round of a cluster only sets the baseline (`from`), as the direct path
//! does, so every observation's `from` is the previous one's `to`.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::http1::split_response;
use super::prom::{
    CPU_SECONDS, DELIVERED_BYTES, DELIVERED_EVENTS, PUBLISHED_BYTES, PUBLISHED_MESSAGES,
};
use super::rates::{Observation, PodRates};

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
/// Largest answer read.
const MAX_RESPONSE: u64 = 4 * 1024 * 1024;

/// Why `--prometheus-url` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// Only plain HTTP is spoken.
    #[error(
        "`{0}`: https is not supported, give an http:// URL (e.g. the Prometheus Service in the cluster)"
    )]
    Https(String),
    /// Not `http://host[:port][/path]`.
    #[error("`{url}` is not an http://host[:port][/path] URL: {why}")]
    Invalid {
        /// The value given.
        url: String,
        /// What is wrong.
        why: &'static str,
    },
}

/// `--prometheus-url`: where Prometheus's HTTP API is. `http://host[:port][/prefix]`; the port
/// defaults to 80, the prefix (for a Prometheus behind `--web.route-prefix`) to none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusUrl {
    /// Host name or address (IPv6 in brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// Path prefix without the trailing slash (`""` or `/prometheus`).
    pub prefix: String,
}

impl FromStr for PrometheusUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, UrlError> {
        let invalid = |why| UrlError::Invalid {
            url: s.to_string(),
            why,
        };
        let lower = s.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Err(UrlError::Https(s.to_string()));
        }
        if !lower.starts_with("http://") {
            return Err(invalid("it must start with http://"));
        }
        let rest = &s["http://".len()..];
        if rest.contains(['?', '#', '@']) || rest.chars().any(|c| c.is_whitespace()) {
            return Err(invalid("no user, query, fragment or spaces"));
        }
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, ""),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (addr, after) = v6.split_once(']').ok_or_else(|| invalid("unclosed ["))?;
            let port = match after {
                "" => None,
                p => Some(p.strip_prefix(':').ok_or_else(|| invalid("junk after ]"))?),
            };
            (format!("[{addr}]"), port)
        } else {
            match authority.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (authority.to_string(), None),
            }
        };
        if host.is_empty() || host == "[]" {
            return Err(invalid("no host"));
        }
        let port = match port {
            None => 80,
            Some(p) => p
                .parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| invalid("the port is not a number from 1 to 65535"))?,
        };
        Ok(PrometheusUrl {
            host,
            port,
            prefix: path.trim_end_matches('/').to_string(),
        })
    }
}

impl fmt::Display for PrometheusUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}:{}{}", self.host, self.port, self.prefix)
    }
}

/// Why `--prometheus-selector` was refused, or could not be filled for a cluster.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// Empty.
    #[error("the series selector is empty")]
    Empty,
    /// A brace outside a quoted value would end the selector early.
    #[error(
        "the series selector `{0}` has a brace outside quotes or unbalanced quotes; give label matchers such as namespace=\"{{namespace}}\",pod=~\"{{name}}-[0-9]+\""
    )]
    Syntax(String),
    /// The namespace or cluster name is not a DNS label (never for objects Kubernetes
    /// admitted).
    #[error("`{0}` is not a DNS label")]
    Name(String),
}

fn dns_label(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 63
        && v.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

/// Escapes a value for use inside a PromQL double-quoted string that may be a regex (RE2):
/// regex metacharacters get a backslash, and backslashes and quotes are escaped for the string.
/// A no-op for the DNS labels [`fill_selector`] accepts; kept so that a selector can never be
/// broken out of by a value.
fn escape_value(v: &str) -> String {
    let mut out = String::new();
    for c in v.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push_str(r"\\");
        } else if c == '"' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// Checks a selector template: not empty, quotes balanced, no brace outside quotes once the
/// placeholders are filled. Pure.
pub fn check_selector(template: &str) -> Result<(), SelectorError> {
    fill_selector(template, "ns", "name").map(|_| ())
}

/// The selector for one cluster: `{namespace}` and `{name}` replaced by the (DNS-label) values,
/// escaped. Pure.
pub fn fill_selector(template: &str, namespace: &str, name: &str) -> Result<String, SelectorError> {
    if template.trim().is_empty() {
        return Err(SelectorError::Empty);
    }
    for v in [namespace, name] {
        if !dns_label(v) {
            return Err(SelectorError::Name(v.to_string()));
        }
    }
    let filled = template
        .replace("{namespace}", &escape_value(namespace))
        .replace("{name}", &escape_value(name));
    let (mut quoted, mut escaped) = (false, false);
    for c in filled.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '{' | '}' if !quoted => return Err(SelectorError::Syntax(template.to_string())),
            _ => {}
        }
    }
    if quoted {
        return Err(SelectorError::Syntax(template.to_string()));
    }
    Ok(filled)
}

/// The `rate()` range: at least the round interval, at least the configured window, in whole
/// seconds (at least 1). Pure.
pub fn range(interval: Duration, rate_window: Duration) -> Duration {
    let d = interval.max(rate_window);
    Duration::from_secs(d.as_secs().max(1) + u64::from(d.subsec_nanos() > 0))
}

/// `sum by (pod) (rate(<counter>{<selector>}[<range>s]))`. Pure.
pub fn query_text(counter: &str, selector: &str, range: Duration) -> String {
    format!(
        "sum by (pod) (rate({counter}{{{selector}}}[{}s]))",
        range.as_secs()
    )
}

/// Percent-encodes everything but RFC 3986's unreserved characters (for a query parameter).
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The request target of an instant query at `at`: `<prefix>/api/v1/query?query=…&time=…`,
/// both URL-encoded, the time in Unix seconds with milliseconds. Pure.
pub fn request_path(prefix: &str, promql: &str, at: Timestamp) -> String {
    let ms = at.as_millisecond();
    let time = format!(
        "{}{}.{:03}",
        if ms < 0 { "-" } else { "" },
        (ms / 1000).unsigned_abs(),
        (ms % 1000).unsigned_abs()
    );
    format!(
        "{prefix}/api/v1/query?query={}&time={}",
        percent_encode(promql),
        percent_encode(&time)
    )
}

/// What is wrong with an `/api/v1/query` answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResponseError {
    /// Not JSON, or not the API's envelope.
    #[error("not a Prometheus API answer: {0}")]
    NotApi(String),
    /// `status` is not `success`.
    #[error("query failed ({error_type}): {error}")]
    Failed {
        /// `errorType`, e.g. `bad_data`.
        error_type: String,
        /// `error`.
        error: String,
    },
    /// `data.resultType` is not `vector`.
    #[error("result type `{0}`, want vector")]
    ResultType(String),
    /// A result without the `pod` label (the selector or the `by (pod)` lost it).
    #[error("a result has no `pod` label: {0}")]
    NoPod(String),
    /// A value that is not a finite, non-negative number.
    #[error("pod {pod}: value `{value}` is not a finite non-negative number")]
    BadValue {
        /// The pod.
        pod: String,
        /// The text found.
        value: String,
    },
    /// Two results for one pod.
    #[error("pod {0} appears twice in one answer")]
    Duplicate(String),
}

/// Parses an instant-vector answer into one value per `pod` label. Pure.
pub fn parse_response(body: &str) -> Result<BTreeMap<String, f64>, ResponseError> {
    let v: Value = serde_json::from_str(body).map_err(|e| ResponseError::NotApi(e.to_string()))?;
    match v.get("status").and_then(Value::as_str) {
        Some("success") => {}
        Some(_) => {
            let text = |k: &str| {
                v.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or("unknown")
                    .to_string()
            };
            return Err(ResponseError::Failed {
                error_type: text("errorType"),
                error: text("error"),
            });
        }
        None => return Err(ResponseError::NotApi("no `status`".into())),
    }
    let data = v
        .get("data")
        .ok_or_else(|| ResponseError::NotApi("no `data`".into()))?;
    let kind = data
        .get("resultType")
        .and_then(Value::as_str)
        .unwrap_or("none");
    if kind != "vector" {
        return Err(ResponseError::ResultType(kind.to_string()));
    }
    let results = data
        .get("result")
        .and_then(Value::as_array)
        .ok_or_else(|| ResponseError::NotApi("`data.result` is not a list".into()))?;
    let mut out = BTreeMap::new();
    for r in results {
        let pod = r
            .get("metric")
            .and_then(|m| m.get("pod"))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ResponseError::NoPod(r.get("metric").cloned().unwrap_or_default().to_string())
            })?;
        let text = r
            .get("value")
            .and_then(Value::as_array)
            .and_then(|pair| pair.get(1))
            .and_then(Value::as_str)
            .ok_or_else(|| ResponseError::BadValue {
                pod: pod.to_string(),
                value: r.get("value").cloned().unwrap_or_default().to_string(),
            })?;
        let value = text
            .parse::<f64>()
            .ok()
            .filter(|x| x.is_finite() && *x >= 0.0)
            .ok_or_else(|| ResponseError::BadValue {
                pod: pod.to_string(),
                value: text.to_string(),
            })?;
        if out.insert(pod.to_string(), value).is_some() {
            return Err(ResponseError::Duplicate(pod.to_string()));
        }
    }
    Ok(out)
}

/// Why one query gave no values.
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// Connect, write or read failed.
    #[error("{addr}: {source}")]
    Io {
        /// `host:port`.
        addr: String,
        /// The error.
        source: std::io::Error,
    },
    /// No answer within the timeout.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// Not a 200 and no API error in the body.
    #[error("answered HTTP {0}")]
    Status(u16),
    /// Larger than the cap.
    #[error("answer larger than {0} bytes")]
    TooLarge(u64),
    /// A chunked answer (never sent to an HTTP/1.0 request by Prometheus).
    #[error("chunked answer to an HTTP/1.0 request")]
    Chunked,
    /// The body is not a usable answer.
    #[error(transparent)]
    Response(#[from] ResponseError),
}

/// Splits a raw HTTP answer and parses it: an API error in the body wins over the status code
/// (Prometheus answers 400/422/503 with one). Pure.
pub fn parse_http(raw: &[u8]) -> Result<BTreeMap<String, f64>, QueryError> {
    let text = String::from_utf8_lossy(raw);
    let (code, head, body) = split_response(&text);
    if head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    }) {
        return Err(QueryError::Chunked);
    }
    match parse_response(body) {
        Err(e @ ResponseError::Failed { .. }) => Err(e.into()),
        _ if code != 200 => Err(QueryError::Status(code)),
        r => Ok(r?),
    }
}

/// One instant query: `GET <prefix>/api/v1/query?query=…&time=…` at `url`. The only I/O here.
pub async fn query(
    url: &PrometheusUrl,
    promql: &str,
    at: Timestamp,
    timeout: Duration,
) -> Result<BTreeMap<String, f64>, QueryError> {
    let authority = format!("{}:{}", url.host, url.port);
    let host = url.host.trim_start_matches('[').trim_end_matches(']');
    let request = format!(
        "GET {} HTTP/1.0\r\nHost: {authority}\r\nAccept: application/json\r\nConnection: close\r\n\r\n",
        request_path(&url.prefix, promql, at)
    );
    let io = |source| QueryError::Io {
        addr: authority.clone(),
        source,
    };
    let fut = async {
        let mut s = tokio::net::TcpStream::connect((host, url.port))
            .await
            .map_err(io)?;
        s.write_all(request.as_bytes()).await.map_err(io)?;
        let mut raw = Vec::new();
        s.take(MAX_RESPONSE + 1)
            .read_to_end(&mut raw)
            .await
            .map_err(io)?;
        Ok::<_, QueryError>(raw)
    };
    let raw = tokio::time::timeout(timeout, fut)
        .await
        .map_err(|_| QueryError::Timeout(timeout))??;
    if raw.len() as u64 > MAX_RESPONSE {
        return Err(QueryError::TooLarge(MAX_RESPONSE));
    }
    parse_http(&raw)
}

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

/// The Prometheus source as configured by the flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromQlSource {
    /// `--prometheus-url`.
    pub url: PrometheusUrl,
    /// `--prometheus-selector`, with `{namespace}` and `{name}`.
    pub selector: String,
    /// `--prometheus-rate-window`.
    pub rate_window: Duration,
    /// Per query.
    pub timeout: Duration,
}

impl PromQlSource {
    /// A source with a checked selector and the default timeout.
    pub fn new(
        url: PrometheusUrl,
        selector: &str,
        rate_window: Duration,
    ) -> Result<Self, SelectorError> {
        check_selector(selector)?;
        Ok(PromQlSource {
            url,
            selector: selector.to_string(),
            rate_window,
            timeout: QUERY_TIMEOUT,
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
        let selector = match fill_selector(&self.selector, namespace, name) {
            Ok(s) => s,
            Err(e) => {
                let err = || Err::<BTreeMap<String, f64>, _>(e.clone());
                return assemble(
                    from,
                    at,
                    pods,
                    expected,
                    &[err(), err(), err(), err(), err()],
                );
            }
        };
        let range = range(interval, self.rate_window);
        let [a, b, c, d, e] = COUNTERS.map(|counter| {
            let q = query_text(counter, &selector, range);
            async move { query(&self.url, &q, at, self.timeout).await }
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
    match super::duration::parse(text) {
        Some(d) if d >= Duration::from_secs(1) => Ok(d),
        Some(_) => Err("the rate window must be at least 1s".into()),
        None => Err(format!(
            "`{text}` is not a duration such as 1m, 90s or 1m30s"
        )),
    }
}

#[cfg(test)]
mod tests;
