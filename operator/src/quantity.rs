//! Just enough of Kubernetes quantity parsing to compare a request with a limit.
//!
//! Accepts `<number><suffix>` with a decimal number and one of the binary (`Ki`…`Ei`), decimal
//! (`m`, `k`, `M`…`E`) or exponent (`e3`, `E-2`) suffixes. Values are returned in nano-units so
//! `1` and `1000m` compare equal without floating point.

/// A quantity in units of 10⁻⁹, or `None` when the text is not a quantity or does not fit.
pub fn parse_nanos(text: &str) -> Option<i128> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(split);
    let (negative, digits) = match number.as_bytes().first() {
        Some(b'-') => (true, &number[1..]),
        Some(b'+') => (false, &number[1..]),
        _ => (false, number),
    };
    let (whole, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if (whole.is_empty() && frac.is_empty())
        || !whole.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
        || frac.len() > 9
    {
        return None;
    }
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(b - b'0'))?;
    }
    // mantissa × 10^(9 − frac digits) is the value in nano-units before the suffix.
    let nanos = mantissa.checked_mul(10i128.pow(9 - frac.len() as u32))?;
    let value = apply_suffix(nanos, suffix)?;
    Some(if negative { -value } else { value })
}

fn apply_suffix(nanos: i128, suffix: &str) -> Option<i128> {
    let binary = |power: u32| nanos.checked_mul(1i128 << (10 * power));
    let decimal = |exp: i32| -> Option<i128> {
        if exp >= 0 {
            nanos.checked_mul(10i128.checked_pow(exp as u32)?)
        } else {
            Some(nanos / 10i128.checked_pow(exp.unsigned_abs())?)
        }
    };
    match suffix {
        "" => Some(nanos),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().ok()?;
            if exp.unsigned_abs() > 30 {
                return None;
            }
            decimal(exp)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse_nanos;

    #[test]
    fn units_compare_exactly() {
        assert_eq!(parse_nanos("1"), parse_nanos("1000m"));
        assert_eq!(parse_nanos("1Ki"), parse_nanos("1024"));
        assert_eq!(parse_nanos("1.5Gi"), parse_nanos("1536Mi"));
        assert_eq!(parse_nanos("2k"), parse_nanos("2e3"));
        assert_eq!(parse_nanos("500m"), Some(500_000_000));
        assert!(parse_nanos("2") < parse_nanos("2500m"));
        assert!(parse_nanos("4Gi") > parse_nanos("4G"));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in ["", "Gi", "1.2.3", "1Xi", "one", "1e", "--1", "1e99"] {
            assert_eq!(parse_nanos(bad), None, "{bad}");
        }
    }
}
