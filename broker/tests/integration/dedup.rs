//! Publish de-duplication over real QUIC (the `DEDUP` feature, the `Starling-Msg-Id` header),
//! with the real broker and SDK: a publish retried with the same message id is delivered once
//! and both calls are acked (at `committed`, so each ack says the message was offered to the
//! subscribers); after the window the id is new again; an empty or too long id is refused;
//! a durable topic takes ids (its log keeps them: `tests/durable/headers.rs`); the repeats are
//! counted in `starling_publish_duplicates_total`.

use std::time::Duration;

use starling_client::{ClientError, Event, Message, Subscription};
use starling_config::{AckLevel, ConfigOverrides, Profile};
use starling_proto::ErrorCode;

use crate::common::*;

async fn next(sub: &mut Subscription) -> Event {
    match tokio::time::timeout(SOON, sub.next_event()).await {
        Ok(Some(Ok(ev))) => ev,
        other => panic!("expected an event, got {other:?}"),
    }
}

/// Nothing more arrives within a moment.
async fn nothing_more(sub: &mut Subscription) {
    if let Ok(got) = tokio::time::timeout(Duration::from_millis(300), sub.next_event()).await {
        panic!("expected nothing more, got {got:?}");
    }
}

fn server_code(r: Result<(), ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

fn dedup_broker(window_ms: u64) -> ConfigOverrides {
    ConfigOverrides {
        ack_level: Some(AckLevel::Committed),
        dedup_window_ms: Some(window_ms),
        max_msg_id_bytes: Some(16),
        ..base_overrides()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_publish_is_delivered_once_and_both_are_acked() {
    let b = start(Profile::Balanced, dedup_broker(60_000)).await;
    let c = b.client().await;
    assert!(c.server_info().has_feature(starling_proto::features::DEDUP));
    let mut sub = c.subscribe("dd.orders").await.expect("subscribe");
    let order = || Message::new("order 42").with_msg_id("order-42");
    c.publish_message("dd.orders", order(), true)
        .await
        .expect("the original is acked");
    // The retry after a lost ack: the same id, acked too.
    c.publish_message("dd.orders", order(), true)
        .await
        .expect("the repeat is acked");
    // Fire-and-forget repeats are dropped as well; another id is delivered.
    c.publish_message("dd.orders", order(), false)
        .await
        .expect("sent");
    c.publish_message(
        "dd.orders",
        Message::new("order 43").with_msg_id("order-43"),
        true,
    )
    .await
    .expect("another id");
    let first = next(&mut sub).await;
    assert_eq!(&first.payload[..], b"order 42");
    assert!(
        first
            .headers
            .iter()
            .any(|h| h.name == starling_proto::MSG_ID && h.value == "order-42"),
        "subscribers see the id: {:?}",
        first.headers
    );
    let second = next(&mut sub).await;
    assert_eq!(&second.payload[..], b"order 43");
    nothing_more(&mut sub).await;
    let m = b.metrics().await;
    assert_eq!(m.get("starling_publish_duplicates_total"), 2.0);
    assert!(m.get("starling_dedup_window_bytes") > 0.0);
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_window_a_repeat_is_accepted_again() {
    let b = start(Profile::Balanced, dedup_broker(300)).await;
    let c = b.client().await;
    let mut sub = c.subscribe("dd.window").await.expect("subscribe");
    let msg = || Message::new("again").with_msg_id("id-1");
    c.publish_message("dd.window", msg(), true)
        .await
        .expect("ack");
    c.publish_message("dd.window", msg(), true)
        .await
        .expect("ack of the repeat");
    tokio::time::sleep(Duration::from_millis(400)).await;
    c.publish_message("dd.window", msg(), true)
        .await
        .expect("ack after the window");
    assert_eq!(&next(&mut sub).await.payload[..], b"again");
    assert_eq!(&next(&mut sub).await.payload[..], b"again");
    nothing_more(&mut sub).await;
    let m = b.metrics().await;
    assert_eq!(m.get("starling_publish_duplicates_total"), 1.0);
    c.close().await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_ids_are_refused_and_a_durable_topic_takes_ids() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            durable_topics: Some(vec!["dd.durable".into()]),
            storage_dir: Some(Some(dir.path().to_path_buf())),
            ..dedup_broker(60_000)
        },
    )
    .await;
    let c = b.client().await;
    let long = Message::new("x").with_msg_id("x".repeat(17));
    let (code, why) = server_code(c.publish_message("dd.bad", long, true).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("max_msg_id_bytes"), "{why}");
    let empty = Message::new("x").with_msg_id("");
    let (code, why) = server_code(c.publish_message("dd.bad", empty, true).await);
    assert_eq!(code, ErrorCode::InvalidRequest, "{why}");
    // A durable topic keeps ids in its log (tests/durable/headers.rs: across a restart too).
    let durable = Message::new("x").with_msg_id("d-1");
    for _ in 0..2 {
        c.publish_message("dd.durable", durable.clone(), true)
            .await
            .expect("a durable topic takes message ids");
    }
    let m = b.metrics().await;
    assert_eq!(m.sum("starling_publish_duplicates_total"), 1.0);
    assert_eq!(
        m.get("starling_limit_refusals_total{limit=max_msg_id_bytes}"),
        1.0
    );
    c.close().await;
    b.running.shutdown().await;
}
