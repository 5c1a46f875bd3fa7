//! The cache over QUIC: put/get/delete, TTL expiry and eviction, with counters.

use std::time::Duration;

use bytes::Bytes;
use starling_client::Client;
use starling_config::{ConfigOverrides, Profile};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn put_get_delete_and_ttl() {
    let b = start_default().await;
    let c = b.client().await;
    assert!(!c.cache_put("k", "v0", None).await.expect("put"));
    assert!(
        c.cache_put("k", "v", None).await.expect("put"),
        "CacheOk.existed: a live value was replaced"
    );
    assert_eq!(
        c.cache_get("k").await.expect("get"),
        Some(Bytes::from_static(b"v"))
    );
    assert!(c.cache_delete("k").await.expect("del"));
    assert!(!c.cache_delete("k").await.expect("del"));
    assert_eq!(c.cache_get("k").await.expect("get"), None);

    c.cache_put("short", "lived", Some(Duration::from_millis(150)))
        .await
        .expect("put");
    assert!(c.cache_get("short").await.expect("get").is_some());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        c.cache_get("short").await.expect("get"),
        None,
        "expired keys are never returned"
    );
    let m = wait_metrics(&b, "expiration reclaimed", |m| {
        m.get("starling_cache_expirations_total") >= 1.0
    })
    .await;
    assert_eq!(m.get("starling_cache_hits_total"), 2.0);
    assert_eq!(m.get("starling_cache_misses_total"), 2.0);
    assert_eq!(m.get("starling_cache_entries"), 0.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn byte_bound_evicts_least_recently_used() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            cache_max_bytes: Some(64 * 1024),
            cache_shards: Some(1),
            cache_max_value_bytes: Some(8 * 1024),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    let value = Bytes::from(vec![9u8; 4096]);
    for i in 0..40 {
        c.cache_put(format!("key-{i}"), value.clone(), None)
            .await
            .expect("put");
    }
    assert_eq!(
        c.cache_get("key-0").await.expect("get"),
        None,
        "oldest evicted"
    );
    assert!(
        c.cache_get("key-39").await.expect("get").is_some(),
        "newest kept"
    );
    let m = b.metrics().await;
    assert!(m.get("starling_cache_evictions_total") >= 20.0);
    assert!(m.get("starling_cache_bytes") <= 64.0 * 1024.0);
    let too_big = c.cache_put("huge", vec![0u8; 9000], None).await;
    assert!(
        too_big.is_err(),
        "a value above cache_max_value_bytes is refused"
    );
    b.running.shutdown().await;
}

/// Cache connections a client with `depth` opened while running three rounds of `n` concurrent
/// puts.
async fn cache_connections_for(b: &TestBroker, depth: u32, n: usize) -> f64 {
    let c = Client::connect(b.client_config().with_cache_stream_depth(depth))
        .await
        .expect("connect");
    let before = b.metrics().await.get("starling_connections_total");
    for round in 0..3 {
        let puts = (0..n).map(|i| c.cache_put(format!("k{round}-{i}"), "v", None));
        for r in futures::future::join_all(puts).await {
            r.expect("put");
        }
    }
    let opened = b.metrics().await.get("starling_connections_total") - before;
    c.close().await;
    opened
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_operations_fill_one_stream_before_the_next() {
    let b = start_default().await;
    // Balanced pool: 8 connections × 4 streams. Sixteen operations placed at once under the
    // default depth (64) share the first stream of the first connection...
    assert_eq!(cache_connections_for(&b, 64, 16).await, 1.0);
    // ...and with a depth of one they take sixteen streams: the first four connections'.
    assert_eq!(cache_connections_for(&b, 1, 16).await, 4.0);
    // Past the depth on every stream of the pool (32 streams at depth 1), operations still
    // complete, on the least loaded streams, and no connection beyond the pool opens.
    assert_eq!(cache_connections_for(&b, 1, 100).await, 8.0);
    b.running.shutdown().await;
}
