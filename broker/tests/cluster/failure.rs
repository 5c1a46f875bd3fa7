//! A member that dies: requests for its topics and keys fail fast with a typed `Unavailable`,
//! everything else keeps working, and the metrics show the peer down.

use std::time::{Duration, Instant};

use starling_client::ClientError;
use starling_placement::Kind;
use starling_proto::ErrorCode;

use crate::harness::{TestCluster, index, key_owned_by, payload};

fn is_unavailable(r: &Result<impl std::fmt::Debug, ClientError>) -> bool {
    matches!(
        r,
        Err(ClientError::Server {
            code: ErrorCode::Unavailable,
            ..
        })
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_members_keys_fail_fast_and_the_rest_keeps_working() {
    let ids = ["a", "b", "c"];
    let mut c = TestCluster::start("dead", &ids).await;
    let key_c = key_owned_by("key", Kind::CacheKey, &ids, "c");
    let key_b = key_owned_by("key", Kind::CacheKey, &ids, "b");
    let topic_c = key_owned_by("topic", Kind::Topic, &ids, "c");
    let topic_b = key_owned_by("topic", Kind::Topic, &ids, "b");

    let client = c.plain_client("a").await;
    client
        .cache_put(key_b.clone(), payload(1), None)
        .await
        .expect("put b");
    client
        .cache_put(key_c.clone(), payload(2), None)
        .await
        .expect("put c");
    client
        .publish_acked(&topic_c, payload(0))
        .await
        .expect("publish c");

    c.kill("c").await;

    // First request: the link breaks or the connect attempt times out (300 ms), no hang.
    let started = Instant::now();
    let r = client.cache_get(key_c.clone()).await;
    assert!(is_unavailable(&r), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // While c stays down, requests fail at once.
    let started = Instant::now();
    let r = client.publish_acked(&topic_c, payload(1)).await;
    assert!(is_unavailable(&r), "{r:?}");
    let r = client.cache_put(key_c.clone(), payload(3), None).await;
    assert!(is_unavailable(&r), "{r:?}");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );

    // Everything else works.
    let v = client.cache_get(key_b.clone()).await.expect("get b");
    assert_eq!(v.as_deref().map(index), Some(1));
    client
        .publish_acked(&topic_b, payload(9))
        .await
        .expect("publish b");

    assert_eq!(
        c.metric("a", "starling_cluster_peer_up", "peer=\"c\"")
            .await,
        0.0
    );
    assert_eq!(
        c.metric("a", "starling_cluster_peer_up", "peer=\"b\"")
            .await,
        1.0
    );
    assert!(
        c.metric("a", "starling_cluster_forward_failures_total", "")
            .await
            >= 3.0
    );

    // A routing client reaches the same verdict (through its bootstrap broker).
    let mut cfg = c.config("a");
    cfg.connect_timeout = Duration::from_millis(500);
    let routing = starling_client::Client::connect(cfg)
        .await
        .expect("connect");
    let r = routing.cache_get(key_c.clone()).await;
    assert!(is_unavailable(&r), "{r:?}");
    let v = routing.cache_get(key_b).await.expect("get b");
    assert_eq!(v.as_deref().map(index), Some(1));
    routing.close().await;
    client.close().await;
    c.shutdown().await;
}
