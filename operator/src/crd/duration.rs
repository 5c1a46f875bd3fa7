//! The duration strings of `spec.autoscaling` (`15s`, `3m`, `1h`, `1m30s`, `500ms`): the
//! workspace's one grammar, `starling_config::duration`, whose pattern the CRD admits
//! (`super::rules::DURATION_PATTERN`).

use std::time::Duration;

/// Parses a duration such as `3m` or `1m30s`; `None` when it does not match the grammar or
/// overflows.
pub fn parse(text: &str) -> Option<Duration> {
    starling_config::duration::parse(text).ok()
}

/// Prints a duration the way it is written in a spec: `3m`, `1m30s`, `2h`, `0s`.
pub fn format(d: Duration) -> String {
    starling_config::duration::format(d)
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
        assert_eq!(parse("500ms"), Some(Duration::from_millis(500)));
        for bad in [
            "",
            "3",
            "m",
            "3mm",
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
        assert_eq!(re, starling_config::duration::PATTERN);
        for ok in ["1s", "10m", "2h", "1h2m3s", "3m3m", "1s500ms"] {
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
