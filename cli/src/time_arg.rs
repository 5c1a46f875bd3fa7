//! Time arguments (`sub --from-time`): an RFC 3339 timestamp (`2026-01-01T12:00:00Z`,
//! `2026-01-01T13:00:00.250+01:00`; `t`, `z` and a space separator accepted, as RFC 3339
//! allows) or Unix milliseconds (`1767268800000`), as a clap value parser. Times before
//! 1970 are refused: the broker's times start there.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What a time argument may look like, for error messages.
const FORMS: &str = "an RFC 3339 time such as 2026-01-01T12:00:00Z or Unix milliseconds";

/// Parses a time argument: all digits are Unix milliseconds, anything else RFC 3339.
pub(crate) fn parse_time(text: &str) -> Result<SystemTime, String> {
    let text = text.trim();
    let ms = if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        text.parse::<u64>()
            .map_err(|_| format!("`{text}` is too large for Unix milliseconds"))?
    } else {
        rfc3339_ms(text).map_err(|why| format!("`{text}` is not {FORMS}: {why}"))?
    };
    Ok(UNIX_EPOCH + Duration::from_millis(ms))
}

/// Unix milliseconds of an RFC 3339 `date-time` (fractions below a millisecond dropped).
fn rfc3339_ms(text: &str) -> Result<u64, &'static str> {
    let mut p = Cursor(text.as_bytes());
    let year = p.digits(4, "a four-digit year")?;
    p.expect(b"-")?;
    let month = p.digits(2, "a two-digit month")?;
    p.expect(b"-")?;
    let day = p.digits(2, "a two-digit day")?;
    p.expect(b"Tt ")?;
    let hour = p.digits(2, "a two-digit hour")?;
    p.expect(b":")?;
    let minute = p.digits(2, "two-digit minutes")?;
    p.expect(b":")?;
    let second = p.digits(2, "two-digit seconds")?;
    let mut millis = 0;
    if p.peek() == Some(b'.') {
        p.0 = &p.0[1..];
        let frac = p.take_digits();
        if frac.is_empty() {
            return Err("a fraction of a second needs digits");
        }
        for (i, d) in frac.iter().take(3).enumerate() {
            millis += i64::from(d - b'0') * [100, 10, 1][i];
        }
    }
    let offset_minutes = match p.peek() {
        Some(b'Z' | b'z') => {
            p.0 = &p.0[1..];
            0
        }
        Some(sign @ (b'+' | b'-')) => {
            p.0 = &p.0[1..];
            let h = p.digits(2, "a two-digit offset hour")?;
            p.expect(b":")?;
            let m = p.digits(2, "two-digit offset minutes")?;
            if h > 23 || m > 59 {
                return Err("the offset is out of range");
            }
            let minutes = h * 60 + m;
            if sign == b'-' { -minutes } else { minutes }
        }
        _ => return Err("the time needs an offset: Z or +hh:mm"),
    };
    if !p.0.is_empty() {
        return Err("unexpected characters after the time");
    }
    if !(1..=12).contains(&month) {
        return Err("the month is out of range");
    }
    if day < 1 || day > days_in_month(year, month) {
        return Err("the day is out of range");
    }
    // Second 60 is a leap second: it counts as the next minute's first.
    if hour > 23 || minute > 59 || second > 60 {
        return Err("the time of day is out of range");
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    let ms = seconds * 1_000 + millis;
    u64::try_from(ms).map_err(|_| "the time is before 1970-01-01T00:00:00Z")
}

/// Days from 1970-01-01 to the given date of the proleptic Gregorian calendar.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12; // March is 0
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// What is left of the text being parsed.
struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.0.first().copied()
    }

    /// Exactly `n` ASCII digits, as a number.
    fn digits(&mut self, n: usize, what: &'static str) -> Result<i64, &'static str> {
        let Some(head) = self.0.get(..n) else {
            return Err(what);
        };
        if !head.iter().all(u8::is_ascii_digit) {
            return Err(what);
        }
        self.0 = &self.0[n..];
        Ok(head.iter().fold(0, |acc, d| acc * 10 + i64::from(d - b'0')))
    }

    /// Every ASCII digit at the front.
    fn take_digits(&mut self) -> &[u8] {
        let n = self.0.iter().take_while(|b| b.is_ascii_digit()).count();
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }

    /// One byte out of `allowed`.
    fn expect(&mut self, allowed: &[u8]) -> Result<(), &'static str> {
        match self.peek() {
            Some(b) if allowed.contains(&b) => {
                self.0 = &self.0[1..];
                Ok(())
            }
            _ => Err("the date and time are not laid out as YYYY-MM-DDThh:mm:ss"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(text: &str) -> Result<u64, String> {
        parse_time(text).map(|t| {
            t.duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or_default()
        })
    }

    #[test]
    fn unix_milliseconds() {
        assert_eq!(ms("0"), Ok(0));
        assert_eq!(ms("1767225600000"), Ok(1_767_225_600_000));
        assert_eq!(ms(" 42 "), Ok(42));
        assert!(ms("99999999999999999999999").is_err());
    }

    #[test]
    fn rfc3339_in_utc_and_with_offsets() {
        assert_eq!(ms("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(ms("2026-01-01T00:00:00Z"), Ok(1_767_225_600_000));
        assert_eq!(ms("2026-01-01t00:00:00z"), Ok(1_767_225_600_000));
        assert_eq!(ms("2026-01-01 00:00:00Z"), Ok(1_767_225_600_000));
        assert_eq!(ms("2026-01-01T01:00:00+01:00"), Ok(1_767_225_600_000));
        assert_eq!(ms("2025-12-31T19:30:00-04:30"), Ok(1_767_225_600_000));
        // Fractions: milliseconds kept, finer digits dropped.
        assert_eq!(ms("2026-01-01T00:00:00.5Z"), Ok(1_767_225_600_500));
        assert_eq!(ms("2026-01-01T00:00:00.123999Z"), Ok(1_767_225_600_123));
        // Leap years, and the last second of a leap second day.
        assert_eq!(ms("2024-02-29T00:00:00Z"), Ok(1_709_164_800_000));
        assert_eq!(ms("2000-03-01T00:00:00Z"), Ok(951_868_800_000));
        assert_eq!(ms("2016-12-31T23:59:60Z"), Ok(1_483_228_800_000));
    }

    #[test]
    fn refuses_what_is_not_a_time() {
        for bad in [
            "",
            "yesterday",
            "2026-01-01",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00Z",
            "2026-1-01T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2025-02-29T00:00:00Z",
            "2026-04-31T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00.Z",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00Zjunk",
            "1969-12-31T23:59:59Z",
            "-5",
        ] {
            let err = ms(bad).expect_err(bad);
            assert!(err.contains(&format!("`{}`", bad.trim())), "{bad}: {err}");
        }
        assert_eq!(
            ms("1969-12-31T23:59:59Z"),
            Err(
                "`1969-12-31T23:59:59Z` is not an RFC 3339 time such as 2026-01-01T12:00:00Z \
                 or Unix milliseconds: the time is before 1970-01-01T00:00:00Z"
                    .into()
            )
        );
    }
}
