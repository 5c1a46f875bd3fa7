//! The PromQL side of the Prometheus source: the series selector (`--prometheus-selector`,
//! with `{namespace}` and `{name}`), the query text
//! `sum by (pod) (rate(<counter>{<selector>}[<range>]))`, and the parsing of an
//! `/api/v1/query` answer into one value per pod, with typed errors. Pure.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::Value;

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
pub(super) fn escape_value(v: &str) -> String {
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
