//! A rolling upgrade's mixed versions: a replica that reads only JSON request frames (what a
//! build from before the binary append decodes) still gets the log. The leader's binary
//! appends to it are refused as malformed, it is sent JSON instead, and every acknowledged
//! publish is read back on every replica; the replicas that read binary get binary appends.
//! Simulated time (tokio's paused clock).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use openraft::BasicNode;
use parking_lot::Mutex;
use starling_replica::codec::{self, FRAME_HEADER};
use starling_replica::network::CallFuture;
use starling_replica::rpc::Rpc;
use starling_replica::wire::APPEND_TAG;
use starling_replica::{NodeId, ReplicaConfig, ReplicatedTopic, SimNet, Transport, TransportError};
use starling_storage::fault::FaultFs;

const SEC: Duration = Duration::from_secs(1);

/// Frames by kind that reached each replica.
#[derive(Default, Debug, Clone, Copy)]
struct Seen {
    binary_appends: u64,
    json_appends: u64,
    refused: u64,
}

/// The simulated network, with replica `old` (once set) decoding requests the way the older
/// build did: JSON only.
struct Mixed {
    net: SimNet,
    old: Mutex<Option<NodeId>>,
    seen: Mutex<BTreeMap<NodeId, Seen>>,
}

impl Transport for Mixed {
    fn call(&self, from: NodeId, to: NodeId, frame: Vec<u8>) -> CallFuture<'_> {
        Box::pin(async move {
            let binary = frame.get(FRAME_HEADER) == Some(&APPEND_TAG);
            let json_append = !binary
                && matches!(
                    codec::decode_frame::<Rpc>(&frame, usize::MAX),
                    Ok(Rpc::Append(_))
                );
            if Some(to) == *self.old.lock()
                && let Err(e) = codec::decode_frame::<Rpc>(&frame, usize::MAX)
            {
                self.seen.lock().entry(to).or_default().refused += 1;
                return Err(TransportError::Codec(e));
            }
            {
                let mut seen = self.seen.lock();
                let s = seen.entry(to).or_default();
                s.binary_appends += u64::from(binary);
                s.json_appends += u64::from(json_append);
            }
            self.net.call(from, to, frame).await
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_replica_reading_only_json_is_sent_json_appends() {
    let config = ReplicaConfig {
        segment_bytes: 16 * 1024,
        ..ReplicaConfig::default()
    };
    let net = SimNet::new(7);
    let mixed = Arc::new(Mixed {
        net: net.clone(),
        old: Mutex::default(),
        seen: Mutex::default(),
    });
    let ids = [1u64, 2, 3];
    let mut topics = BTreeMap::new();
    for id in ids {
        let t = ReplicatedTopic::open(
            "t",
            id,
            FaultFs::new(),
            Path::new("/data"),
            config,
            Arc::clone(&mixed) as Arc<dyn Transport>,
        )
        .await
        .unwrap();
        net.register(id, t.server());
        t.founding();
        topics.insert(id, t);
    }
    let members = ids
        .iter()
        .map(|&id| (id, BasicNode::new(format!("sim-{id}"))))
        .collect();
    topics[&1].initialize(members).await.unwrap();
    // A follower runs the older build (an old leader would send JSON, as it did).
    let mut leader = None;
    for _ in 0..500 {
        let s = topics[&1].status();
        if let Some(l) = s.leader {
            leader = Some(l);
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let leader = leader.expect("a leader");
    let old = *ids.iter().find(|&&id| id != leader).unwrap();
    let new = *ids.iter().find(|&&id| id != leader && id != old).unwrap();
    *mixed.old.lock() = Some(old);
    let mut acked = Vec::new();
    for i in 0..20u32 {
        let m = vec![format!("m{i}").into_bytes(), vec![0, 255, i as u8]];
        let p = tokio::time::timeout(5 * SEC, topics[&leader].publish(m.clone()))
            .await
            .unwrap()
            .unwrap();
        acked.push((p.seq, m));
    }
    let last = acked.last().unwrap().0;
    for (id, t) in &topics {
        t.wait_applied(last, 10 * SEC).await.unwrap();
        let read = t.read_committed(0, 1000).unwrap();
        for (index, m) in &acked {
            let got = read.iter().find(|c| c.index == *index);
            assert_eq!(
                got.map(|c| c.messages.iter().map(|b| b.to_vec()).collect::<Vec<_>>())
                    .as_ref(),
                Some(m),
                "replica {id}, index {index}"
            );
        }
    }
    let seen = mixed.seen.lock().clone();
    // The old replica refused a binary append, then got JSON ones (binary ones counted
    // before it became old are the cluster's start, when all three ran the new build).
    assert!(seen[&old].refused >= 1, "{seen:?}");
    assert!(seen[&old].json_appends >= 1, "{seen:?}");
    assert!(seen[&new].binary_appends >= 1, "{seen:?}");
    assert_eq!(seen[&new].refused, 0, "{seen:?}");
    assert_eq!(seen[&new].json_appends, 0, "{seen:?}");
}
