//! Many threads hammering the cache: no deadlock, consistent totals.

use std::sync::Arc;
use std::thread;

use super::{assert_consistent, b, size_of};
use crate::cache::{Cache, CacheConfig};

const THREADS: usize = 8;
const KEYS_PER_THREAD: usize = 500;
const ROUNDS: usize = 4;

#[test]
fn concurrent_puts_and_gets_keep_totals_consistent() {
    let cache = Arc::new(Cache::new(CacheConfig {
        max_bytes: 1 << 26,
        shards: 8,
        max_value_bytes: 1024,
    }));
    thread::scope(|scope| {
        for t in 0..THREADS {
            let cache = Arc::clone(&cache);
            scope.spawn(move || {
                for round in 0..ROUNDS {
                    for i in 0..KEYS_PER_THREAD {
                        let key = format!("t{t}-k{i}");
                        let value = format!("r{round}");
                        cache.put(b(&key), b(&value), None).unwrap();
                        assert_eq!(cache.get(key.as_bytes()), Some(b(&value)));
                        // Read a key another thread owns; it may or may not exist.
                        let other = format!("t{}-k{i}", (t + 1) % THREADS);
                        let _ = cache.get(other.as_bytes());
                    }
                }
            });
        }
    });

    let stats = cache.stats();
    let ops = (THREADS * KEYS_PER_THREAD * ROUNDS) as u64;
    assert_eq!(stats.puts, ops);
    assert_eq!(stats.hits + stats.misses, 2 * ops);
    assert!(stats.hits >= ops);
    assert_eq!((stats.evictions, stats.expirations), (0, 0));

    let mut expected_bytes = 0;
    for t in 0..THREADS {
        for i in 0..KEYS_PER_THREAD {
            let key = format!("t{t}-k{i}");
            let last = format!("r{}", ROUNDS - 1);
            assert_eq!(cache.get(key.as_bytes()), Some(b(&last)));
            expected_bytes += size_of(&key, &last);
        }
    }
    assert_eq!(cache.len(), THREADS * KEYS_PER_THREAD);
    assert_eq!(stats.entries, (THREADS * KEYS_PER_THREAD) as u64);
    assert_eq!(cache.bytes(), expected_bytes);
    assert_consistent(&cache);
}

#[test]
fn concurrent_mixed_ops_under_eviction_stay_within_bounds() {
    let max_bytes = 32 * 1024;
    let cache = Arc::new(Cache::new(CacheConfig {
        max_bytes,
        shards: 4,
        max_value_bytes: 512,
    }));
    thread::scope(|scope| {
        for t in 0..THREADS {
            let cache = Arc::clone(&cache);
            scope.spawn(move || {
                for i in 0..5000usize {
                    let key = format!("k{}", (i * 7 + t) % 300);
                    match i % 5 {
                        0 | 1 => {
                            let value = "v".repeat((i + t) % 400);
                            cache.put(b(&key), b(&value), None).unwrap();
                        }
                        2 | 3 => {
                            let _ = cache.get(key.as_bytes());
                        }
                        _ => {
                            let _ = cache.delete(key.as_bytes());
                            let _ = cache.sweep_expired(std::time::Instant::now(), 8);
                        }
                    }
                    assert!(cache.bytes() <= max_bytes);
                }
            });
        }
    });
    let stats = cache.stats();
    assert!(stats.evictions > 0);
    assert_eq!(stats.entries, cache.len() as u64);
    assert!(stats.bytes <= max_bytes);
    assert_consistent(&cache);
}
