//! `starling-placement`: which cluster member owns a topic or a cache key.
//!
//! Placement is rendezvous (highest-random-weight) hashing: every member scores every key with
//! a hash of (member id, key) and the highest score owns the key. It is a pure function of the
//! member ids and the key, so the broker and every SDK compute the same owner without
//! coordination, and a change of membership moves only the keys whose winner changed — about
//! 1/n of them when one of n members joins or leaves.
//!
//! The hash is FNV-1a over the member id, a separator byte and the key, finished with the
//! splitmix64 mixer. It is specified here and must never change: brokers and SDKs of different
//! versions have to agree on it (test vectors in this file pin it).

/// What can be placed: a topic name or a cache key, kept apart so a topic and a cache key with
/// the same bytes can have different owners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A pub/sub topic.
    Topic,
    /// A cache key.
    CacheKey,
}

impl Kind {
    fn tag(self) -> u8 {
        match self {
            Kind::Topic => b't',
            Kind::CacheKey => b'k',
        }
    }
}

pub mod hash;

use hash::{FNV_OFFSET, fnv1a, mix};

/// The score of `member` for `key`. Higher wins; ties go to the smaller member id.
pub fn score(member: &str, kind: Kind, key: &[u8]) -> u64 {
    let h = fnv1a(FNV_OFFSET, member.as_bytes());
    let h = fnv1a(h, &[0xff, kind.tag()]);
    mix(fnv1a(h, key))
}

/// The owner of `key` among `members` (by id), or `None` when there are no members.
pub fn owner<'a, I>(members: I, kind: Kind, key: &[u8]) -> Option<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut best: Option<(u64, &'a str)> = None;
    for m in members {
        let s = score(m, kind, key);
        best = match best {
            Some((bs, bm)) if bs > s || (bs == s && bm <= m) => Some((bs, bm)),
            _ => Some((s, m)),
        };
    }
    best.map(|(_, m)| m)
}

/// `members` (by id) in `key`'s placement order: highest score first, ties to the smaller id.
/// The first is [`owner`]; the first N are where N copies of the key go.
pub fn ranked<'a, I>(members: I, kind: Kind, key: &[u8]) -> Vec<&'a str>
where
    I: IntoIterator<Item = &'a str>,
{
    let mut scored: Vec<(u64, &'a str)> = members
        .into_iter()
        .map(|m| (score(m, kind, key), m))
        .collect();
    scored.sort_unstable_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().map(|(_, m)| m).collect()
}

/// A membership epoch: a hash of the sorted, de-duplicated member ids and addresses. Equal
/// member sets always give equal epochs; it is never 0 for a non-empty set.
pub fn epoch<'a, I>(members: I) -> u64
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut sorted: Vec<(&str, &str)> = members.into_iter().collect();
    sorted.sort_unstable();
    sorted.dedup();
    if sorted.is_empty() {
        return 0;
    }
    let mut h = FNV_OFFSET;
    for (id, addr) in sorted {
        h = fnv1a(h, id.as_bytes());
        h = fnv1a(h, &[0]);
        h = fnv1a(h, addr.as_bytes());
        h = fnv1a(h, &[0xff]);
    }
    mix(h).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("starling-{i}")).collect()
    }

    fn owners(ms: &[String], keys: usize) -> Vec<String> {
        (0..keys)
            .map(|k| {
                let key = format!("key-{k}");
                owner(
                    ms.iter().map(String::as_str),
                    Kind::CacheKey,
                    key.as_bytes(),
                )
                .unwrap_or_default()
                .to_string()
            })
            .collect()
    }

    #[test]
    fn pinned_vectors_never_change() {
        // Computed by an independent implementation of the documented hash. If this fails,
        // placement changed and mixed-version clusters would disagree.
        assert_eq!(
            score("starling-0", Kind::Topic, b"orders"),
            0x0719_a572_fdea_5663
        );
        assert_eq!(
            score("starling-1", Kind::CacheKey, b"session:42"),
            0xffca_9395_f718_3b8a
        );
        let ms = members(3);
        assert_eq!(
            owner(ms.iter().map(String::as_str), Kind::Topic, b"orders"),
            Some("starling-2")
        );
    }

    #[test]
    fn ranked_starts_with_the_owner_and_lists_every_member_once() {
        let ms = members(7);
        for key in ["orders", "a", "b.c", ""] {
            let ranked = ranked(ms.iter().map(String::as_str), Kind::Topic, key.as_bytes());
            let owner = owner(ms.iter().map(String::as_str), Kind::Topic, key.as_bytes());
            assert_eq!(ranked.first().copied(), owner, "{key}");
            let mut sorted = ranked.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 7, "{key}");
            // Removing a member keeps the others' order (rendezvous).
            let fewer: Vec<&str> = ranked.iter().copied().filter(|m| *m != ranked[0]).collect();
            let again = super::ranked(fewer.iter().copied(), Kind::Topic, key.as_bytes());
            assert_eq!(again, ranked[1..].to_vec(), "{key}");
        }
    }

    #[test]
    fn no_members_no_owner_and_one_member_owns_everything() {
        assert_eq!(owner(std::iter::empty(), Kind::Topic, b"x"), None);
        assert_eq!(owner(["only"], Kind::Topic, b"x"), Some("only"));
    }

    #[test]
    fn deterministic_and_order_independent() {
        let a = ["b-1", "a-0", "c-2"];
        let b = ["c-2", "b-1", "a-0"];
        for k in 0..1000 {
            let key = k.to_string();
            assert_eq!(
                owner(a, Kind::Topic, key.as_bytes()),
                owner(b, Kind::Topic, key.as_bytes())
            );
        }
    }

    #[test]
    fn balanced_within_ten_percent_over_100k_keys() {
        for n in [3usize, 5, 7] {
            let ms = members(n);
            let mut counts = vec![0usize; n];
            for o in owners(&ms, 100_000) {
                if let Some(i) = ms.iter().position(|m| *m == o) {
                    counts[i] += 1;
                }
            }
            let fair = 100_000.0 / n as f64;
            for c in &counts {
                let off = (*c as f64 - fair).abs() / fair;
                assert!(off < 0.10, "n={n} counts={counts:?}");
            }
        }
    }

    #[test]
    fn only_about_one_nth_moves_on_a_change() {
        let keys = 100_000;
        for (from, to) in [(3usize, 4usize), (4, 2), (5, 4)] {
            let before = owners(&members(from), keys);
            let after = owners(&members(to), keys);
            let moved =
                before.iter().zip(&after).filter(|(a, b)| a != b).count() as f64 / keys as f64;
            // Growing n→n+1 moves 1/(n+1) of the keys; shrinking moves the leavers' share.
            let expected = if to > from {
                1.0 / to as f64
            } else {
                (from - to) as f64 / from as f64
            };
            assert!(
                (moved - expected).abs() < 0.02,
                "{from}->{to}: moved {moved:.3}, expected {expected:.3}"
            );
        }
    }

    #[test]
    fn topics_and_keys_are_placed_independently() {
        let ms = members(5);
        let differ = (0..1000)
            .filter(|k| {
                let key = k.to_string();
                let it = || ms.iter().map(String::as_str);
                owner(it(), Kind::Topic, key.as_bytes())
                    != owner(it(), Kind::CacheKey, key.as_bytes())
            })
            .count();
        assert!(differ > 600, "{differ}");
    }

    #[test]
    fn epoch_depends_only_on_the_set() {
        let a = epoch([("a", "1:1"), ("b", "2:2")]);
        assert_eq!(a, epoch([("b", "2:2"), ("a", "1:1"), ("a", "1:1")]));
        assert_ne!(a, epoch([("a", "1:1")]));
        assert_ne!(a, epoch([("a", "1:1"), ("b", "2:3")]));
        assert_eq!(epoch(std::iter::empty()), 0);
    }
}
