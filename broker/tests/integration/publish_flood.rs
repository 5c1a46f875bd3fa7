//! Publish amplification (issue 33, item 1) over real QUIC: an authenticated user floods the
//! broker with `PublishBatch` frames of empty payloads, which are tiny on the wire and large once
//! decoded. The publish budget must charge what they hold, so the broker's memory stays under a
//! stated ceiling; a batch past `max_publish_batch_items` is refused before it is decoded.

use std::path::PathBuf;
use std::time::Duration;

use bytes::Bytes;
use starling_access::token_hash_hex;
use starling_config::{AuthMode, ConfigOverrides, Profile, SlowSubscriberPolicy};
use starling_proto::{
    AckMode, ErrorCode, Frame, Hello, PROTOCOL_VERSION, PublishBatch, StartAt, Subscribe,
};
use starling_proto::{features, write_frame};
use tokio::io::AsyncWriteExt;

use crate::common::*;

const MIB: u64 = 1 << 20;
const TOKEN: &str = "flood-token-0123456789";

/// A users file with one token user allowed to publish on `flood.>`.
fn users_file(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("starling-flood-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("users.yaml");
    let doc = format!(
        "version: 1\nusers:\n  - name: flooder\n    authentication: {{type: token, sha256: \"{}\"}}\n    permissions:\n      publish: {{allow: [\"flood.>\"]}}\n      subscribe: {{allow: [\"flood.>\"]}}\n",
        token_hash_hex(TOKEN.as_bytes())
    );
    std::fs::write(&path, doc).unwrap();
    path
}

fn secured(users: PathBuf, more: ConfigOverrides) -> ConfigOverrides {
    let mut o = ConfigOverrides {
        auth_mode: Some(AuthMode::Required),
        auth_users_file: Some(Some(users)),
        ..ConfigOverrides::default()
    };
    o.merge(&more);
    o
}

/// A raw connection authenticated as the token user, with batch publishing granted.
async fn authenticated(b: &TestBroker, ep: &quinn::Endpoint) -> quinn::Connection {
    let conn = ep
        .connect(b.addr(), "localhost")
        .expect("connect")
        .await
        .expect("QUIC handshake");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: features::BATCH_PUBLISH | features::AUTH_TOKEN,
        client_name: "flood".into(),
        auth_token: Some(Bytes::from_static(TOKEN.as_bytes())),
    });
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(ok)) => assert_ne!(ok.features & features::BATCH_PUBLISH, 0),
        other => panic!("expected HelloOk, got {other:?}"),
    }
    conn
}

fn empty_batch(request_id: u64, ack: AckMode, items: usize) -> Bytes {
    Frame::PublishBatch(PublishBatch {
        request_id,
        ack,
        topic: "flood.empty".into(),
        payloads: vec![Bytes::new(); items],
        headers: Vec::new(),
    })
    .to_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_empty_batches_is_charged_what_it_holds() {
    // The ceiling for the whole flood: the publish budget, the QUIC windows of the
    // connections, one decoded frame per stream waiting for the budget, the client's own send
    // buffers (same process) and allocator slack; measured 33 MiB. Charged its payload bytes
    // (none), the same flood grew the process by 132 MiB in these 4 s and kept growing: every
    // decoded frame queued behind the stalled subscriber.
    const CEILING: u64 = 80 * MIB;
    const BUDGET: u64 = 8 * MIB;
    const ITEMS: usize = 16_384;
    const CONNS: usize = 2;
    const STREAMS: usize = 4;
    let b = start(
        Profile::Balanced,
        secured(
            users_file("rss"),
            ConfigOverrides {
                max_inflight_publish_bytes: Some(BUDGET),
                max_publish_batch_items: Some(ITEMS as u32),
                pub_queue_depth: Some(512),
                // The flooder's own subscriber never reads: its topic waits, and whatever the
                // flood has decoded stays in memory until the budget stops the reads.
                slow_subscriber_policy: Some(SlowSubscriberPolicy::Block),
                subscriber_queue_capacity: Some(2),
                event_conn_recv_window: Some(4 * MIB),
                event_stream_recv_window: Some(MIB),
                event_send_window: Some(4 * MIB),
                ..ConfigOverrides::default()
            },
        ),
    )
    .await;
    let rss_before = rss_bytes();
    // 64 KiB on the wire; decoded, 512 KiB of payload handles, and as much again in the topic's
    // open batch.
    let frame = empty_batch(1, AckMode::None, ITEMS);
    let ep = b.raw_endpoint(None);
    let stalled = authenticated(&b, &ep).await;
    let (mut sub_send, mut sub_recv) = stalled.open_bi().await.expect("stream");
    let subscribe = Frame::Subscribe(Subscribe {
        group: None,
        request_id: 1,
        topic: "flood.empty".into(),
        start: StartAt::Live,
    });
    write_frame(&mut sub_send, &subscribe)
        .await
        .expect("subscribe");
    assert!(matches!(
        read_one(&mut sub_recv).await,
        Some(Frame::SubscribeOk(_))
    ));
    let (mut conns, mut writers) = (Vec::new(), Vec::new());
    for _ in 0..CONNS {
        let conn = authenticated(&b, &ep).await;
        for _ in 0..STREAMS {
            let (mut send, recv) = conn.open_bi().await.expect("stream");
            let frame = frame.clone();
            writers.push(tokio::spawn(async move {
                // Never reads the answers; writes until the broker stops reading.
                while send.write_all(&frame).await.is_ok() {}
                drop(recv);
            }));
        }
        conns.push(conn);
    }
    let (mut peak_rss, mut peak_charged) = (0u64, 0f64);
    let until = tokio::time::Instant::now() + Duration::from_secs(4);
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak_rss = peak_rss.max(rss_bytes().saturating_sub(rss_before));
        let m = b.metrics().await;
        peak_charged = peak_charged.max(m.get("starling_publish_inflight_bytes"));
    }
    let m = b.metrics().await;
    let published = m.get("starling_published_messages_total");
    eprintln!(
        "empty-batch flood: {published} messages published, peak charged {} KiB of a {} MiB \
         budget, peak RSS growth {} MiB (ceiling {} MiB), budget waits {}",
        peak_charged as u64 >> 10,
        BUDGET >> 20,
        peak_rss >> 20,
        CEILING >> 20,
        m.get("starling_publish_budget_waits_total"),
    );
    // Each frame was charged its items, not the 1 byte its payloads add up to.
    assert!(
        peak_charged >= (ITEMS * 68) as f64,
        "peak charge {peak_charged} bytes: a frame of {ITEMS} empty payloads was not charged \
         its items"
    );
    assert!(peak_charged <= BUDGET as f64, "charged past the budget");
    assert!(
        m.get("starling_publish_budget_waits_total") > 0.0,
        "the flood never reached the budget"
    );
    assert!(
        peak_rss < CEILING,
        "RSS grew by {} MiB under a flood of empty batches (ceiling {} MiB)",
        peak_rss >> 20,
        CEILING >> 20
    );

    for w in &writers {
        w.abort();
    }
    for c in conns.iter().chain([&stalled]) {
        c.close(0u32.into(), b"done");
    }
    drop((sub_send, sub_recv));
    wait_metrics(&b, "the flood's charge released", |m| {
        m.get("starling_publish_inflight_bytes") == 0.0
    })
    .await;
    b.running.shutdown().await;
}

#[tokio::test]
async fn a_batch_past_the_item_cap_is_refused_and_counted() {
    let b = start(
        Profile::Balanced,
        secured(
            users_file("cap"),
            ConfigOverrides {
                max_publish_batch_items: Some(100),
                ..ConfigOverrides::default()
            },
        ),
    )
    .await;
    let ep = b.raw_endpoint(None);
    let conn = authenticated(&b, &ep).await;

    // At the cap: published and acked.
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(&empty_batch(1, AckMode::Ack, 100))
        .await
        .expect("write");
    match read_one(&mut recv).await {
        Some(Frame::PublishAck(a)) => assert_eq!((a.request_id, a.count), (1, 100)),
        other => panic!("expected PublishAck, got {other:?}"),
    }
    // One past it, on the same stream: refused before decoding, the stream closed.
    send.write_all(&empty_batch(2, AckMode::Ack, 101))
        .await
        .expect("write");
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => {
            assert_eq!(e.code, ErrorCode::LimitExceeded, "{}", e.message);
            assert!(e.message.contains("101 items"), "{}", e.message);
        }
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    // As the first frame of a new stream too.
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    send.write_all(&empty_batch(3, AckMode::Ack, 5000))
        .await
        .expect("write");
    let _ = send.flush().await;
    match read_one(&mut recv).await {
        Some(Frame::Error(e)) => assert_eq!(e.code, ErrorCode::LimitExceeded, "{}", e.message),
        other => panic!("expected LimitExceeded, got {other:?}"),
    }
    wait_metrics(&b, "both refusals counted", |m| {
        m.get("starling_limit_refusals_total{limit=max_publish_batch_items}") == 2.0
    })
    .await;
    b.running.shutdown().await;
}
