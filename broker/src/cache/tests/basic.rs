//! Put, get, overwrite and delete without time or space pressure.

use super::{assert_consistent, b, one_shard, size_of};
use crate::cache::{Cache, CacheConfig, CacheStats};

#[test]
fn get_after_put_returns_value() {
    let cache = one_shard(1 << 20);
    assert!(cache.is_empty());
    cache.put(b("k"), b("v"), None).unwrap();
    assert_eq!(cache.get(b"k"), Some(b("v")));
    assert_eq!(cache.get(b"other"), None);
    assert_eq!(cache.len(), 1);
    assert!(!cache.is_empty());
    assert_eq!(cache.bytes(), size_of("k", "v"));
    assert_eq!(
        cache.stats(),
        CacheStats {
            hits: 1,
            misses: 1,
            puts: 1,
            entries: 1,
            bytes: size_of("k", "v"),
            ..CacheStats::default()
        }
    );
}

#[test]
fn overwrite_replaces_value_and_accounting() {
    let cache = one_shard(1 << 20);
    cache.put(b("k"), b("short"), None).unwrap();
    cache.put(b("k"), b("a much longer value"), None).unwrap();
    assert_eq!(cache.get(b"k"), Some(b("a much longer value")));
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.bytes(), size_of("k", "a much longer value"));
    cache.put(b("k"), b(""), None).unwrap();
    assert_eq!(cache.bytes(), size_of("k", ""));
    assert_eq!(cache.stats().puts, 3);
    assert_consistent(&cache);
}

#[test]
fn put_reports_whether_a_live_value_was_replaced() {
    let t0 = std::time::Instant::now();
    let ttl = std::time::Duration::from_secs(1);
    let cache = one_shard(1 << 20);
    assert_eq!(cache.put_at(b("k"), b("v1"), Some(ttl), t0), Ok(false));
    assert_eq!(cache.put_at(b("k"), b("v2"), Some(ttl), t0), Ok(true));
    // The value expired before the put: nothing live was replaced.
    assert_eq!(cache.put_at(b("k"), b("v3"), None, t0 + ttl * 2), Ok(false));
    assert_eq!(cache.put_at(b("k"), b("v4"), None, t0 + ttl * 2), Ok(true));
    assert!(cache.delete(b"k"));
    assert_eq!(cache.put(b("k"), b("v5"), None), Ok(false));
}

#[test]
fn delete_reports_whether_a_live_entry_existed() {
    let cache = one_shard(1 << 20);
    cache.put(b("k"), b("v"), None).unwrap();
    assert!(cache.delete(b"k"));
    assert!(!cache.delete(b"k"));
    assert!(!cache.delete(b"never"));
    assert_eq!(cache.get(b"k"), None);
    assert!(cache.is_empty());
    assert_eq!(cache.bytes(), 0);
    assert_eq!(cache.stats().deletes, 1);
    assert_consistent(&cache);
}

#[test]
fn keys_spread_over_shards_and_totals_add_up() {
    let cache = Cache::new(CacheConfig {
        max_bytes: 1 << 24,
        shards: 8,
        max_value_bytes: 1024,
    });
    let mut expected_bytes = 0;
    for i in 0..1000 {
        let key = format!("key-{i}");
        cache.put(b(&key), b("value"), None).unwrap();
        expected_bytes += size_of(&key, "value");
    }
    let used = (0..cache.shard_count())
        .filter(|&i| cache.with_shard(i, |s| s.len()).unwrap_or(0) > 0)
        .count();
    assert_eq!(used, 8, "1000 keys should land on every shard");
    assert_eq!(cache.len(), 1000);
    assert_eq!(cache.bytes(), expected_bytes);
    for i in 0..1000 {
        assert_eq!(cache.get(format!("key-{i}").as_bytes()), Some(b("value")));
    }
    assert_consistent(&cache);
}

#[test]
fn shard_count_is_rounded_up_to_a_power_of_two() {
    let cases = [
        (0, 1),
        (1, 1),
        (3, 4),
        (16, 16),
        (17, 32),
        (usize::MAX, 1 << 16),
    ];
    for (requested, expected) in cases {
        let cache = Cache::new(CacheConfig {
            max_bytes: 1 << 20,
            shards: requested,
            max_value_bytes: 1024,
        });
        assert_eq!(cache.shard_count(), expected, "requested {requested}");
        assert_eq!(cache.shard_budget(), (1 << 20) / expected as u64);
    }
}

#[test]
fn export_copies_live_matching_entries_with_remaining_ttl() {
    let cache = Cache::new(CacheConfig {
        max_bytes: 1 << 20,
        shards: 4,
        max_value_bytes: 1 << 10,
    });
    cache.put(b("a1"), b("v1"), None).unwrap();
    cache
        .put(b("a2"), b("v2"), Some(std::time::Duration::from_secs(60)))
        .unwrap();
    cache.put(b("b1"), b("v3"), None).unwrap();
    let mut out = cache.export_where(|k| k.starts_with(b"a"));
    out.sort_by(|x, y| x.key.cmp(&y.key));
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].key.clone(), out[0].value.clone(), out[0].ttl),
        (b("a1"), b("v1"), None)
    );
    let ttl = out[1].ttl.unwrap();
    assert!(ttl > std::time::Duration::from_secs(55) && ttl <= std::time::Duration::from_secs(60));
    // Exporting copies: the entries stay.
    assert_eq!(cache.len(), 3);
    // Removing an export removes that write only: a rewrite (even of the same value) stays.
    cache.put(b("a1"), b("v1"), None).unwrap();
    assert!(!cache.remove_exported(&out[0]));
    assert!(cache.remove_exported(&out[1]));
    assert_eq!(cache.get(b"a1"), Some(b("v1")));
    assert_eq!(cache.get(b"a2"), None);
}
