//! What each performance profile promises: the reference guide's expected figures and the
//! workload they are held to, read from `bench/profiles.txt` (compiled in, written once
//! there). Owns that file's grammar and the [`Promise`] it parses into.

use std::str::FromStr;

use starling_config::Profile;

/// `bench/profiles.txt`, as compiled into the binary.
pub(crate) const PROFILES_TXT: &str = include_str!("../profiles.txt");

/// A closed range `low..=high` from the reference (`LOW-HIGH` in the file).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Range {
    /// Lower end.
    pub(crate) low: f64,
    /// Upper end.
    pub(crate) high: f64,
}

/// One profile's promise: the workload and the figures expected of it.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub(crate) struct Promise {
    /// The profile.
    #[serde(serialize_with = "as_name")]
    pub(crate) profile: Profile,
    /// Subscribers of the one topic.
    pub(crate) fanout: u32,
    /// Messages per publish call of the peak run.
    pub(crate) batch: u32,
    /// Bytes per message.
    pub(crate) payload: usize,
    /// Expected median latency, µs.
    pub(crate) p50_us: Range,
    /// Expected 99th percentile latency, µs.
    pub(crate) p99_us: Range,
    /// Expected delivered messages per second.
    pub(crate) msgs_per_s: Range,
}

fn as_name<S: serde::Serializer>(p: &Profile, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(p.as_str())
}

impl Promise {
    /// The paced run's offered publish rate: the lower end of the expected throughput, in
    /// delivered messages per second, divided over the fan-out.
    pub(crate) fn paced_publish_rate(&self) -> f64 {
        self.msgs_per_s.low / f64::from(self.fanout.max(1))
    }
}

/// Every promise of `bench/profiles.txt`.
pub(crate) fn promises() -> Result<Vec<Promise>, String> {
    parse(PROFILES_TXT)
}

/// Parses the profiles file: `#` comments and blank lines are skipped; every other line is a
/// profile name and the six `key=value` fields, each exactly once. Every profile appears once.
pub(crate) fn parse(text: &str) -> Result<Vec<Promise>, String> {
    let mut out: Vec<Promise> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let promise = parse_line(line).map_err(|e| format!("profiles.txt line {}: {e}", i + 1))?;
        if out.iter().any(|p| p.profile == promise.profile) {
            return Err(format!(
                "profiles.txt line {}: profile {} appears twice",
                i + 1,
                promise.profile
            ));
        }
        out.push(promise);
    }
    if out.is_empty() {
        return Err("profiles.txt: no profile".into());
    }
    Ok(out)
}

const KEYS: [&str; 6] = [
    "fanout",
    "batch",
    "payload",
    "p50_us",
    "p99_us",
    "msgs_per_s",
];

fn parse_line(line: &str) -> Result<Promise, String> {
    let mut words = line.split_whitespace();
    let name = words.next().unwrap_or_default();
    let profile = Profile::from_str(name)?;
    let mut values: [Option<&str>; 6] = [None; 6];
    for word in words {
        let (key, value) = word
            .split_once('=')
            .ok_or_else(|| format!("`{word}` is not key=value"))?;
        let slot = KEYS
            .iter()
            .position(|k| *k == key)
            .ok_or_else(|| format!("unknown key `{key}` (known: {})", KEYS.join(", ")))?;
        if values[slot].replace(value).is_some() {
            return Err(format!("`{key}` given twice"));
        }
    }
    let get = |slot: usize| values[slot].ok_or_else(|| format!("`{}` missing", KEYS[slot]));
    let count = |slot: usize| -> Result<u32, String> {
        match get(slot)?.parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("`{}` must be a positive whole number", KEYS[slot])),
        }
    };
    Ok(Promise {
        profile,
        fanout: count(0)?,
        batch: count(1)?,
        payload: count(2)? as usize,
        p50_us: range(KEYS[3], get(3)?)?,
        p99_us: range(KEYS[4], get(4)?)?,
        msgs_per_s: range(KEYS[5], get(5)?)?,
    })
}

fn range(key: &str, text: &str) -> Result<Range, String> {
    let bad = || format!("`{key}={text}` is not LOW-HIGH with 0 < LOW <= HIGH");
    let (low, high) = text.split_once('-').ok_or_else(bad)?;
    let (low, high) = match (low.parse::<f64>(), high.parse::<f64>()) {
        (Ok(l), Ok(h)) => (l, h),
        _ => return Err(bad()),
    };
    if !(low.is_finite() && high.is_finite() && low > 0.0 && low <= high) {
        return Err(bad());
    }
    Ok(Range { low, high })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compiled_file_has_every_profile_once_with_the_guides_figures() {
        let all = promises().unwrap_or_default();
        assert_eq!(all.len(), Profile::ALL.len(), "{all:?}");
        for p in Profile::ALL {
            assert!(all.iter().any(|x| x.profile == *p), "{p} missing");
        }
        let balanced = all.iter().find(|p| p.profile == Profile::Balanced);
        assert_eq!(
            balanced.map(|b| (b.fanout, b.batch, b.payload)),
            Some((10, 64, 4096)),
            "the workload the guide states for its balanced figures"
        );
        assert_eq!(
            balanced.map(|b| (b.p50_us, b.msgs_per_s.low)),
            Some((
                Range {
                    low: 400.0,
                    high: 800.0
                },
                150_000.0
            ))
        );
    }

    #[test]
    fn batches_are_each_profiles_fanout_batch_size() {
        for p in promises().unwrap_or_default() {
            assert_eq!(
                p.batch,
                p.profile.config().fanout_batch_size,
                "{}",
                p.profile
            );
        }
    }

    #[test]
    fn the_paced_rate_spreads_the_expected_floor_over_the_fanout() {
        let all = promises().unwrap_or_default();
        let latency = all.iter().find(|p| p.profile == Profile::Latency);
        assert_eq!(latency.map(Promise::paced_publish_rate), Some(10_000.0));
    }

    #[test]
    fn parses_a_line_and_skips_comments() {
        let text = "# comment\n\nlatency fanout=2 batch=1 payload=64 p50_us=1-2 p99_us=3-4.5 msgs_per_s=10-20\n";
        let all = parse(text).unwrap_or_default();
        assert_eq!(all.len(), 1);
        let p = all[0];
        assert_eq!(
            (p.profile, p.fanout, p.batch, p.payload),
            (Profile::Latency, 2, 1, 64)
        );
        assert_eq!(
            p.p99_us,
            Range {
                low: 3.0,
                high: 4.5
            }
        );
    }

    #[test]
    fn refuses_malformed_lines() {
        let ok = "fanout=1 batch=1 payload=64 p50_us=1-2 p99_us=3-4 msgs_per_s=10-20";
        let cases = [
            (format!("fast {ok}"), "unknown value `fast`"),
            (format!("latency {ok} extra=1"), "unknown key `extra`"),
            (format!("latency {ok} fanout=2"), "`fanout` given twice"),
            (format!("latency {ok} oops"), "`oops` is not key=value"),
            (
                "latency fanout=1 batch=1 payload=64 p50_us=1-2 p99_us=3-4".into(),
                "`msgs_per_s` missing",
            ),
            (ok.replace("fanout=1", "fanout=0"), "positive whole number"),
            (ok.replace("p50_us=1-2", "p50_us=2-1"), "0 < LOW <= HIGH"),
            (ok.replace("p50_us=1-2", "p50_us=12"), "not LOW-HIGH"),
            (ok.replace("p50_us=1-2", "p50_us=a-2"), "not LOW-HIGH"),
            (format!("latency {ok}\nlatency {ok}"), "appears twice"),
            ("# nothing\n".into(), "no profile"),
        ];
        for (text, want) in cases {
            let text = if text.starts_with("fanout") {
                format!("latency {text}")
            } else {
                text
            };
            match parse(&text) {
                Ok(p) => panic!("{text:?} parsed: {p:?}"),
                Err(e) => assert!(e.contains(want), "{text:?}: {e}"),
            }
        }
    }
}
