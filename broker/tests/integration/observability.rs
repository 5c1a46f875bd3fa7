//! The HTTP surface: Prometheus text that parses and moves, probes, and the SIGTERM drain.

use std::time::Duration;

use starling_config::{ConfigOverrides, Profile};

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_parse_as_prometheus_text_and_counters_move() {
    let b = start_default().await;
    let before = b.metrics().await;
    let (_, body) = b.http_get("/metrics").await;
    for name in [
        "starling_published_messages_total",
        "starling_delivered_events_total",
        "starling_delivery_latency_seconds",
        "starling_batch_events",
        "starling_open_connections",
        "starling_cache_hits_total",
        "process_cpu_seconds_total",
    ] {
        assert!(body.contains(&format!("# TYPE {name} ")), "missing {name}");
    }
    let c = b.client().await;
    let mut sub = c.subscribe("m").await.expect("subscribe");
    for i in 0..10 {
        c.publish_acked("m", payload(i)).await.expect("publish");
    }
    recv_n(&mut sub, 10).await;
    c.cache_put("k", "v", None).await.expect("put");
    let _ = c.cache_get("k").await.expect("get");
    let after = wait_metrics(&b, "deliveries counted", |m| {
        m.get("starling_delivered_events_total") >= 10.0
    })
    .await;
    assert_eq!(
        after.get("starling_published_messages_total")
            - before.get("starling_published_messages_total"),
        10.0
    );
    assert_eq!(after.get("starling_publish_acks_total"), 10.0);
    assert!(after.get("starling_open_connections") >= 1.0);
    // Read at scrape time: at least the accept loop, the HTTP server and this subscription.
    assert!(
        after.get("starling_runtime_alive_tasks") >= 3.0,
        "alive tasks {}",
        after.get("starling_runtime_alive_tasks")
    );
    assert!(after.get("starling_delivery_latency_seconds_count") >= 1.0);
    assert_eq!(after.get("starling_cache_ops_total{op=put,result=ok}"), 1.0);
    assert_eq!(after.get("starling_cache_hits_total"), 1.0);
    assert_eq!(b.http_get("/nope").await.0, 404);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_flushes_queued_deliveries_and_turns_readiness_off() {
    // A long batch delay leaves events sitting in the topic when the drain starts.
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            event_batch_max_events: Some(1000),
            event_batch_max_delay_us: Some(1_000_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let http = b.running.http_addr;
    // A short request timeout: the subscription gives up three of them after its broker left.
    let mut cfg = b.client_config();
    cfg.request_timeout = Duration::from_millis(500);
    let c = starling_client::Client::connect(cfg)
        .await
        .expect("client connects");
    let mut sub = c.subscribe("d").await.expect("subscribe");
    for i in 0..5 {
        c.publish_acked("d", payload(i)).await.expect("publish");
    }
    let health = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(5)).await;
        http_get(http, "/readyz").await
    });
    b.running.shutdown().await;
    let got = recv_n(&mut sub, 5).await;
    assert_eq!(got.len(), 5, "queued events were delivered before close");
    let (status, body) = health.await.expect("probe");
    // The probe ran during the drain (503 "draining") or as the listener stopped (status 0: the
    // connection was refused, or reset from the closing listener's accept queue). It must never
    // say ready.
    assert_ne!(status, 200, "readiness during drain: {body}");
    // After the drain the stream is closed. The SDK subscription tries to resubscribe; with no
    // broker to take it, it ends with an error once three request timeouts have passed.
    let end = tokio::time::timeout(SOON, sub.next_event())
        .await
        .expect("the subscription gives up");
    assert!(end.as_ref().is_none_or(|r| r.is_err()), "{end:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_does_not_wait_for_a_subscriber_that_vanished() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            drain_timeout_ms: Some(10_000),
            ..ConfigOverrides::default()
        },
    )
    .await;
    // A subscriber on a runtime of its own, which then stops without closing anything: to the
    // broker the client vanished (as a crashed or killed process does).
    let cfg = b.client_config();
    let vanished = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let kept = rt.block_on(async {
            let c = starling_client::Client::connect(cfg)
                .await
                .expect("client connects");
            let s = c.subscribe("gone").await.expect("subscribe");
            (c, s)
        });
        std::mem::forget(kept);
        rt.shutdown_background();
    });
    vanished.join().expect("the vanishing subscriber's thread");
    wait_metrics(&b, "the subscription is registered", |m| {
        m.get("starling_subscriptions") == 1.0
    })
    .await;
    let c = b.client().await;
    for i in 0..3 {
        c.publish_acked("gone", payload(i)).await.expect("publish");
    }
    c.close().await;
    let started = std::time::Instant::now();
    b.running.shutdown().await;
    let took = started.elapsed();
    // The subscriber never acknowledges the end of its stream; the drain notices the silence
    // (2 s) instead of waiting out `drain_timeout_ms` (10 s), as it did before.
    assert!(
        took < Duration::from_secs(6),
        "the drain waited {took:?} for a subscriber that is gone"
    );
}
