//! The committed log as openraft's state machine, directly: applied entries are read back,
//! the applied position and membership survive a power cut up to what was fsynced, a
//! snapshot installs into a fresh replica, a batch of an unknown format version is
//! refused, not applied, and a retention lowered while the log is open trims it at the next
//! apply without losing the applied entry, the membership or a whole snapshot.

use std::collections::BTreeSet;
use std::path::Path;

use openraft::storage::{RaftSnapshotBuilder, RaftStateMachine};
use openraft::{CommittedLeaderId, EntryPayload, LogId, Membership};
use starling_replica::state_machine::StateMachine;
use starling_replica::{Batch, ReplicaConfig, TypeConfig};
use starling_storage::fault::FaultFs;

type Entry = openraft::Entry<TypeConfig>;

fn id(index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(1, 1), index)
}

fn entry(index: u64, payload: EntryPayload<TypeConfig>) -> Entry {
    Entry {
        log_id: id(index),
        payload,
    }
}

fn open(fs: &FaultFs) -> StateMachine<FaultFs> {
    let c = ReplicaConfig::default();
    StateMachine::open(
        fs.clone(),
        Path::new("/sm"),
        c.committed_log_config(),
        1 << 20,
    )
    .unwrap()
}

fn membership() -> Membership<u64, openraft::BasicNode> {
    Membership::new(vec![BTreeSet::from([1, 2, 3])], None)
}

#[tokio::test]
async fn applied_entries_snapshots_and_unknown_versions() {
    let fs = FaultFs::new();
    let mut sm = open(&fs);
    let entries = vec![
        entry(0, EntryPayload::Membership(membership())),
        entry(1, EntryPayload::Blank),
        entry(2, EntryPayload::Normal(Batch::new(vec![b"a".to_vec()]))),
        entry(
            3,
            EntryPayload::Normal(Batch::new(vec![b"b".to_vec(), b"c".to_vec()])),
        ),
    ];
    let applied = sm.apply(entries).await.unwrap();
    assert_eq!(
        applied.iter().map(|a| a.index).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let read = sm.read(0, 10).unwrap();
    assert_eq!(read.iter().map(|r| r.index).collect::<Vec<_>>(), [2, 3]);
    assert_eq!(read[1].messages, vec![b"b".to_vec(), b"c".to_vec()]);

    // The membership entry was fsynced when applied; entries 1..=3 were not.
    drop(sm);
    fs.crash(None);
    let mut sm = open(&fs);
    let (applied, m) = sm.applied_state().await.unwrap();
    assert_eq!(applied, Some(id(0)));
    assert_eq!(m.log_id(), &Some(id(0)));
    // The library applies the rest again from its log.
    sm.apply(vec![
        entry(1, EntryPayload::Blank),
        entry(2, EntryPayload::Normal(Batch::new(vec![b"a".to_vec()]))),
    ])
    .await
    .unwrap();

    // A snapshot (which fsyncs first) installs into an empty replica.
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(id(2)));
    let other = FaultFs::new();
    let mut fresh = open(&other);
    fresh
        .install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
    drop(fresh);
    other.crash(None);
    let mut fresh = open(&other);
    assert_eq!(fresh.applied_state().await.unwrap().0, Some(id(2)));
    assert_eq!(fresh.read(0, 10).unwrap()[0].messages, vec![b"a".to_vec()]);

    // A batch of a version this build does not know is not applied.
    let newer = Batch {
        version: starling_replica::BATCH_VERSION + 1,
        messages: vec![bytes::Bytes::from_static(b"?")],
        headers: bytes::Bytes::new(),
    };
    assert!(
        fresh
            .apply(vec![entry(3, EntryPayload::Normal(newer))])
            .await
            .is_err()
    );
    assert_eq!(fresh.applied(), Some(id(2)));
}

/// A retention that a test changes while the committed log is open (the broker's is the
/// topics document in force).
#[derive(Debug, Default)]
struct Retention(parking_lot::Mutex<starling_storage::RetentionPolicy>);

impl starling_storage::RetentionSource for Retention {
    fn retention_now(&self) -> starling_storage::RetentionPolicy {
        *self.0.lock()
    }
}

fn batch(index: u64) -> Entry {
    entry(
        index,
        EntryPayload::Normal(Batch::new(vec![index.to_be_bytes().to_vec()])),
    )
}

#[tokio::test]
async fn a_retention_lowered_while_open_trims_at_the_next_apply_and_keeps_snapshots_whole() {
    let fs = FaultFs::new();
    let config = starling_replica::ReplicaConfig {
        segment_bytes: 512,
        ..ReplicaConfig::default()
    };
    let open_small = |fs: &FaultFs| {
        StateMachine::open(
            fs.clone(),
            Path::new("/sm"),
            config.committed_log_config(),
            1 << 20,
        )
        .unwrap()
    };
    let mut sm = open_small(&fs);
    let retention = std::sync::Arc::new(Retention::default());
    sm.follow_retention(retention.clone());
    let mut entries = vec![entry(0, EntryPayload::Membership(membership()))];
    entries.extend((1..100).map(batch));
    sm.apply(entries).await.unwrap();
    assert_eq!(sm.read(0, 1000).unwrap().len(), 99, "no limit: all kept");

    // Lowered: nothing changes until the next apply, which trims the oldest segments.
    retention.0.lock().max_bytes = Some(1024);
    assert_eq!(sm.read(0, 1000).unwrap().len(), 99);
    sm.apply(vec![batch(100)]).await.unwrap();
    let kept: Vec<u64> = sm.read(0, 1000).unwrap().iter().map(|c| c.index).collect();
    assert!(kept.len() < 99 && kept[0] > 1, "trimmed: {kept:?}");
    assert_eq!(
        kept,
        (kept[0]..=100).collect::<Vec<_>>(),
        "nothing newer than the first kept entry lost"
    );

    // The state machine still knows its applied entry and membership (the membership
    // entry itself was trimmed), after a power cut too.
    let (applied, m) = sm.applied_state().await.unwrap();
    assert_eq!((applied, m.log_id()), (Some(id(100)), &Some(id(0))));

    // A snapshot of the trimmed log ends at the applied entry and installs whole.
    let snapshot = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    assert_eq!(snapshot.meta.last_log_id, Some(id(100)));
    let other = FaultFs::new();
    let mut fresh = open_small(&other);
    fresh
        .install_snapshot(&snapshot.meta, snapshot.snapshot)
        .await
        .unwrap();
    let installed: Vec<u64> = fresh
        .read(0, 1000)
        .unwrap()
        .iter()
        .map(|c| c.index)
        .collect();
    assert_eq!(installed, kept, "the snapshot holds what retention kept");
    assert_eq!(
        fresh.applied_state().await.unwrap().1.log_id(),
        &Some(id(0))
    );

    // Lowered to nothing but the active segment: the run that deletes every sealed one
    // first fsyncs what stays, so a power cut right after it keeps the applied entry (the
    // committed log never ends before what the Raft log may have purged).
    retention.0.lock().max_bytes = Some(1);
    sm.apply(vec![batch(101)]).await.unwrap();
    let kept: Vec<u64> = sm.read(0, 1000).unwrap().iter().map(|c| c.index).collect();
    assert!(kept.len() < 20 && kept.last() == Some(&101), "{kept:?}");
    drop(sm);
    fs.crash(None);
    let mut sm = open_small(&fs);
    let (applied, m) = sm.applied_state().await.unwrap();
    assert_eq!(
        (applied, m.log_id()),
        (Some(id(101)), &Some(id(0))),
        "a power cut after trimming keeps the applied entry and the membership"
    );
    let after: Vec<u64> = sm.read(0, 1000).unwrap().iter().map(|c| c.index).collect();
    assert_eq!(after, kept);
}

#[tokio::test]
async fn the_headers_of_recent_publishes_are_read_back_newest_kept() {
    let fs = FaultFs::new();
    let mut sm = open(&fs);
    let with = |h: &'static [u8]| {
        EntryPayload::Normal(Batch::with_headers(
            vec![b"m".to_vec()],
            bytes::Bytes::from_static(h),
        ))
    };
    sm.apply(vec![
        entry(0, EntryPayload::Membership(membership())),
        entry(1, with(b"h1")),
        entry(2, EntryPayload::Normal(Batch::new(vec![b"plain".to_vec()]))),
        entry(3, with(b"h3")),
        entry(4, EntryPayload::Blank),
        entry(5, with(b"h5")),
    ])
    .await
    .unwrap();
    let all = sm.headers_since(0, 10).unwrap();
    assert_eq!(
        all.iter().map(|(_, h)| &h[..]).collect::<Vec<_>>(),
        [&b"h1"[..], b"h3", b"h5"],
        "only the publishes with headers, oldest first"
    );
    let now = starling_storage::now_ms();
    assert!(
        all.iter()
            .all(|(stamp, _)| *stamp <= now && now - stamp < 60_000)
    );
    // At most `max`, the newest; none stamped after now.
    let newest = sm.headers_since(0, 2).unwrap();
    assert_eq!(
        newest.iter().map(|(_, h)| &h[..]).collect::<Vec<_>>(),
        [&b"h3"[..], b"h5"]
    );
    assert!(sm.headers_since(now + 60_000, 10).unwrap().is_empty());
}
