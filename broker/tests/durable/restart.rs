//! An in-process broker restarted on the same storage directory: `persisted` messages and
//! their positions survive, a resuming subscriber gets the rest from disk, then live,
//! without a gap or a duplicate, and after a restart the topic numbers in a new stream, so
//! no position a crash took back is given out again.

use std::time::Duration;

use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};

use crate::common::{payload, recv_n, start, wait_metrics};
use crate::{FROM_THE_START, assert_ordered_and_complete, drain_some};

fn durable(dir: &std::path::Path, fsync: StorageFsync) -> ConfigOverrides {
    ConfigOverrides {
        durable_topics: Some(vec!["orders.*".into()]),
        storage_dir: Some(Some(dir.to_path_buf())),
        storage_fsync: Some(fsync),
        storage_fsync_interval_ms: Some(5),
        ack_level: Some(AckLevel::Persisted),
        // Nothing retained in memory: every resume below is served from disk.
        replay_window_ms: Some(0),
        ..ConfigOverrides::default()
    }
}

async fn restart_keeps_everything(fsync: StorageFsync) {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "orders.eu";

    let b = start(Profile::Balanced, durable(dir.path(), fsync)).await;
    let c = b.client().await;
    let mut sub = c.subscribe(topic).await.expect("subscribe");
    for i in 0..50 {
        c.publish_acked(topic, payload(i))
            .await
            .expect("persisted ack");
    }
    let first = recv_n(&mut sub, 20).await;
    assert_eq!(first.len(), 20);
    let resume = sub.resume_point().expect("a resume point after 20 events");
    drop(sub);
    let m = b.metrics().await;
    assert!(m.sum("starling_storage_appended_records_total") >= 1.0);
    assert!(m.sum("starling_storage_appended_bytes_total") > 0.0);
    if fsync == StorageFsync::Always {
        assert!(m.sum("starling_storage_fsync_seconds_count") >= 1.0);
    }
    drop(c);
    b.running.shutdown().await;

    let b = start(Profile::Balanced, durable(dir.path(), fsync)).await;
    let c = b.client().await;
    for i in 50..80 {
        c.publish_acked(topic, payload(i))
            .await
            .expect("persisted ack");
    }
    // Resume where the first subscriber stopped: 20..80, from disk, in order, once each.
    let mut sub = c.subscribe_from(topic, Some(resume)).await.expect("resume");
    let got = drain_some(&mut sub, Duration::from_millis(700)).await;
    let idx: Vec<u32> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, (20..80).collect::<Vec<_>>());
    assert_ordered_and_complete(&got, &[]);
    // Then live, with no gap and no duplicate.
    c.publish_acked(topic, payload(80)).await.expect("ack");
    let live = drain_some(&mut sub, Duration::from_millis(500)).await;
    assert_eq!(live.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![80]);
    let (l, r) = (live[0].1, got[got.len() - 1].1);
    assert!((l.stream, l.seq) > (r.stream, r.seq), "live after replay");

    // Everything, from the start of the log: positions continued across the restart.
    let mut all = c
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain_some(&mut all, Duration::from_millis(700)).await;
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..81).collect::<Vec<_>>()
    );
    assert_ordered_and_complete(&got, &[]);
    // The restarted topic numbers in a new stream above the log's.
    assert!(
        got[50].1.stream > got[49].1.stream,
        "{:?} then {:?}",
        got[49].1,
        got[50].1
    );
    wait_metrics(&b, "replay from disk counted", |m| {
        m.sum("starling_storage_replayed_records_total") >= 1.0
            && m.sum("starling_storage_segments") >= 1.0
            && m.sum("starling_storage_retained_bytes") > 0.0
    })
    .await;
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persisted_messages_survive_a_restart_fsync_always() {
    restart_keeps_everything(StorageFsync::Always).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn persisted_messages_survive_a_restart_fsync_interval() {
    restart_keeps_everything(StorageFsync::Interval).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_topic_not_named_durable_writes_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(Profile::Balanced, durable(dir.path(), StorageFsync::Always)).await;
    let c = b.client().await;
    // `persisted` on a topic that is not durable means `committed`: acked, nothing on disk.
    c.publish_acked("other", payload(1)).await.expect("ack");
    let m = b.metrics().await;
    assert_eq!(m.sum("starling_storage_appended_records_total"), 0.0);
    assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 0);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_storage_dir_refuses_persisted_publishes_with_a_typed_error() {
    let dir = tempfile::tempdir().expect("tmp");
    // A file where the storage directory should be: the topic's log cannot be created.
    let not_a_dir = dir.path().join("file");
    std::fs::write(&not_a_dir, b"x").expect("file");
    let b = start(Profile::Balanced, durable(&not_a_dir, StorageFsync::Always)).await;
    let c = b.client().await;
    let err = c
        .publish_acked("orders.eu", payload(1))
        .await
        .expect_err("refused");
    match err {
        starling_client::ClientError::Server { code, message, .. } => {
            assert_eq!(code, starling_proto::ErrorCode::Internal, "{message}");
            assert!(message.contains("durable log"), "{message}");
        }
        other => panic!("unexpected error {other:?}"),
    }
    wait_metrics(&b, "storage error counted", |m| {
        m.sum("starling_storage_errors_total") >= 1.0
    })
    .await;
    // The broker and other topics keep working.
    c.publish_acked("other", payload(2)).await.expect("ack");
    b.running.shutdown().await;
}

/// A crash cut the last record (as a power cut cuts what was not fsynced): a subscriber
/// that saw it before the crash resumes past it, and must still get what is published after
/// the restart. Reusing the cut record's position would make it skip the new message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_torn_tail_is_truncated_and_its_positions_are_never_reused() {
    let dir = tempfile::tempdir().expect("tmp");
    let topic = "orders.torn";
    let b = start(Profile::Balanced, durable(dir.path(), StorageFsync::Always)).await;
    let c = b.client().await;
    let mut sub = c.subscribe(topic).await.expect("subscribe");
    for i in 0..10 {
        c.publish_acked(topic, payload(i)).await.expect("ack");
    }
    assert_eq!(recv_n(&mut sub, 10).await.len(), 10);
    // Past the last message, which the crash below takes back.
    let seen = sub.resume_point().expect("a resume point");
    drop(sub);
    drop(c);
    b.running.shutdown().await;
    // Cut the last record short, as a crash in the middle of a write would.
    let log_dir = dir.path().join(topic);
    let seg = std::fs::read_dir(&log_dir)
        .expect("log dir")
        .map(|e| e.expect("entry").path())
        .find(|p| p.extension().is_some_and(|e| e == "log"))
        .expect("a segment");
    let len = std::fs::metadata(&seg).expect("meta").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .expect("open");
    f.set_len(len - 3).expect("truncate");
    drop(f);

    let b = start(Profile::Balanced, durable(dir.path(), StorageFsync::Always)).await;
    let c = b.client().await;
    c.publish_acked(topic, payload(100)).await.expect("ack");
    // The subscriber that saw the cut record resumes and gets the new message: its
    // position is past everything numbered before the crash.
    let mut resumed = c.subscribe_from(topic, Some(seen)).await.expect("resume");
    let got = drain_some(&mut resumed, Duration::from_millis(700)).await;
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![100],
        "{got:?}"
    );
    assert!(
        got[0].1.stream > seen.stream,
        "{:?} after {seen:?}",
        got[0].1
    );
    // From the start: every message before the torn record, then the new one, in order.
    let mut sub = c
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain_some(&mut sub, Duration::from_millis(700)).await;
    let idx: Vec<u32> = got.iter().map(|(i, _)| *i).collect();
    assert!(idx.len() >= 10 && idx.len() <= 11, "{idx:?}");
    assert_eq!(idx[..9], (0..9).collect::<Vec<_>>()[..], "{idx:?}");
    assert_eq!(idx.last(), Some(&100));
    assert_ordered_and_complete(&got, &[]);
    wait_metrics(&b, "truncation counted", |m| {
        m.sum("starling_storage_recovery_truncations_total") == 1.0
    })
    .await;
    b.running.shutdown().await;
}
