//! Reads the few series the autoscaler needs from a broker's Prometheus text exposition
//! (`GET /metrics`, format 0.0.4). Only unlabelled samples are read; comments, labelled series
//! and every other metric are skipped. Pure.

/// Series the autoscaler reads, all unlabelled (named once, in `starling-config`).
pub use starling_config::metric_names::{
    DELIVERED_BYTES, DELIVERED_EVENTS, PROCESS_CPU_SECONDS as CPU_SECONDS, PUBLISHED_BYTES,
    PUBLISHED_MESSAGES, READY,
};

/// The counters of one broker at one scrape.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BrokerSample {
    /// `starling_published_messages_total`.
    pub published_messages: f64,
    /// `starling_delivered_events_total`.
    pub delivered_events: f64,
    /// `starling_published_bytes_total`.
    pub published_bytes: f64,
    /// `starling_delivered_bytes_total`.
    pub delivered_bytes: f64,
    /// `starling_process_cpu_seconds_total`.
    pub cpu_seconds: f64,
    /// `starling_ready`, when exported.
    pub ready: Option<bool>,
}

impl BrokerSample {
    /// The counters in a fixed order (for reset detection).
    pub fn counters(&self) -> [f64; 5] {
        [
            self.published_messages,
            self.delivered_events,
            self.published_bytes,
            self.delivered_bytes,
            self.cpu_seconds,
        ]
    }
}

/// Why a scrape could not be read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParseError {
    /// A series the autoscaler needs is absent (an older broker, or not a broker).
    #[error("series {0} is missing")]
    Missing(&'static str),
    /// A needed series has a value that is not a finite, non-negative number.
    #[error("series {name} has the value `{value}`")]
    BadValue {
        /// The series.
        name: &'static str,
        /// The text found.
        value: String,
    },
}

/// One sample line split into name, label block (without braces) and value text.
fn split_line(line: &str) -> Option<(&str, &str, &str)> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let name = &line[..name_end];
    let rest = &line[name_end..];
    let (labels, rest) = if let Some(inner) = rest.strip_prefix('{') {
        // The closing brace outside quoted label values.
        let mut quoted = false;
        let mut escaped = false;
        let mut close = None;
        for (i, c) in inner.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if quoted => escaped = true,
                '"' => quoted = !quoted,
                '}' if !quoted => {
                    close = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let close = close?;
        (&inner[..close], &inner[close + 1..])
    } else {
        ("", rest)
    };
    let value = rest.split_whitespace().next()?;
    Some((name, labels, value))
}

/// Reads the autoscaler's series from an exposition text.
pub fn parse(text: &str) -> Result<BrokerSample, ParseError> {
    const NEEDED: [&str; 5] = [
        PUBLISHED_MESSAGES,
        DELIVERED_EVENTS,
        PUBLISHED_BYTES,
        DELIVERED_BYTES,
        CPU_SECONDS,
    ];
    let mut found: [Option<f64>; 5] = [None; 5];
    let mut ready = None;
    for line in text.lines() {
        let Some((name, labels, value)) = split_line(line) else {
            continue;
        };
        if !labels.trim().is_empty() {
            continue;
        }
        if name == READY {
            ready = value.parse::<f64>().ok().map(|v| v >= 1.0);
            continue;
        }
        let Some(i) = NEEDED.iter().position(|n| *n == name) else {
            continue;
        };
        let v = value
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| ParseError::BadValue {
                name: NEEDED[i],
                value: value.to_string(),
            })?;
        found[i] = Some(v);
    }
    let get = |i: usize| found[i].ok_or(ParseError::Missing(NEEDED[i]));
    Ok(BrokerSample {
        published_messages: get(0)?,
        delivered_events: get(1)?,
        published_bytes: get(2)?,
        delivered_bytes: get(3)?,
        cpu_seconds: get(4)?,
        ready,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
# HELP starling_published_messages_total messages accepted from publishers
# TYPE starling_published_messages_total counter
starling_published_messages_total 12345
starling_published_bytes_total 1.5e6
starling_delivered_events_total 24690
starling_delivered_bytes_total 3000000
starling_dropped_events_total{reason=\"queue_full_drop_new\"} 7
starling_cache_ops_total{op=\"get\",result=\"a}b \\\"x\\\"\"} 3
starling_process_cpu_seconds_total 12.34
starling_ready 1
process_cpu_seconds_total 12
";

    #[test]
    fn reads_the_needed_series_and_skips_the_rest() {
        let s = parse(TEXT).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(s.published_messages, 12345.0);
        assert_eq!(s.published_bytes, 1_500_000.0);
        assert_eq!(s.delivered_events, 24690.0);
        assert_eq!(s.delivered_bytes, 3_000_000.0);
        assert_eq!(s.cpu_seconds, 12.34);
        assert_eq!(s.ready, Some(true));
    }

    #[test]
    fn labelled_lines_and_timestamps_are_handled() {
        assert_eq!(
            split_line("a{x=\"}\",y=\"q\\\"}\"} 4 1700000000"),
            Some(("a", "x=\"}\",y=\"q\\\"}\"", "4"))
        );
        assert_eq!(split_line("b 5 123"), Some(("b", "", "5")));
        assert_eq!(split_line("# TYPE b counter"), None);
        assert_eq!(split_line("broken{x=\"1\" 3"), None);
    }

    #[test]
    fn a_missing_or_bad_series_is_an_error() {
        let without = TEXT.replace("starling_process_cpu_seconds_total 12.34\n", "");
        assert_eq!(parse(&without), Err(ParseError::Missing(CPU_SECONDS)));
        let bad = TEXT.replace("12345", "NaN");
        assert!(matches!(parse(&bad), Err(ParseError::BadValue { .. })));
        assert_eq!(parse(""), Err(ParseError::Missing(PUBLISHED_MESSAGES)));
    }
}
