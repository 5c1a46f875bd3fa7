//! Eviction under the byte bound: expired entries first, then LRU.

use std::time::{Duration, Instant};

use super::{assert_consistent, b, one_shard, size_of};

/// A single-shard cache that holds exactly three one-byte-key entries.
fn three_slot_cache() -> crate::cache::Cache {
    one_shard(size_of("a", "1") * 3)
}

fn recency(cache: &crate::cache::Cache) -> Vec<bytes::Bytes> {
    cache
        .with_shard(0, |s| s.keys_by_recency())
        .unwrap_or_default()
}

#[test]
fn least_recently_written_is_evicted_first() {
    let cache = three_slot_cache();
    for key in ["a", "b", "c"] {
        cache.put(b(key), b("1"), None).unwrap();
    }
    cache.put(b("d"), b("1"), None).unwrap();
    assert_eq!(cache.get(b"a"), None);
    assert_eq!(recency(&cache), vec![b("d"), b("c"), b("b")]);
    assert_eq!(cache.stats().evictions, 1);
}

#[test]
fn a_read_protects_an_entry_from_eviction() {
    let cache = three_slot_cache();
    for key in ["a", "b", "c"] {
        cache.put(b(key), b("1"), None).unwrap();
    }
    assert!(cache.get(b"a").is_some()); // order (LRU→MRU): b c a
    cache.put(b("d"), b("1"), None).unwrap(); // evicts b → c a d
    assert_eq!(recency(&cache), vec![b("d"), b("a"), b("c")]);

    cache.put(b("c"), b("2"), None).unwrap(); // overwrite touches c → a d c
    cache.put(b("e"), b("1"), None).unwrap(); // evicts a → d c e
    assert_eq!(recency(&cache), vec![b("e"), b("c"), b("d")]);
    assert_eq!(cache.get(b"c"), Some(b("2")));
    assert_eq!(cache.stats().evictions, 2);
    assert_consistent(&cache);
}

#[test]
fn a_large_put_evicts_as_many_entries_as_needed() {
    let cache = one_shard(size_of("a", "1") * 4);
    for key in ["a", "b", "c", "d"] {
        cache.put(b(key), b("1"), None).unwrap();
    }
    // Slightly smaller than three small entries: a, b and c must go, d stays.
    let value = "x".repeat(usize::try_from(size_of("a", "1") * 2).unwrap() - 4);
    cache.put(b("big"), b(&value), None).unwrap();
    assert_eq!(recency(&cache), vec![b("big"), b("d")]);
    assert_eq!(cache.stats().evictions, 3);
    assert!(cache.bytes() <= size_of("a", "1") * 4);
    assert_consistent(&cache);
}

#[test]
fn expired_entries_are_reclaimed_before_live_lru_ones() {
    let t0 = Instant::now();
    let cache = three_slot_cache();
    cache.put_at(b("a"), b("1"), None, t0).unwrap();
    cache
        .put_at(b("b"), b("1"), Some(Duration::from_secs(10)), t0)
        .unwrap();
    cache.put_at(b("c"), b("1"), None, t0).unwrap();

    let later = t0 + Duration::from_secs(20);
    cache.put_at(b("d"), b("1"), None, later).unwrap();
    let stats = cache.stats();
    assert_eq!(stats.evictions, 0);
    assert_eq!(stats.expirations, 1);
    assert_eq!(cache.get_at(b"a", later), Some(b("1")));
    assert_eq!(cache.get_at(b"c", later), Some(b("1")));
    assert_eq!(cache.get_at(b"d", later), Some(b("1")));
    assert_consistent(&cache);
}

#[test]
fn bytes_never_exceed_max_bytes_across_shards() {
    let cache = crate::cache::Cache::new(crate::cache::CacheConfig {
        max_bytes: 64 * 1024,
        shards: 4,
        max_value_bytes: 2048,
    });
    for i in 0..5000usize {
        let value = "v".repeat(i % 2000);
        cache.put(b(&format!("k{i}")), b(&value), None).unwrap();
        assert!(cache.bytes() <= 64 * 1024);
    }
    assert!(cache.stats().evictions > 0);
    assert_consistent(&cache);
}
