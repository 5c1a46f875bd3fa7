//! The duration strings of `spec.autoscaling` (`15s`, `3m`, `1h`, `1m30s`): parsing and
//! printing. The syntax is the CRD's admission pattern (`crate::crd::rules::DURATION_PATTERN`):
//! one or more `<digits><unit>` with unit `h`, `m` or `s`.

use std::time::Duration;

/// Parses a duration such as `3m` or `1m30s`; `None` when it does not match the syntax or
/// overflows.
pub fn parse(text: &str) -> Option<Duration> {
    let mut total: u64 = 0;
    let mut digits = String::new();
    if text.is_empty() {
        return None;
    }
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit: u64 = match c {
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return None,
        };
        let n: u64 = digits.parse().ok()?;
        digits.clear();
        total = total.checked_add(n.checked_mul(unit)?)?;
    }
    if !digits.is_empty() {
        return None;
    }
    Some(Duration::from_secs(total))
}

/// Prints a duration the way it is written in a spec: `3m`, `1m30s`, `2h`, `0s`.
pub fn format(d: Duration) -> String {
    let secs = d.as_secs();
    let (h, m, s) = (secs / 3600, secs % 3600 / 60, secs % 60);
    let mut out = String::new();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 || out.is_empty() {
        out.push_str(&format!("{s}s"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_admitted_syntax() {
        assert_eq!(parse("15s"), Some(Duration::from_secs(15)));
        assert_eq!(parse("3m"), Some(Duration::from_secs(180)));
        assert_eq!(parse("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse("0s"), Some(Duration::ZERO));
        for bad in [
            "",
            "3",
            "m",
            "3ms",
            "1.5m",
            "-1s",
            "3 m",
            "99999999999999999999h",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_admission_pattern_and_the_parser_agree() {
        let re = crate::crd::rules::DURATION_PATTERN;
        assert_eq!(re, "^([0-9]+[hms])+$");
        for ok in ["1s", "10m", "2h", "1h2m3s", "3m3m"] {
            assert!(parse(ok).is_some(), "{ok}");
        }
    }

    #[test]
    fn formats_like_a_spec() {
        assert_eq!(format(Duration::from_secs(180)), "3m");
        assert_eq!(format(Duration::from_secs(90)), "1m30s");
        assert_eq!(format(Duration::from_secs(3600)), "1h");
        assert_eq!(format(Duration::ZERO), "0s");
        assert_eq!(
            parse(&format(Duration::from_secs(3725))),
            Some(Duration::from_secs(3725))
        );
    }
}
