//! The one duration grammar of Starling's command lines and custom resources: one or more
//! `<digits><unit>` with unit `h`, `m`, `s`, `ms` or `us`, e.g. `30s`, `500ms`, `2m`,
//! `1m30s`, `1h30m`. The `starling` CLI (`--timeout`, `--ttl`, bench durations), the operator's
//! flags and the BrokerCluster's `spec.autoscaling` durations all parse with [`parse`], and the
//! CRD admits exactly the strings that match [`PATTERN`] (a CEL `matches` rule), so what one
//! accepts the others accept. Pure.

use std::time::Duration;

/// The admission pattern (RE2, as CEL's `matches` uses it) of the grammar.
pub const PATTERN: &str = "^([0-9]+(h|m|s|ms|us))+$";

/// Why a duration string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}` is not a duration such as 30s, 500ms, 2m or 1m30s")]
pub struct DurationError(pub String);

/// Parses `text` (surrounding whitespace ignored); the parts add up, in any order.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError(text.to_string());
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let part = match &rest[..unit_len] {
            "h" => n.checked_mul(3600).map(Duration::from_secs),
            "m" => n.checked_mul(60).map(Duration::from_secs),
            "s" => Some(Duration::from_secs(n)),
            "ms" => Some(Duration::from_millis(n)),
            "us" => Some(Duration::from_micros(n)),
            _ => None,
        }
        .ok_or_else(bad)?;
        total = total.checked_add(part).ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Prints `d` in the grammar, largest units first: `3m`, `1m30s`, `2h`, `1s500ms`, `0s`.
/// `parse(&format(d)) == d` for whole microseconds.
pub fn format(d: Duration) -> String {
    let secs = d.as_secs();
    let micros = d.subsec_micros();
    let parts = [
        (secs / 3600, "h"),
        (secs % 3600 / 60, "m"),
        (secs % 60, "s"),
        (u64::from(micros / 1000), "ms"),
        (u64::from(micros % 1000), "us"),
    ];
    let out: String = parts
        .iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect();
    if out.is_empty() {
        "0s".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_every_unit_and_combinations() {
        let ok = [
            ("30s", Duration::from_secs(30)),
            ("500ms", Duration::from_millis(500)),
            ("250us", Duration::from_micros(250)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("1h30m", Duration::from_secs(5400)),
            ("1s500ms", Duration::from_millis(1500)),
            (" 0s ", Duration::ZERO),
            ("3m3m", Duration::from_secs(360)),
        ];
        for (text, want) in ok {
            assert_eq!(parse(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn refuses_what_the_pattern_refuses() {
        for bad in [
            "",
            "30",
            "s",
            "1.5s",
            "-1s",
            "10 s",
            "5d",
            "ms10",
            "1m30",
            "3mss",
            "99999999999999999999h",
            "1h 30m",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse("x").map_err(|e| e.to_string()),
            Err("`x` is not a duration such as 30s, 500ms, 2m or 1m30s".into())
        );
        assert_eq!(PATTERN, "^([0-9]+(h|m|s|ms|us))+$");
    }

    #[test]
    fn formats_largest_units_first() {
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(7200)), "2h");
        assert_eq!(format(Duration::from_millis(1500)), "1s500ms");
        assert_eq!(format(Duration::ZERO), "0s");
    }

    proptest! {
        /// Any printed duration parses back to itself, and the text matches the pattern's
        /// shape: digits then a unit, repeated.
        #[test]
        fn format_then_parse_is_the_identity(micros in 0u64..(400 * 24 * 3600 * 1_000_000)) {
            let d = Duration::from_micros(micros);
            let text = format(d);
            prop_assert_eq!(parse(&text), Ok(d));
        }

        /// Nothing that is not digits-and-units parses.
        #[test]
        fn garbage_does_not_parse(text in "[0-9a-z .-]{0,12}") {
            let mut shaped = !text.trim().is_empty();
            let mut rest = text.trim();
            while shaped && !rest.is_empty() {
                let d = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
                let u = rest[d..].find(|c: char| c.is_ascii_digit()).map_or(rest.len(), |i| d + i);
                shaped = d > 0 && ["h", "m", "s", "ms", "us"].contains(&&rest[d..u]);
                rest = &rest[u..];
            }
            if !shaped {
                prop_assert!(parse(&text).is_err(), "{} parsed", text);
            }
        }
    }
}
