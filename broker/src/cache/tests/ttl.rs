//! Expiry with an injected clock: lazy reclaim and the active sweep.

use std::time::{Duration, Instant};

use super::{assert_consistent, b, one_shard, size_of};

const TTL: Duration = Duration::from_secs(30);

#[test]
fn expired_key_is_never_returned_even_before_a_sweep() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache.put_at(b("k"), b("v"), Some(TTL), t0).unwrap();
    assert_eq!(
        cache.get_at(b"k", t0 + TTL - Duration::from_nanos(1)),
        Some(b("v"))
    );
    // The deadline itself is already expired.
    assert_eq!(cache.get_at(b"k", t0 + TTL), None);
    let stats = cache.stats();
    assert_eq!(stats.expirations, 1);
    assert_eq!(stats.misses, 1);
    assert_eq!(stats.entries, 0);
    assert_eq!(cache.bytes(), 0);
}

#[test]
fn sweep_reclaims_expired_entries_and_frees_bytes() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache.put_at(b("short"), b("v"), Some(TTL), t0).unwrap();
    cache.put_at(b("long"), b("v"), Some(TTL * 10), t0).unwrap();
    cache.put_at(b("forever"), b("v"), None, t0).unwrap();
    let full = cache.bytes();

    assert_eq!(cache.sweep_expired(t0 + TTL / 2, 100), 0);
    assert_eq!(cache.sweep_expired(t0 + TTL, 100), 1);
    assert_eq!(cache.bytes(), full - size_of("short", "v"));
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.stats().expirations, 1);

    assert_eq!(cache.sweep_expired(t0 + TTL * 100, 100), 1);
    assert_eq!(cache.bytes(), size_of("forever", "v"));
    assert_eq!(cache.stats().expirations, 2);
    assert_consistent(&cache);
}

#[test]
fn sweep_respects_its_budget_and_goes_earliest_first() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    for i in 0..10u64 {
        let ttl = Duration::from_secs(10 - i);
        cache
            .put_at(b(&format!("k{i}")), b("v"), Some(ttl), t0)
            .unwrap();
    }
    let end = t0 + Duration::from_secs(60);
    assert_eq!(cache.sweep_expired(end, 3), 3);
    // k9, k8, k7 had the earliest deadlines.
    for i in 0..7 {
        assert!(
            cache
                .with_shard(0, |s| s.keys_by_recency().contains(&b(&format!("k{i}"))))
                .unwrap_or(false)
        );
    }
    assert_eq!(cache.sweep_expired(end, 0), 0);
    assert_eq!(cache.sweep_expired(end, 100), 7);
    assert!(cache.is_empty());
    assert_eq!(cache.stats().expirations, 10);
}

#[test]
fn overwrite_replaces_the_ttl() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache.put_at(b("k"), b("v1"), Some(TTL), t0).unwrap();
    cache.put_at(b("k"), b("v2"), None, t0).unwrap();
    assert_eq!(cache.get_at(b"k", t0 + TTL * 2), Some(b("v2")));
    assert_eq!(cache.sweep_expired(t0 + TTL * 2, 100), 0);

    cache.put_at(b("k"), b("v3"), Some(TTL), t0).unwrap();
    assert_eq!(cache.get_at(b"k", t0 + TTL), None);
    assert_consistent(&cache);
}

#[test]
fn delete_of_an_expired_key_reports_false_and_counts_an_expiration() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache.put_at(b("k"), b("v"), Some(TTL), t0).unwrap();
    assert!(!cache.delete_at(b"k", t0 + TTL));
    let stats = cache.stats();
    assert_eq!((stats.deletes, stats.expirations, stats.entries), (0, 1, 0));
}

#[test]
fn zero_ttl_removes_the_old_value_and_stores_nothing() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache.put_at(b("k"), b("v"), None, t0).unwrap();
    cache
        .put_at(b("k"), b("v"), Some(Duration::ZERO), t0)
        .unwrap();
    assert_eq!(cache.get_at(b"k", t0), None);
    assert!(cache.is_empty());
    assert_eq!(cache.stats().puts, 2);
}

#[test]
fn huge_ttl_means_no_expiry() {
    let t0 = Instant::now();
    let cache = one_shard(1 << 20);
    cache
        .put_at(b("k"), b("v"), Some(Duration::MAX), t0)
        .unwrap();
    assert_eq!(
        cache.get_at(b"k", t0 + Duration::from_secs(1 << 30)),
        Some(b("v"))
    );
}
