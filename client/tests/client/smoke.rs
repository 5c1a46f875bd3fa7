//! End-to-end smoke test of the SDK against an in-process broker: handshake,
//! trust modes, acked / fire-and-forget / batch publishing, subscriptions,
//! cache operations and close.

use std::time::Duration;

use bytes::Bytes;
use starling_client::{Client, ClientConfig, ClientError, Subscription, Trust};
use starling_testkit::broker::{SOON, pinned_config, start_broker};

async fn next_payloads(sub: &mut Subscription, n: usize) -> Vec<(u64, Bytes)> {
    let mut out = Vec::new();
    while out.len() < n {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(e))) => out.push((e.seq, e.payload)),
            other => panic!("after {} events: {other:?}", out.len()),
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_sub_round_trip_in_order() {
    let broker = start_broker().await;
    let client = Client::connect(pinned_config(&broker))
        .await
        .expect("connect");
    assert_eq!(
        client.server_info().version,
        starling_proto::PROTOCOL_VERSION
    );
    assert!(client.server_info().max_frame_bytes > 0);

    let mut sub = client.subscribe("smoke.orders").await.expect("subscribe");
    let mut other = client
        .subscribe("smoke.orders")
        .await
        .expect("second subscribe");
    assert_ne!(sub.id(), other.id());

    for i in 0..20u32 {
        let payload = Bytes::from(format!("m{i}"));
        if i % 2 == 0 {
            client
                .publish_acked("smoke.orders", payload)
                .await
                .expect("acked publish");
        } else {
            client
                .publish("smoke.orders", payload)
                .await
                .expect("publish");
        }
    }
    let batch: Vec<Bytes> = (20..25).map(|i| Bytes::from(format!("m{i}"))).collect();
    client
        .publish_batch("smoke.orders", batch, true)
        .await
        .expect("batch");

    for s in [&mut sub, &mut other] {
        let got = next_payloads(s, 25).await;
        let first = got[0].0;
        for (i, (seq, payload)) in got.iter().enumerate() {
            assert_eq!(*seq, first + i as u64, "consecutive sequence numbers");
            assert_eq!(payload, &Bytes::from(format!("m{i}")), "publish order kept");
        }
        assert_eq!(s.dropped_events(), 0);
    }
    other.unsubscribe().await;
    client.close().await;
    assert!(matches!(
        client.publish("smoke.orders", "late").await,
        Err(ClientError::Closed)
    ));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_put_get_delete_and_ttl() {
    let broker = start_broker().await;
    let client = Client::connect(pinned_config(&broker))
        .await
        .expect("connect");

    assert_eq!(client.cache_get("k").await.expect("get"), None);
    client.cache_put("k", "v1", None).await.expect("put");
    assert_eq!(
        client.cache_get("k").await.expect("get"),
        Some(Bytes::from_static(b"v1"))
    );
    assert!(client.cache_delete("k").await.expect("delete"));
    assert!(!client.cache_delete("k").await.expect("delete again"));

    client
        .cache_put("short", "lived", Some(Duration::from_millis(50)))
        .await
        .expect("put with ttl");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(client.cache_get("short").await.expect("get expired"), None);

    // Many concurrent ops spread over the cache streams.
    let ops = (0..64).map(|i| {
        let c = client.clone();
        async move {
            let key = format!("key-{i}");
            c.cache_put(key.clone(), format!("val-{i}"), None).await?;
            c.cache_get(key).await
        }
    });
    for (i, r) in futures::future::join_all(ops).await.into_iter().enumerate() {
        assert_eq!(
            r.expect("concurrent op"),
            Some(Bytes::from(format!("val-{i}")))
        );
    }
    assert!(matches!(
        client.cache_get("").await,
        Err(ClientError::InvalidKey(_))
    ));
    client.close().await;
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_modes_and_bad_input() {
    let broker = start_broker().await;
    let insecure = ClientConfig::new(broker.quic_addr.to_string(), Trust::Insecure);
    let client = Client::connect(insecure).await.expect("insecure connects");
    assert!(matches!(
        client.publish("a b", "x").await,
        Err(ClientError::InvalidTopic(_))
    ));
    let max = client.server_info().max_frame_bytes as usize;
    let huge = Bytes::from(vec![0u8; max + 1]);
    assert!(matches!(
        client.publish_acked("big", huge).await,
        Err(ClientError::FrameTooLarge { .. })
    ));
    client
        .publish_batch("big", Vec::new(), true)
        .await
        .expect("empty batch is a no-op");
    client
        .publish_acked("big", "still fine")
        .await
        .expect("stream still usable");
    client.close().await;

    let wrong = ClientConfig::new(broker.quic_addr.to_string(), Trust::Fingerprint([0; 32]));
    match Client::connect(wrong).await {
        Err(ClientError::Tls(_)) => {}
        other => panic!("expected a TLS error, got {other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_slots_reconnect_after_the_broker_restarts() {
    let first = start_broker().await;
    let addr = first.quic_addr;
    // The restarted broker has a new self-signed certificate, so pinning cannot be used.
    let client = Client::connect(ClientConfig::new(addr.to_string(), Trust::Insecure))
        .await
        .expect("connect");
    client
        .publish_acked("re.topic", "before")
        .await
        .expect("publish");
    client
        .cache_put("re.key", "v", None)
        .await
        .expect("cache put");
    first.shutdown().await;

    let overrides = starling_config::ConfigOverrides {
        auth_mode: Some(starling_config::AuthMode::None),
        quic_listen: Some(addr),
        http_listen: Some("127.0.0.1:0".parse().expect("addr")),
        ..Default::default()
    };
    let cfg = starling_config::compose(starling_config::Profile::Balanced, None, &overrides);
    // The old endpoint may hold the UDP port for a moment while it drains.
    let deadline = tokio::time::Instant::now() + SOON;
    let second = loop {
        match starling_broker::Broker::new(cfg.clone())
            .expect("config")
            .start()
            .await
        {
            Ok(b) => break b,
            Err(e) if tokio::time::Instant::now() < deadline => {
                let _ = e;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("restart on the same port: {e}"),
        }
    };

    // Calls on dead slots fail at most once each, then reconnect.
    let mut published = false;
    let mut cached = false;
    for _ in 0..5 {
        published = published || client.publish_acked("re.topic", "after").await.is_ok();
        cached = cached || client.cache_get("re.key").await.is_ok();
        if published && cached {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(published && cached, "publish {published}, cache {cached}");
    client.close().await;
    second.shutdown().await;
}
