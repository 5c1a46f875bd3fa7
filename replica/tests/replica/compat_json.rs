//! A replica directory written by a build from before the binary entry format (every Raft log
//! entry and committed record serde JSON, batch version 2) opens with this build: the old
//! records read back, the topic takes new publishes (stored binary, next to the JSON ones in
//! the same logs), and both read back in order, also after a restart.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::{
    BasicNode, CommittedLeaderId, EntryPayload, LogId, Membership, StoredMembership, Vote,
};
use starling_replica::codec;
use starling_replica::committed::CommittedRecord;
use starling_replica::entry_codec::RECORD_TAG;
use starling_replica::log_store::position;
use starling_replica::meta;
use starling_replica::types::Entry;
use starling_replica::{Batch, ReplicaConfig, ReplicatedTopic, SimNet};
use starling_storage::fault::FaultFs;
use starling_storage::{Log, Position};

const SEC: Duration = Duration::from_secs(1);

fn id(term: u64, index: u64) -> LogId<u64> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

/// Writes what the older build left after bootstrapping R1 topic `t` on replica 1 and
/// committing three publishes: entries 0 (membership), 1 (the leader's blank), 2..=4.
fn write_old_replica(fs: &FaultFs, config: &ReplicaConfig) -> Vec<Vec<Vec<u8>>> {
    let membership = Membership::new(
        vec![BTreeSet::from([1u64])],
        BTreeMap::from([(1u64, BasicNode::new("sim-1"))]),
    );
    let publishes: Vec<Vec<Vec<u8>>> = (0..3u8)
        .map(|i| vec![format!("old-{i}").into_bytes(), vec![i, 0, 255]])
        .collect();
    let mut entries: Vec<Entry> = vec![
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(0, 0), 0),
            payload: EntryPayload::Membership(membership.clone()),
        },
        Entry {
            log_id: id(1, 1),
            payload: EntryPayload::Blank,
        },
    ];
    for (k, m) in publishes.iter().enumerate() {
        entries.push(Entry {
            log_id: id(1, 2 + k as u64),
            payload: EntryPayload::Normal(Batch::new(m.clone())),
        });
    }
    let raft = Path::new("/data/raft");
    let (mut log, _) = Log::open_in(fs.clone(), raft, config.raft_log_config()).unwrap();
    let (mut committed, _) = Log::open_in(
        fs.clone(),
        Path::new("/data/committed/g0"),
        config.committed_log_config(),
    )
    .unwrap();
    for e in &entries {
        let json = codec::encode_body(e).unwrap();
        assert_eq!(json[0], b'{');
        log.append(position(e.log_id.index), 1, &json).unwrap();
        let record = CommittedRecord::of(e.clone());
        let json = codec::encode_body(&record).unwrap();
        committed
            .append(position(e.log_id.index), 1, &json)
            .unwrap();
    }
    log.sync().unwrap();
    committed.sync().unwrap();
    let raft_meta = serde_json::json!({
        "vote": Vote::new_committed(1u64, 1u64),
        "committed": Some(id(1, 4)),
        "purged": None::<LogId<u64>>,
    });
    meta::write_atomic(fs, raft, "raft-meta.json", raft_meta.to_string().as_bytes()).unwrap();
    let sm_meta = serde_json::json!({
        "generation": 0,
        "membership": StoredMembership::new(Some(entries[0].log_id), membership),
    });
    meta::write_atomic(
        fs,
        Path::new("/data/committed"),
        "sm-meta.json",
        sm_meta.to_string().as_bytes(),
    )
    .unwrap();
    publishes
}

async fn open(fs: &FaultFs, config: ReplicaConfig) -> ReplicatedTopic<FaultFs> {
    let net = SimNet::new(1);
    let t = ReplicatedTopic::open(
        "t",
        1,
        fs.clone(),
        Path::new("/data"),
        config,
        Arc::new(net.clone()),
    )
    .await
    .unwrap();
    net.register(1, t.server());
    t
}

async fn await_leader(t: &ReplicatedTopic<FaultFs>) {
    for _ in 0..1000 {
        if t.status().is_leader {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no leader: {:?}", t.status());
}

#[tokio::test(start_paused = true)]
async fn a_json_replica_of_an_older_build_opens_and_takes_binary_entries() {
    let config = ReplicaConfig::default();
    let fs = FaultFs::new();
    let old = write_old_replica(&fs, &config);

    let t = open(&fs, config).await;
    t.wait_applied(4, 10 * SEC).await.unwrap();
    let read = t.read_committed(0, 100).unwrap();
    assert_eq!(read.iter().map(|c| c.index).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(
        read.iter().map(|c| c.messages.clone()).collect::<Vec<_>>(),
        old
    );

    await_leader(&t).await;
    let new = vec![b"new".to_vec(), Vec::new()];
    let p = tokio::time::timeout(10 * SEC, t.publish(new.clone()))
        .await
        .unwrap()
        .unwrap();
    assert!(p.seq > 4);
    let read = t.read_committed(0, 100).unwrap();
    let mut want = old.clone();
    want.push(new.clone());
    assert_eq!(
        read.iter().map(|c| c.messages.clone()).collect::<Vec<_>>(),
        want
    );
    assert_eq!(read.last().unwrap().index, p.seq);
    t.shutdown().await.unwrap();
    drop(t);

    // The new record is binary, in the same committed log as the JSON ones.
    let (committed, _) = Log::open_in(
        fs.clone(),
        Path::new("/data/committed/g0"),
        config.committed_log_config(),
    )
    .unwrap();
    let raw: Vec<(Position, u8)> = committed
        .read_from(position(0))
        .map(|r| {
            let r = r.unwrap();
            (r.position, r.payload[0])
        })
        .collect();
    assert_eq!(raw.iter().find(|(pos, _)| pos.seq == 2).unwrap().1, b'{');
    assert_eq!(
        raw.iter().find(|(pos, _)| pos.seq == p.seq).unwrap().1,
        RECORD_TAG
    );
    drop(committed);

    // And after a restart, both formats read back again.
    let t = open(&fs, config).await;
    t.wait_applied(p.seq, 10 * SEC).await.unwrap();
    let read = t.read_committed(0, 100).unwrap();
    assert_eq!(
        read.iter().map(|c| c.messages.clone()).collect::<Vec<_>>(),
        want
    );
    t.shutdown().await.unwrap();
}
