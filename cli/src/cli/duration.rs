//! Parsing human durations such as `30s`, `500ms`, `2m` or `1h`.

use std::time::Duration;

/// Parses `<integer><unit>` with unit `us`, `ms`, `s`, `m` or `h`.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration `{text}`: expected e.g. 30s, 500ms, 2m or 1h");
    let text = text.trim();
    let split = text.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| bad())?;
    let d = match unit {
        "us" => Duration::from_micros(n),
        "ms" => Duration::from_millis(n),
        "s" => Duration::from_secs(n),
        "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(bad)?),
        "h" => Duration::from_secs(n.checked_mul(3600).ok_or_else(bad)?),
        _ => return Err(bad()),
    };
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_each_unit() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 0s "), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "",
            "30",
            "s",
            "1.5s",
            "-1s",
            "10 s",
            "5d",
            "ms10",
            "99999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(
            parse_duration("x"),
            Err("invalid duration `x`: expected e.g. 30s, 500ms, 2m or 1h".into())
        );
    }
}
