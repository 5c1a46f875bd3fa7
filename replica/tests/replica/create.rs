//! Creating a topic from the replica that bootstraps it (`ReplicatedTopic::create`): a new
//! topic is bootstrapped once; a bootstrapping replica whose volume was lost finds the
//! others' state and is caught up instead of starting a second history; an unreachable
//! replica stops creation rather than letting it guess.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::{Cluster, node, test_config};
use starling_replica::{Created, ReplicaError};

const IDS: [u64; 3] = [1, 2, 3];

fn members() -> BTreeMap<u64, openraft::BasicNode> {
    IDS.iter().map(|&id| (id, node(id))).collect()
}

async fn publish_somewhere(c: &Cluster, msg: &[u8]) -> u64 {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        for id in c.live() {
            if let Ok(p) = c.topic(id).publish(vec![msg.to_vec()]).await {
                return p.seq;
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no leader took the publish"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_topic_is_bootstrapped_once_and_a_wiped_creator_rejoins() {
    let mut c = Cluster::open_blank(7, &IDS, test_config()).await;
    assert_eq!(
        c.topic(1).create(members()).await.unwrap(),
        Created::Bootstrapped
    );
    // Again (a restart with its volume): nothing to do.
    assert_eq!(c.topic(1).create(members()).await.unwrap(), Created::Exists);
    // Every founding replica votes: any two elect a leader.
    for i in 0..20u8 {
        publish_somewhere(&c, &[i]).await;
    }
    // The creator loses its volume and calls create again: the others hold the topic, so it
    // is caught up, never bootstrapped a second time.
    c.wipe(1).await;
    c.boot(1).await;
    assert_eq!(c.topic(1).create(members()).await.unwrap(), Created::Exists);
    assert!(c.topic(1).is_catching_up());
    publish_somewhere(&c, b"after").await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let read = c.topic(1).read_committed(0, 1000).unwrap();
        let messages: Vec<Vec<u8>> = read
            .into_iter()
            .flat_map(|r| r.messages)
            .map(|m| m.to_vec())
            .collect();
        if messages.len() == 21 {
            let mut want: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i]).collect();
            want.push(b"after".to_vec());
            assert_eq!(messages, want);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the wiped creator did not catch up: {} messages",
            messages.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creation_waits_for_every_replica_to_answer() {
    let mut c = Cluster::open_blank(9, &IDS, test_config()).await;
    c.crash(3, false).await;
    match c.topic(1).create(members()).await {
        Err(ReplicaError::Unreachable(_)) => {}
        other => panic!("created without replica 3's answer: {other:?}"),
    }
    c.boot(3).await;
    assert_eq!(
        c.topic(1).create(members()).await.unwrap(),
        Created::Bootstrapped
    );
    publish_somewhere(&c, b"x").await;
}
