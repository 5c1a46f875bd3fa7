//! The pattern language for topics and cache keys, defined once here (and documented in
//! `docs/security.md`).
//!
//! A name is split at `.` into tokens (a name without a `.` is one token; tokens may be
//! empty). A pattern is a `.`-separated list of non-empty tokens, each one of:
//!
//! - a literal, which matches a name token byte for byte;
//! - `*`, which matches exactly one name token, whatever it holds;
//! - `>`, allowed only as the last token, which matches one or more remaining name tokens.
//!
//! So `orders` matches only `orders`; `orders.*` matches `orders.eu` but neither `orders` nor
//! `orders.eu.west`; `tenant-a.>` matches `tenant-a.x` and `tenant-a.x.y` but not `tenant-a`;
//! `>` alone matches every name. A wildcard inside a token (`ord*`) is refused rather than
//! read as a literal, so a pattern never means something other than it seems to.
//!
//! Cache keys are opaque bytes; they are matched the same way, splitting at the byte `.`.

use std::fmt;

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The pattern is empty.
    #[error("pattern is empty")]
    Empty,
    /// A token between two dots (or at either end) is empty.
    #[error("pattern {0:?} has an empty token (two dots in a row, or a dot at either end)")]
    EmptyToken(String),
    /// `>` is not the last token.
    #[error("pattern {0:?}: '>' may only be the last token")]
    TailNotLast(String),
    /// `*` or `>` is part of a longer token.
    #[error("pattern {0:?}: '*' and '>' must be whole tokens (write 'a.*', not 'a*')")]
    PartialWildcard(String),
    /// The pattern is longer than any topic or key could be.
    #[error("pattern is longer than {MAX_PATTERN_BYTES} bytes")]
    TooLong,
    /// The pattern holds a control character or whitespace.
    #[error("pattern {0:?} holds a control character or whitespace")]
    BadCharacter(String),
}

/// Longest pattern accepted (the longest cache key, 1024 bytes).
pub const MAX_PATTERN_BYTES: usize = 1024;

/// One token of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Token {
    /// Matches a name token byte for byte.
    Literal(Vec<u8>),
    /// `*`: exactly one name token.
    One,
    /// `>`: one or more remaining name tokens (only last).
    Tail,
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    text: String,
    tokens: Vec<Token>,
}

impl Pattern {
    /// Parses `text`, refusing anything outside the language above.
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        if text.len() > MAX_PATTERN_BYTES {
            return Err(PatternError::TooLong);
        }
        if text.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(PatternError::BadCharacter(text.to_string()));
        }
        let parts: Vec<&str> = text.split('.').collect();
        let last = parts.len() - 1;
        let mut tokens = Vec::with_capacity(parts.len());
        for (i, part) in parts.iter().enumerate() {
            let token = match *part {
                "" => return Err(PatternError::EmptyToken(text.to_string())),
                "*" => Token::One,
                ">" if i == last => Token::Tail,
                ">" => return Err(PatternError::TailNotLast(text.to_string())),
                p if p.contains(['*', '>']) => {
                    return Err(PatternError::PartialWildcard(text.to_string()));
                }
                p => Token::Literal(p.as_bytes().to_vec()),
            };
            tokens.push(token);
        }
        Ok(Pattern {
            text: text.to_string(),
            tokens,
        })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The parsed tokens (for the pattern-against-pattern relations in `relation.rs`).
    pub(crate) fn tokens(&self) -> &[Token] {
        &self.tokens
    }

    /// Whether the pattern has no wildcard (it names exactly one topic or key).
    pub fn is_exact(&self) -> bool {
        self.tokens.iter().all(|t| matches!(t, Token::Literal(_)))
    }

    /// How many of the pattern's tokens are literal: of two patterns matching one name, the one
    /// with more literal tokens is the more specific (an exact name has only literal tokens).
    pub fn literal_tokens(&self) -> usize {
        self.tokens
            .iter()
            .filter(|t| matches!(t, Token::Literal(_)))
            .count()
    }

    /// Whether `name` (a topic's UTF-8 bytes, or a cache key) matches.
    pub fn matches(&self, name: &[u8]) -> bool {
        let mut parts = name.split(|b| *b == b'.');
        for token in &self.tokens {
            match token {
                Token::Tail => return parts.next().is_some(),
                Token::One => {
                    if parts.next().is_none() {
                        return false;
                    }
                }
                Token::Literal(lit) => match parts.next() {
                    Some(part) if part == lit.as_slice() => {}
                    _ => return false,
                },
            }
        }
        parts.next().is_none()
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, name: &str) -> bool {
        Pattern::parse(p).unwrap().matches(name.as_bytes())
    }

    #[test]
    fn exact_names_match_only_themselves() {
        assert!(m("orders", "orders"));
        assert!(!m("orders", "orders.eu"));
        assert!(!m("orders", "order"));
        assert!(m("sensors/42/temp", "sensors/42/temp"));
        assert!(Pattern::parse("a.b").unwrap().is_exact());
    }

    #[test]
    fn star_matches_exactly_one_token() {
        assert!(m("orders.*", "orders.eu"));
        assert!(!m("orders.*", "orders"));
        assert!(!m("orders.*", "orders.eu.west"));
        assert!(m("*.eu", "orders.eu"));
        assert!(m("a.*.c", "a..c"));
        assert!(m("*", "anything"));
        assert!(!m("*", "a.b"));
        assert!(!Pattern::parse("a.*").unwrap().is_exact());
    }

    #[test]
    fn tail_matches_one_or_more_tokens() {
        assert!(m("tenant-a.>", "tenant-a.x"));
        assert!(m("tenant-a.>", "tenant-a.x.y.z"));
        assert!(!m("tenant-a.>", "tenant-a"));
        assert!(!m("tenant-a.>", "tenant-b.x"));
        assert!(m(">", "x"));
        assert!(m(">", "x.y"));
        assert!(m("a.*.>", "a.b.c"));
        assert!(!m("a.*.>", "a.b"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        assert_eq!(Pattern::parse(""), Err(PatternError::Empty));
        assert!(matches!(
            Pattern::parse("a..b"),
            Err(PatternError::EmptyToken(_))
        ));
        assert!(matches!(
            Pattern::parse(".a"),
            Err(PatternError::EmptyToken(_))
        ));
        assert!(matches!(
            Pattern::parse("a."),
            Err(PatternError::EmptyToken(_))
        ));
        assert!(matches!(
            Pattern::parse("a.>.b"),
            Err(PatternError::TailNotLast(_))
        ));
        assert!(matches!(
            Pattern::parse("ord*"),
            Err(PatternError::PartialWildcard(_))
        ));
        assert!(matches!(
            Pattern::parse("a.b>"),
            Err(PatternError::PartialWildcard(_))
        ));
        assert!(matches!(
            Pattern::parse("a b"),
            Err(PatternError::BadCharacter(_))
        ));
        assert_eq!(
            Pattern::parse(&"a".repeat(MAX_PATTERN_BYTES + 1)),
            Err(PatternError::TooLong)
        );
    }
}
