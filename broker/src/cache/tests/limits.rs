//! Oversized values are rejected with a typed error and change nothing.

use super::{b, one_shard, size_of};
use crate::cache::{Cache, CacheConfig, CacheError, ENTRY_OVERHEAD};

#[test]
fn value_over_max_value_bytes_is_rejected() {
    let cache = Cache::new(CacheConfig {
        max_bytes: 1 << 20,
        shards: 1,
        max_value_bytes: 4,
    });
    cache.put(b("k"), b("old"), None).unwrap();
    let before = cache.stats();
    let err = cache.put(b("k"), b("12345"), None).unwrap_err();
    assert_eq!(err, CacheError::ValueTooLarge { size: 5, max: 4 });
    assert_eq!(cache.get(b"k"), Some(b("old")));
    let after = cache.stats();
    assert_eq!(after.puts, before.puts);
    assert_eq!(after.bytes, before.bytes);
    assert_eq!(after.entries, before.entries);
    cache.put(b("k"), b("1234"), None).unwrap();
}

#[test]
fn entry_over_shard_budget_is_rejected_without_emptying_the_shard() {
    let budget = size_of("a", "1") * 3;
    let cache = one_shard(budget);
    cache.put(b("a"), b("1"), None).unwrap();
    cache.put(b("b"), b("2"), None).unwrap();
    let before = cache.stats();

    let huge = "x".repeat(usize::try_from(budget).unwrap());
    let err = cache.put(b("c"), b(&huge), None).unwrap_err();
    assert_eq!(
        err,
        CacheError::ValueTooLarge {
            size: 1 + huge.len() + ENTRY_OVERHEAD,
            max: usize::try_from(budget).unwrap(),
        }
    );
    assert_eq!(cache.stats(), before);
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.get(b"a"), Some(b("1")));
    assert_eq!(cache.get(b"b"), Some(b("2")));
}

#[test]
fn entry_exactly_at_budget_fits() {
    let budget = size_of("k", "exact");
    let cache = one_shard(budget);
    cache.put(b("other"), b(""), None).unwrap();
    cache.put(b("k"), b("exact"), None).unwrap();
    assert_eq!(cache.bytes(), budget);
    assert_eq!(cache.get(b"other"), None);
    assert_eq!(cache.stats().evictions, 1);
}

#[test]
fn error_message_names_both_sizes() {
    let err = CacheError::ValueTooLarge { size: 10, max: 4 };
    let text = err.to_string();
    assert!(text.contains("10") && text.contains('4'), "{text}");
}
