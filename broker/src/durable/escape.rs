//! Topic names as directory names: an injective, filesystem-safe escaping. ASCII letters,
//! digits, `-`, `_` and `.` stay as they are (except a leading `.`, so no name is `.`, `..`
//! or hidden); every other byte, `%` included, becomes `%XX` (upper-case hex). Because `%`
//! itself is always escaped, two names never give the same result. A result longer than
//! [`MAX_PLAIN`] bytes is cut and suffixed with `~` and the SHA-256 of the whole name (`~`
//! never appears in an escaped name, so a cut name cannot equal an uncut one), keeping every
//! directory name under the usual 255-byte limit.

use sha2::{Digest, Sha256};

/// Longest escaped name kept whole.
pub const MAX_PLAIN: usize = 180;

/// The directory name of topic `name`'s log.
pub fn dir_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, b) in name.bytes().enumerate() {
        let plain = b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || (b == b'.' && i > 0);
        if plain {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() {
        return "%".to_string();
    }
    if out.len() > MAX_PLAIN {
        let mut cut = MAX_PLAIN - 8;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        let digest = Sha256::digest(name.as_bytes());
        let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        out.truncate(cut);
        out.push('~');
        out.push_str(&hex);
    }
    out
}

/// The topic whose log directory is `dir` (the inverse of [`dir_name`]); `None` for a name
/// [`dir_name`] does not produce, and for a cut name (the cut part cannot be recovered).
pub fn topic_name(dir: &str) -> Option<String> {
    if dir.contains('~') {
        return None;
    }
    let raw = dir.as_bytes();
    let mut bytes = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        if b == b'%' {
            let hex = raw.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            if hex.bytes().any(|c| c.is_ascii_lowercase()) {
                return None;
            }
            bytes.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            bytes.push(b);
            i += 1;
        }
    }
    let name = String::from_utf8(bytes).ok()?;
    (dir_name(&name) == dir).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn plain_names_stay_readable() {
        assert_eq!(dir_name("orders.eu-1_x"), "orders.eu-1_x");
        assert_eq!(dir_name("a/b"), "a%2Fb");
        assert_eq!(dir_name("100%"), "100%25");
        assert_eq!(dir_name(".."), "%2E.");
        assert_eq!(dir_name("."), "%2E");
        assert_eq!(dir_name(""), "%");
        assert_eq!(dir_name("é"), "%C3%A9");
    }

    #[test]
    fn escaping_is_injective_and_safe() {
        let names = [
            "a/b", "a%2Fb", "a%2fb", "a b", "a.b", ".a", "%2Ea", "a", "A", "a..b", "%", "%25",
            "x\0y", "x%00y", "~", "%7E", "", "%%", "%25%25",
        ];
        let mut seen = HashMap::new();
        for n in names {
            let d = dir_name(n);
            assert!(
                d.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.%~".contains(&b)),
                "{d}"
            );
            assert!(d != "." && d != ".." && !d.starts_with('.'), "{d}");
            if let Some(prev) = seen.insert(d.clone(), n) {
                panic!("{n:?} and {prev:?} both map to {d}");
            }
        }
    }

    #[test]
    fn long_names_are_cut_with_a_digest() {
        let a = "x".repeat(300);
        let b = format!("{}y", "x".repeat(299));
        let (da, db) = (dir_name(&a), dir_name(&b));
        assert!(da.len() < 255 && db.len() < 255);
        assert_ne!(da, db);
        assert!(da.contains('~'));
        assert_eq!(dir_name(&"x".repeat(MAX_PLAIN)), "x".repeat(MAX_PLAIN));
    }

    #[test]
    fn directory_names_map_back_to_their_topics() {
        for name in [
            "orders.eu-1_x",
            "a/b",
            ".hidden",
            "100%",
            "über/straße",
            "x y",
        ] {
            assert_eq!(topic_name(&dir_name(name)).as_deref(), Some(name), "{name}");
        }
        let long = "t".repeat(400);
        assert_eq!(topic_name(&dir_name(&long)), None, "a cut name");
        assert_eq!(topic_name("a%2fb"), None, "lower-case hex is not produced");
        assert_eq!(topic_name("a%2"), None);
        assert_eq!(topic_name("%FF"), None, "not UTF-8");
    }
}
