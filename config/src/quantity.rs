//! Kubernetes quantity parsing: enough to compare a request with a limit, and to turn a pod's
//! memory limit into bytes for the memory-fit check ([`crate::memory`]).
//!
//! Accepts what the API server's `resource.Quantity` accepts: a signed decimal number with any
//! number of fractional digits, then one of the binary (`Ki`…`Ei`), decimal (`n`, `u`, `m`, `k`,
//! `M`…`E`) or exponent (`e3`, `E-2`) suffixes. Values are returned in nano-units so `1` and
//! `1000m` compare equal without floating point; precision below a nano-unit is rounded up, as
//! the API server does. Hand-written because k8s-openapi's `Quantity` is only the string: it
//! carries no parser.

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
    {
        return None;
    }
    // Trailing fractional zeros carry no value; dropping them keeps long inputs in range.
    let frac = frac.trim_end_matches('0');
    let mut mantissa: i128 = 0;
    for b in whole.bytes().chain(frac.bytes()) {
        mantissa = mantissa
            .checked_mul(10)?
            .checked_add(i128::from(b - b'0'))?;
    }
    let (multiplier, exp10) = suffix_scale(suffix)?;
    let value = mantissa.checked_mul(multiplier)?;
    // value × 10^(exp10 − frac digits) units, i.e. × 10^(scale) nano-units.
    let scale = i64::from(exp10) + 9 - frac.len() as i64;
    let nanos = if scale >= 0 {
        value.checked_mul(10i128.checked_pow(u32::try_from(scale).ok()?)?)?
    } else {
        div_round_up(value, u32::try_from(-scale).ok()?)
    };
    Some(if negative { -nanos } else { nanos })
}

/// A quantity as a whole number of units (bytes, for memory), rounded up; `None` when the text
/// is not a quantity, is negative or does not fit a `u64`.
pub fn parse_units(text: &str) -> Option<u64> {
    let nanos = parse_nanos(text)?;
    if nanos < 0 {
        return None;
    }
    u64::try_from(div_round_up(nanos, 9)).ok()
}

/// `value / 10^exp`, rounded away from zero when anything is cut off.
fn div_round_up(value: i128, exp: u32) -> i128 {
    match 10i128.checked_pow(exp) {
        Some(d) => value / d + i128::from(value % d != 0),
        // 10^exp > i128::MAX > value: any non-zero value rounds up to one nano-unit.
        None => i128::from(value != 0),
    }
}

/// The suffix as (integer multiplier, power of ten).
fn suffix_scale(suffix: &str) -> Option<(i128, i32)> {
    let binary = |power: u32| Some((1i128 << (10 * power), 0));
    match suffix {
        "" => Some((1, 0)),
        "Ki" => binary(1),
        "Mi" => binary(2),
        "Gi" => binary(3),
        "Ti" => binary(4),
        "Pi" => binary(5),
        "Ei" => binary(6),
        "n" => Some((1, -9)),
        "u" => Some((1, -6)),
        "m" => Some((1, -3)),
        "k" => Some((1, 3)),
        "M" => Some((1, 6)),
        "G" => Some((1, 9)),
        "T" => Some((1, 12)),
        "P" => Some((1, 15)),
        "E" => Some((1, 18)),
        s if s.starts_with(['e', 'E']) => {
            let exp: i32 = s[1..].parse().ok()?;
            if exp.unsigned_abs() > 30 {
                return None;
            }
            Some((1, exp))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{parse_nanos, parse_units};
    use proptest::prelude::{Just, Strategy};

    #[test]
    fn memory_limits_in_bytes() {
        assert_eq!(parse_units("4Gi"), Some(4 << 30));
        assert_eq!(parse_units("512Mi"), Some(512 << 20));
        assert_eq!(parse_units("1G"), Some(1_000_000_000));
        assert_eq!(parse_units("1500m"), Some(2), "rounded up");
        assert_eq!(parse_units("-1Gi"), None);
        assert_eq!(parse_units("lots"), None);
    }

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
    fn every_suffix_the_api_server_accepts() {
        assert_eq!(parse_nanos("1n"), Some(1));
        assert_eq!(parse_nanos("250u"), Some(250_000));
        assert_eq!(parse_nanos("1u"), parse_nanos("1000n"));
        assert_eq!(parse_nanos("1.25m"), Some(1_250_000));
        assert_eq!(parse_nanos("1E"), parse_nanos("1e18"));
    }

    #[test]
    fn precision_below_a_nano_unit_is_rounded_up() {
        assert_eq!(parse_nanos("0.0000000001"), Some(1));
        assert_eq!(parse_nanos("1.0000000001"), Some(1_000_000_001));
        assert_eq!(parse_nanos("0.5n"), Some(1));
        assert_eq!(parse_nanos("1.500000000000"), Some(1_500_000_000));
        assert_eq!(
            parse_nanos("0.00000000000000000000000000000000000000000001"),
            Some(1)
        );
        assert_eq!(parse_nanos("0.000"), Some(0));
    }

    #[test]
    fn garbage_is_refused() {
        for bad in [
            "", "Gi", "1.2.3", "1Xi", "one", "1e", "--1", "1e99", "1N", "1mu",
        ] {
            assert_eq!(parse_nanos(bad), None, "{bad}");
        }
    }

    /// The decimal (`k`…`E`) and binary (`Ki`…`Ei`) suffixes with their multipliers, and the
    /// sub-unit ones with the nano-units of one.
    const WHOLE_SUFFIXES: [(&str, i128); 13] = [
        ("", 1),
        ("k", 1_000),
        ("M", 1_000_000),
        ("G", 1_000_000_000),
        ("T", 1_000_000_000_000),
        ("P", 1_000_000_000_000_000),
        ("E", 1_000_000_000_000_000_000),
        ("Ki", 1 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
        ("Pi", 1 << 50),
        ("Ei", 1 << 60),
    ];
    const SUB_UNIT_SUFFIXES: [(&str, i128); 3] = [("m", 1_000_000), ("u", 1_000), ("n", 1)];

    /// The API server's largest quantity: no quantity may exceed 2^63 − 1 in magnitude.
    const API_MAX: i128 = i64::MAX as i128;

    #[test]
    fn the_api_servers_bounds_parse_exactly() {
        assert_eq!(
            parse_nanos(&i64::MAX.to_string()),
            Some(API_MAX * 1_000_000_000)
        );
        assert_eq!(parse_units(&i64::MAX.to_string()), Some(i64::MAX as u64));
        assert_eq!(parse_units("7Ei"), Some(7 << 60));
        assert_eq!(parse_units("9E"), Some(9_000_000_000_000_000_000));
        assert_eq!(
            parse_nanos(&i64::MIN.to_string()),
            Some(-API_MAX * 1_000_000_000 - 1_000_000_000)
        );
        assert_eq!(parse_nanos("1n"), Some(1), "the smallest non-zero quantity");
    }

    proptest::proptest! {
        /// A quantity written as a JSON integer `N` reaches the parser as its decimal digits
        /// (`QuantityValue` in the operator): `N` and the string `"N"` are one text, and it is
        /// `N` units exactly, anywhere within the API server's range.
        #[test]
        fn an_integer_is_that_many_units(n in -i64::MAX..=i64::MAX) {
            let nanos = i128::from(n) * 1_000_000_000;
            proptest::prop_assert_eq!(parse_nanos(&n.to_string()), Some(nanos));
            if n >= 0 {
                proptest::prop_assert_eq!(parse_nanos(&format!("+{n}")), Some(nanos));
                proptest::prop_assert_eq!(parse_units(&n.to_string()), u64::try_from(n).ok());
            }
        }

        /// Every decimal and binary suffix multiplies exactly, for every amount whose value
        /// stays within the API server's range.
        #[test]
        fn every_suffix_multiplies_exactly(
            (i, n) in (0..WHOLE_SUFFIXES.len()).prop_flat_map(|i| (Just(i), 0..=API_MAX / WHOLE_SUFFIXES[i].1))
        ) {
            let (suffix, multiplier) = WHOLE_SUFFIXES[i];
            let text = format!("{n}{suffix}");
            proptest::prop_assert_eq!(parse_nanos(&text), Some(n * multiplier * 1_000_000_000), "{}", text);
            proptest::prop_assert_eq!(
                parse_units(&text),
                u64::try_from(n * multiplier).ok(),
                "{}", text
            );
            proptest::prop_assert_eq!(parse_nanos(&format!("-{text}")), Some(-n * multiplier * 1_000_000_000));
        }

        /// The sub-unit suffixes: `N` milli-, micro- or nano-units, and whole units rounded up.
        #[test]
        fn sub_unit_suffixes_count_nano_units(i in 0usize..SUB_UNIT_SUFFIXES.len(), n in 0i64..=i64::MAX) {
            let (suffix, nanos) = SUB_UNIT_SUFFIXES[i];
            let text = format!("{n}{suffix}");
            let expected = i128::from(n) * nanos;
            proptest::prop_assert_eq!(parse_nanos(&text), Some(expected), "{}", text);
            let units = expected / 1_000_000_000 + i128::from(expected % 1_000_000_000 != 0);
            proptest::prop_assert_eq!(parse_units(&text), u64::try_from(units).ok(), "{}", text);
        }

        /// Any whole number of milli-units, written in each of the equivalent forms, parses to
        /// the same value, and the order of two values is kept.
        #[test]
        fn equivalent_spellings_agree(a in 0u64..1u64 << 50, b in 0u64..1u64 << 50) {
            let nanos = i128::from(a) * 1_000_000;
            proptest::prop_assert_eq!(parse_nanos(&format!("{a}m")), Some(nanos));
            proptest::prop_assert_eq!(parse_nanos(&format!("{}u", u128::from(a) * 1000)), Some(nanos));
            proptest::prop_assert_eq!(parse_nanos(&format!("{}n", u128::from(a) * 1_000_000)), Some(nanos));
            proptest::prop_assert_eq!(
                parse_nanos(&format!("{}.{:03}", a / 1000, a % 1000)),
                Some(nanos)
            );
            proptest::prop_assert_eq!(parse_nanos(&format!("{a}e-3")), Some(nanos));
            proptest::prop_assert_eq!(
                parse_nanos(&format!("{a}m")) < parse_nanos(&format!("{b}m")),
                a < b
            );
        }
    }
}
