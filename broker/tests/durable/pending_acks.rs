//! `persisted` acks waiting for an `interval` fsync, over real QUIC on loopback: they wait
//! outside their publish stream's request window (`pub_queue_depth`), charged to the
//! pending-ack budget instead (`max_pending_persisted_ack_bytes`, with its per-connection
//! share), and are sent only after the fsync covering them; at the budget the stream waits
//! (counted), and nothing is lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::future::BoxFuture;
use starling_client::ClientError;
use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};

use crate::common::{SOON, TestBroker, payload, start, wait_metrics};
use crate::drain_some;

/// What one waiting ack is charged (`starling_broker::pubsub::ack::PENDING_ACK_BYTES`).
const ACK_BYTES: f64 = 408.0;
const DEPTH: u32 = 16;

fn interval(dir: &std::path::Path, every_ms: u64) -> ConfigOverrides {
    ConfigOverrides {
        durable_topics: Some(vec!["acks.*".into()]),
        storage_dir: Some(Some(dir.to_path_buf())),
        storage_fsync: Some(StorageFsync::Interval),
        storage_fsync_interval_ms: Some(every_ms),
        ack_level: Some(AckLevel::Persisted),
        pub_queue_depth: Some(DEPTH),
        ..ConfigOverrides::default()
    }
}

/// Publishes `n` acked messages to `topic` on one stream (in call order), and counts the acks
/// as they arrive; returns the counter and the task awaiting them in order.
async fn publish_pipelined(
    b: &TestBroker,
    topic: &str,
    n: u32,
) -> (
    Arc<AtomicUsize>,
    tokio::task::JoinHandle<Result<(), ClientError>>,
) {
    let acked = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) =
        tokio::sync::mpsc::unbounded_channel::<BoxFuture<'static, Result<(), ClientError>>>();
    let counted = Arc::clone(&acked);
    let collector = tokio::spawn(async move {
        for _ in 0..n {
            let Some(ack) = rx.recv().await else {
                break; // the publisher failed (and panicked)
            };
            ack.await?;
            counted.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    });
    let c = b.client().await;
    let topic = topic.to_string();
    tokio::spawn(async move {
        for i in 0..n {
            match c.publish_batch_pipelined(&topic, vec![payload(i)]).await {
                Ok(ack) => {
                    let _ = tx.send(Box::pin(ack));
                }
                Err(e) => panic!("publish {i}: {e}"),
            }
        }
        // Keeps the client (and its stream) until the collector has every ack.
        tx.closed().await;
    });
    (acked, collector)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_stream_keeps_more_than_its_window_waiting_for_the_fsync() {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "acks.window";
    // One fsync every 3 s: everything below is published and appended well before the first.
    let b = start(Profile::Balanced, interval(dir.path(), 3_000)).await;
    let c = b.client().await;
    let mut sub = c.subscribe(topic).await.expect("subscribe");
    let n = 10 * DEPTH;
    let (acked, collector) = publish_pipelined(&b, topic, n).await;
    // All n are in the broker, each charged as a waiting ack, although the stream's window
    // holds DEPTH: before the pending-ack budget, the stream stopped reading at DEPTH.
    let held = wait_metrics(&b, "every publish waiting for the fsync", |m| {
        m.get("starling_persisted_acks_pending_bytes") == f64::from(n) * ACK_BYTES
    })
    .await;
    assert_eq!(
        held.sum("starling_storage_fsync_seconds_count"),
        0.0,
        "no fsync yet"
    );
    assert_eq!(acked.load(Ordering::SeqCst), 0, "no ack before the fsync");
    // Delivered to subscribers meanwhile (the batches are written to the log, and offered).
    let got = drain_some(&mut sub, Duration::from_millis(300)).await;
    assert_eq!(got.len(), n as usize);
    let m = b.metrics().await;
    assert_eq!(m.sum("starling_storage_fsync_seconds_count"), 0.0);
    assert_eq!(acked.load(Ordering::SeqCst), 0, "no ack before the fsync");

    // The fsync comes, and with it every ack.
    tokio::time::timeout(SOON, collector)
        .await
        .expect("acked within the interval")
        .expect("collector")
        .expect("every ack");
    assert_eq!(acked.load(Ordering::SeqCst), n as usize);
    let m = b.metrics().await;
    assert!(m.sum("starling_storage_fsync_seconds_count") >= 1.0);
    assert_eq!(
        m.get("starling_persisted_acks_pending_bytes"),
        0.0,
        "released once written"
    );
    assert_eq!(m.sum("starling_persisted_ack_budget_waits_total"), 0.0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_at_its_share_of_the_budget_waits_and_loses_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "acks.budget";
    let mut o = interval(dir.path(), 100);
    // 20 acks in all, 10 per connection (408 bytes each).
    o.max_pending_persisted_ack_bytes = Some(8192);
    o.max_pending_persisted_ack_bytes_per_connection = Some(4096);
    let b = start(Profile::Balanced, o).await;
    let c = b.client().await;
    let mut sub = c.subscribe(topic).await.expect("subscribe");
    let n = 200;
    let (acked, collector) = publish_pipelined(&b, topic, n).await;
    let mut most = 0.0f64;
    while !collector.is_finished() {
        let m = b.metrics().await;
        most = most.max(m.get("starling_persisted_acks_pending_bytes"));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    collector
        .await
        .expect("collector")
        .expect("every publish acked");
    assert_eq!(acked.load(Ordering::SeqCst), n as usize);
    assert!(most <= 4096.0, "held {most} bytes, past the share");
    let m = b.metrics().await;
    assert!(
        m.get("starling_persisted_ack_budget_waits_total{scope=connection}") >= 1.0,
        "the stream waited at its share"
    );
    assert_eq!(m.get("starling_persisted_acks_pending_bytes"), 0.0);
    // Nothing lost: every message delivered once, in order.
    let got = drain_some(&mut sub, Duration::from_millis(300)).await;
    let idx: Vec<u32> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, (0..n).collect::<Vec<_>>());
    b.running.shutdown().await;
}
