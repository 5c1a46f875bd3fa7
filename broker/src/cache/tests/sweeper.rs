//! The background sweeper task reclaims expired entries and stops with the
//! cache.

use std::sync::Arc;
use std::time::Duration;

use super::{b, one_shard};

#[tokio::test]
async fn sweeper_reclaims_expired_entries_in_the_background() {
    let cache = Arc::new(one_shard(1 << 20));
    for i in 0..50 {
        cache
            .put(b(&format!("k{i}")), b("v"), Some(Duration::from_millis(5)))
            .unwrap();
    }
    cache.put(b("keep"), b("v"), None).unwrap();
    let handle = cache.spawn_sweeper(Duration::from_millis(5));

    let mut waited = Duration::ZERO;
    while cache.len() > 1 && waited < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        waited += Duration::from_millis(10);
    }
    assert_eq!(cache.len(), 1);
    assert_eq!(cache.stats().expirations, 50);
    assert_eq!(cache.get(b"keep"), Some(b("v")));
    handle.abort();
}

#[tokio::test]
async fn sweeper_ends_once_the_cache_is_dropped() {
    let cache = Arc::new(one_shard(1 << 20));
    let handle = cache.spawn_sweeper(Duration::ZERO);
    drop(cache);
    tokio::time::timeout(Duration::from_secs(5), handle)
        .await
        .expect("sweeper did not stop")
        .expect("sweeper panicked");
}
