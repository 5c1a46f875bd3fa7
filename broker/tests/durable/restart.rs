//! An in-process broker restarted on the same storage directory: `persisted` messages and
//! their positions survive, and a resuming subscriber gets the rest from disk, then live,
//! without a gap or a duplicate.

use std::time::Duration;

use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync};

use crate::common::{payload, recv_n, start, wait_metrics};
use crate::{FROM_THE_START, assert_ordered_and_complete, drain};

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
    let got = drain(&mut sub, Duration::from_millis(700)).await;
    let idx: Vec<u32> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(idx, (20..80).collect::<Vec<_>>());
    assert_ordered_and_complete(&got, &[]);
    // Then live, with no gap and no duplicate.
    c.publish_acked(topic, payload(80)).await.expect("ack");
    let live = drain(&mut sub, Duration::from_millis(500)).await;
    assert_eq!(live.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![80]);
    let (l, r) = (live[0].1, got[got.len() - 1].1);
    assert!((l.stream, l.seq) > (r.stream, r.seq), "live after replay");

    // Everything, from the start of the log: positions continued across the restart.
    let mut all = c
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain(&mut all, Duration::from_millis(700)).await;
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..81).collect::<Vec<_>>()
    );
    assert_ordered_and_complete(&got, &[]);
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
