//! SHA-256 certificate fingerprints: computing them and parsing their hex form.

use sha2::{Digest, Sha256};

use crate::ClientError;

/// SHA-256 of a certificate's DER encoding.
pub fn sha256(der: &[u8]) -> [u8; 32] {
    Sha256::digest(der).into()
}

/// Parses 64 hex digits (either case), optionally separated by `:`.
pub(crate) fn parse_hex(text: &str) -> Result<[u8; 32], ClientError> {
    let bad = |why: &str| ClientError::Config(format!("bad SHA-256 fingerprint: {why}"));
    let digits: Vec<u8> = text.trim().bytes().filter(|b| *b != b':').collect();
    if digits.len() != 64 {
        return Err(bad("expected 64 hex digits"));
    }
    let mut out = [0u8; 32];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        let (Some(hi), Some(lo)) = (nibble(pair[0]), nibble(pair[1])) else {
            return Err(bad("not a hex digit"));
        };
        *byte = hi << 4 | lo;
    }
    Ok(out)
}

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_plain_and_colon_separated() {
        let plain = "00112233445566778899aabbccddeeff00112233445566778899AABBCCDDEEFF";
        let fp = parse_hex(plain).ok();
        assert_eq!(
            fp.map(|f| (f[0], f[1], f[15], f[31])),
            Some((0, 0x11, 0xff, 0xff))
        );
        let colons: Vec<String> = plain
            .as_bytes()
            .chunks(2)
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        assert_eq!(parse_hex(&colons.join(":")).ok(), fp);
    }

    #[test]
    fn rejects_wrong_length_and_non_hex() {
        assert!(parse_hex("abcd").is_err());
        assert!(parse_hex(&"g".repeat(64)).is_err());
        assert!(parse_hex(&"a".repeat(66)).is_err());
    }

    #[test]
    fn digest_matches_known_value() {
        // SHA-256 of the empty string.
        assert_eq!(sha256(b"")[..4], [0xe3, 0xb0, 0xc4, 0x42]);
    }
}
