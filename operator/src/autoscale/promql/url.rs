//! `--prometheus-url`: where Prometheus's HTTP API is, checked at startup, and the URL of one
//! instant query against it. Parsing and query encoding are the `url` crate's (WHATWG URL
//! parsing, `application/x-www-form-urlencoded` query pairs, which Prometheus decodes). Pure.

use std::fmt;
use std::str::FromStr;

use k8s_openapi::jiff::Timestamp;

/// Why `--prometheus-url` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{url}` is not an http(s)://host[:port][/path] URL: {why}")]
pub struct UrlError {
    /// The value given.
    pub url: String,
    /// What is wrong.
    pub why: String,
}

/// `--prometheus-url`: `http(s)://host[:port][/prefix]`. The port defaults to the scheme's
/// (80, 443); the prefix (for a Prometheus behind `--web.route-prefix`, or a querier behind a
/// path) to none. No credentials, query or fragment: a token goes in a file
/// (`--prometheus-token-file`), never in the URL, where it would be logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrometheusUrl {
    base: url::Url,
}

impl PrometheusUrl {
    /// `http` or `https`.
    pub fn scheme(&self) -> &str {
        self.base.scheme()
    }

    /// Host name or address (IPv6 in brackets).
    pub fn host(&self) -> String {
        self.base.host_str().unwrap_or_default().to_string()
    }

    /// TCP port (the scheme's default when none is written).
    pub fn port(&self) -> u16 {
        self.base.port_or_known_default().unwrap_or(80)
    }

    /// Path prefix without the trailing slash (`""` or `/prometheus`).
    pub fn prefix(&self) -> &str {
        self.base.path().trim_end_matches('/')
    }

    /// The URL of an instant query of `promql` at `at`:
    /// `<base>/api/v1/query?query=…&time=…`, the time in Unix seconds with milliseconds.
    pub fn query_url(&self, promql: &str, at: Timestamp) -> String {
        let ms = at.as_millisecond();
        let time = format!(
            "{}{}.{:03}",
            if ms < 0 { "-" } else { "" },
            (ms / 1000).unsigned_abs(),
            (ms % 1000).unsigned_abs()
        );
        let mut u = self.base.clone();
        u.set_path(&format!("{}/api/v1/query", self.prefix()));
        u.query_pairs_mut()
            .append_pair("query", promql)
            .append_pair("time", &time);
        u.into()
    }
}

impl FromStr for PrometheusUrl {
    type Err = UrlError;

    fn from_str(s: &str) -> Result<Self, UrlError> {
        let invalid = |why: &str| UrlError {
            url: s.to_string(),
            why: why.to_string(),
        };
        if s.chars().any(char::is_whitespace) {
            return Err(invalid("no spaces"));
        }
        let base = url::Url::parse(s).map_err(|e| invalid(&e.to_string()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https"));
        }
        if base.host_str().is_none_or(str::is_empty) {
            return Err(invalid("no host"));
        }
        if base.port() == Some(0) {
            return Err(invalid("the port is not a number from 1 to 65535"));
        }
        if !base.username().is_empty() || base.password().is_some() {
            return Err(invalid(
                "no user or password in the URL; give a token with --prometheus-token-file",
            ));
        }
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid("no query or fragment"));
        }
        Ok(PrometheusUrl { base })
    }
}

impl fmt::Display for PrometheusUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}://{}:{}{}",
            self.scheme(),
            self.host(),
            self.port(),
            self.prefix()
        )
    }
}
