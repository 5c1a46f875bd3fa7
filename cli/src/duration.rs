//! Duration arguments (`--timeout`, `--ttl`, bench durations): the workspace's one grammar,
//! `starling_config::duration` (`30s`, `500ms`, `2m`, `1m30s`), as a clap value parser.

use std::time::Duration;

/// Parses a duration argument; the error is the grammar's own message.
pub(crate) fn parse_duration(text: &str) -> Result<Duration, String> {
    starling_config::duration::parse(text).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_every_unit_and_combinations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(
            parse_duration("x"),
            Err("`x` is not a duration such as 30s, 500ms, 2m or 1m30s".into())
        );
    }
}
