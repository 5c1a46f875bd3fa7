//! Relations between two patterns of the one pattern language (`pattern.rs`), as sets of the
//! names they match: whether one set of patterns covers every name another pattern matches
//! ([`covers`]), and whether two patterns match a name in common ([`overlaps`]). A
//! subscription pattern is allowed when the user's `allow` list covers it and no `deny`
//! pattern overlaps it (`users.rs`). Both are pure functions of the parsed tokens.
//!
//! Names are sequences of arbitrary tokens, so beside the literals a pattern names there is
//! always a token none of them names; that is what `*` is split into below (each literal in
//! play, and one "fresh" token standing for all the others).

use crate::pattern::{Pattern, Token};

/// The most steps [`covers`] takes before it gives up and answers `false` (the safe answer for
/// a permission check): a long pattern of `*` against many allow patterns that all keep
/// matching could otherwise branch without end in practice.
pub const MAX_COVER_STEPS: usize = 100_000;

/// `[*, >]`: what a `>` is beside a single `*` (one token and then one or more).
const ONE_THEN_TAIL: &[Token] = &[Token::One, Token::Tail];
/// `[*]`.
const ONE: &[Token] = &[Token::One];

/// Whether every name `pattern` matches is matched by at least one of `by` (the union of their
/// names contains `pattern`'s). `false` when deciding takes more than [`MAX_COVER_STEPS`].
pub fn covers(by: &[Pattern], pattern: &Pattern) -> bool {
    let alive: Vec<&[Token]> = by.iter().map(Pattern::tokens).collect();
    let mut steps = 0usize;
    covers_tokens(pattern.tokens(), &alive, &mut steps).unwrap_or(false)
}

/// Whether some name matches both `a` and `b`.
pub fn overlaps(a: &Pattern, b: &Pattern) -> bool {
    overlaps_tokens(a.tokens(), b.tokens())
}

/// The remaining allow patterns after one name token: those whose head takes `token`
/// (`Some(literal)`, or `None` for a token no literal names), advanced past it.
fn advance<'a>(alive: &[&'a [Token]], token: Option<&[u8]>) -> Vec<&'a [Token]> {
    alive
        .iter()
        .filter_map(|a| match (a.first(), token) {
            (Some(Token::One), _) => Some(&a[1..]),
            (Some(Token::Literal(l)), Some(t)) if l.as_slice() == t => Some(&a[1..]),
            _ => None,
        })
        .collect()
}

/// `None`: out of steps.
fn covers_tokens(p: &[Token], alive: &[&[Token]], steps: &mut usize) -> Option<bool> {
    *steps += 1;
    if *steps > MAX_COVER_STEPS {
        return None;
    }
    let Some(head) = p.first() else {
        // Every name `p` matched ends here: some allow pattern must end here too.
        return Some(alive.iter().any(|a| a.is_empty()));
    };
    if alive.is_empty() {
        return Some(false);
    }
    // What is left of `p` matches one token or more, and a `>` takes all of them.
    if alive.iter().any(|a| matches!(a.first(), Some(Token::Tail))) {
        return Some(true);
    }
    let rest = &p[1..];
    match head {
        Token::Literal(l) => covers_tokens(rest, &advance(alive, Some(l)), steps),
        Token::One => {
            // A token no allow pattern names as a literal, then each literal they do name.
            if !covers_tokens(rest, &advance(alive, None), steps)? {
                return Some(false);
            }
            let mut seen: Vec<&[u8]> = Vec::new();
            for a in alive {
                if let Some(Token::Literal(l)) = a.first()
                    && !seen.contains(&l.as_slice())
                {
                    seen.push(l);
                    if !covers_tokens(rest, &advance(alive, Some(l)), steps)? {
                        return Some(false);
                    }
                }
            }
            Some(true)
        }
        // `>` (always last) matches what `*` does, and what `*.>` does.
        Token::Tail => {
            Some(covers_tokens(ONE, alive, steps)? && covers_tokens(ONE_THEN_TAIL, alive, steps)?)
        }
    }
}

fn overlaps_tokens(a: &[Token], b: &[Token]) -> bool {
    match (a.first(), b.first()) {
        (None, None) => true,
        (None, Some(_)) | (Some(_), None) => false,
        // The other side matches at least one name of one token or more; `>` takes it.
        (Some(Token::Tail), Some(_)) | (Some(_), Some(Token::Tail)) => true,
        (Some(Token::Literal(x)), Some(Token::Literal(y))) => {
            x == y && overlaps_tokens(&a[1..], &b[1..])
        }
        (Some(_), Some(_)) => overlaps_tokens(&a[1..], &b[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Pattern {
        Pattern::parse(text).unwrap()
    }

    fn covered(by: &[&str], pattern: &str) -> bool {
        let by: Vec<Pattern> = by.iter().map(|t| p(t)).collect();
        covers(&by, &p(pattern))
    }

    #[test]
    fn a_pattern_covers_its_narrower_forms() {
        assert!(covered(&["orders.>"], "orders.*"));
        assert!(covered(&["orders.>"], "orders.*.eu"));
        assert!(covered(&["orders.*"], "orders.eu"));
        assert!(covered(&[">"], "*.>"));
        assert!(!covered(&["orders.*"], "orders.>"));
        assert!(!covered(&["orders.eu"], "orders.*"));
        assert!(!covered(&["orders.>"], ">"));
        assert!(!covered(&["*.eu"], "orders.*"));
    }

    #[test]
    fn a_union_covers_what_no_single_pattern_does() {
        assert!(covered(&["a.*", "a.*.>"], "a.>"));
        assert!(!covered(&["a.*", "a.*.*"], "a.>"));
        assert!(covered(&["a.x", "a.*"], "a.*"));
        assert!(covered(&["*.x.*", "*.*"], "a.*"));
        assert!(!covered(&["*.x", "a.y"], "a.*"));
        assert!(!covered(&[], "a"));
    }

    #[test]
    fn overlap_needs_a_common_name() {
        assert!(overlaps(&p("orders.*"), &p("orders.secret")));
        assert!(overlaps(&p("*.secret"), &p("orders.*")));
        assert!(overlaps(&p("a.>"), &p("*.b.c")));
        assert!(!overlaps(&p("a.>"), &p("a")));
        assert!(!overlaps(&p("orders.*"), &p("orders.a.b")));
        assert!(!overlaps(&p("orders.*"), &p("billing.>")));
    }

    #[test]
    fn a_check_past_its_step_budget_is_refused() {
        let long = vec!["*"; 400].join(".");
        let by = ["x.>", "*.y.>", "*.*.z.>", "*.*.*.>", "*.*.*"];
        let by: Vec<Pattern> = by.iter().map(|t| p(t)).collect();
        // `*.*.*.>` takes every name of four tokens or more.
        assert!(covers(&by, &p(&long)));
        // Thirty `*` against allow patterns naming a literal at every depth, beside an all-`*`
        // one that covers everything: every token splits in two cases, 2^30 in all. Covered,
        // but refused once `MAX_COVER_STEPS` steps are spent.
        let all_stars = |n: usize| p(&vec!["*"; n].join("."));
        let literal_at_every_depth = |n: usize| {
            let mut by: Vec<Pattern> = (0..n)
                .map(|d| {
                    let mut t = vec!["*"; n];
                    t[d] = "x";
                    p(&t.join("."))
                })
                .collect();
            by.push(all_stars(n));
            by
        };
        assert!(!covers(&literal_at_every_depth(30), &all_stars(30)));
        // The same check on six tokens (64 cases) is decided.
        assert!(covers(&literal_at_every_depth(6), &all_stars(6)));
    }
}
