//! A replicated topic's Raft RPCs over the brokers' QUIC peer links: one replica of a topic
//! on each of three in-process brokers, each opened with its broker's transport
//! (`RunningBroker::replica_links`) and registered with its broker's registry
//! (`RunningBroker::replica_registry`). Publishes through the leader are read back from every
//! replica; the leader's replica is shut down and every acknowledged publish is read back from
//! the two survivors, which elect a new leader and take more publishes. And the RPC stream is
//! refused on a connection that is not a peer's.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use starling_broker::cluster::replica_link::replica_id;
use starling_client::ClientError;
use starling_proto::{ErrorCode, Frame, ReplicaRpc};
use starling_replica::{Node, ReplicaConfig, ReplicatedTopic};
use starling_storage::RealFs;

use crate::harness::{SOON, TestCluster};

const TOPIC: &str = "orders.replicated";

type Replicas = BTreeMap<&'static str, Arc<ReplicatedTopic<RealFs>>>;

async fn open_replicas(c: &TestCluster, ids: &[&'static str]) -> Replicas {
    let mut replicas = BTreeMap::new();
    for &id in ids {
        let b = &c.running[id];
        let links = b.replica_links();
        assert_eq!(links.self_id(), replica_id(id));
        let config = ReplicaConfig::default().within_frame(links.max_rpc_bytes());
        let dir = c.dir().join(format!("replica-{id}"));
        let topic = ReplicatedTopic::open(
            TOPIC,
            links.self_id(),
            RealFs,
            &dir,
            config,
            links.transport(TOPIC),
        )
        .await
        .expect("open replica");
        b.replica_registry()
            .register(TOPIC, topic.server())
            .expect("register");
        replicas.insert(id, Arc::new(topic));
    }
    replicas
}

/// The replica that is leader, once one of `among` is and the others know it.
async fn await_leader(replicas: &Replicas, among: &[&'static str]) -> &'static str {
    let deadline = Instant::now() + SOON;
    loop {
        let statuses: Vec<_> = among
            .iter()
            .map(|id| (*id, replicas[id].status()))
            .collect();
        if let Some((leader, s)) = statuses.iter().find(|(_, s)| s.is_leader)
            && statuses.iter().all(|(_, o)| o.leader == Some(s.id))
        {
            return leader;
        }
        assert!(Instant::now() < deadline, "no leader: {statuses:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn publish(
    t: &ReplicatedTopic<RealFs>,
    tag: &str,
    n: usize,
    acked: &mut BTreeMap<u64, Vec<Vec<u8>>>,
) {
    for i in 0..n {
        let messages = vec![
            format!("{tag}-{i}-a").into_bytes(),
            format!("{tag}-{i}-b").into_bytes(),
        ];
        let at = tokio::time::timeout(SOON, t.publish(messages.clone()))
            .await
            .expect("publish in time")
            .expect("publish committed");
        acked.insert(at.seq, messages);
    }
}

/// Every acknowledged publish is in `t`'s committed log, at its index, once.
async fn check_complete(
    id: &str,
    t: &ReplicatedTopic<RealFs>,
    acked: &BTreeMap<u64, Vec<Vec<u8>>>,
) {
    let last = *acked.keys().last().expect("something acked");
    t.wait_applied(last, SOON).await.expect("applied");
    let read = t.read_committed(0, 100_000).expect("read");
    let log: BTreeMap<u64, Vec<Vec<u8>>> = read
        .into_iter()
        .map(|c| (c.index, c.messages.iter().map(|m| m.to_vec()).collect()))
        .collect();
    for (index, messages) in acked {
        assert_eq!(
            log.get(index),
            Some(messages),
            "{id}: acknowledged index {index} missing or different"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_replicated_topic_runs_over_the_peer_links_and_survives_its_leader() {
    let ids = ["a", "b", "c"];
    let c = TestCluster::start("replica-link", &ids).await;
    let replicas = open_replicas(&c, &ids).await;
    let members: BTreeMap<u64, Node> = ids
        .iter()
        .map(|id| (replica_id(id), Node::new(c.addr(id))))
        .collect();
    replicas["a"].initialize(members).await.expect("initialize");
    replicas["b"].founding();
    replicas["c"].founding();

    let leader = await_leader(&replicas, &ids).await;
    let mut acked = BTreeMap::new();
    publish(&replicas[leader], "first", 40, &mut acked).await;
    for id in ids {
        check_complete(id, &replicas[id], &acked).await;
    }
    // The followers' Raft was reached through their brokers' peer streams.
    for id in ids.iter().filter(|id| **id != leader) {
        let served = c
            .metric(id, "starling_replica_rpc_served_total", "outcome=\"ok\"")
            .await;
        assert!(served > 0.0, "{id} served no Raft RPC");
    }
    let sent = c
        .metric(leader, "starling_replica_rpc_calls_total", "outcome=\"ok\"")
        .await;
    assert!(sent > 0.0, "{leader} sent no Raft RPC");

    // The leader's replica goes away; its broker answers its RPC streams with NotFound.
    replicas[leader].shutdown().await.expect("shutdown");
    assert!(c.running[leader].replica_registry().unregister(TOPIC));
    let survivors: Vec<&'static str> = ids.iter().copied().filter(|id| *id != leader).collect();
    let next = await_leader(&replicas, &survivors).await;
    // The new leader still has the old one in its membership; that broker answers NotFound.
    let deadline = Instant::now() + SOON;
    while c
        .metric(
            leader,
            "starling_replica_rpc_served_total",
            "outcome=\"unknown_topic\"",
        )
        .await
        == 0.0
    {
        assert!(
            Instant::now() < deadline,
            "{leader} refused no RPC for its closed replica"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    publish(&replicas[next], "second", 20, &mut acked).await;
    for id in &survivors {
        check_complete(id, &replicas[id], &acked).await;
    }
    for id in &survivors {
        replicas[id].shutdown().await.expect("shutdown");
    }
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn raft_rpcs_are_refused_on_a_client_connection() {
    let ids = ["a", "b"];
    let c = TestCluster::start("replica-forbidden", &ids).await;
    // A user's SDK sending the frame itself, on a connection of the plain role.
    let client = starling_client::Direct::connect(c.config("a"), starling_proto::Role::Plain)
        .await
        .expect("a plain connection");
    let rpc = Frame::ReplicaRpc(ReplicaRpc {
        request_id: 1,
        topic: TOPIC.to_string(),
        rpc: Bytes::from_static(b"\x00\x00\x00\x02{}"),
    });
    let got = client.exchange(rpc, "replica_rpc", 1, SOON).await;
    match got {
        Err(ClientError::Server { code, .. }) => assert_eq!(code, ErrorCode::Forbidden),
        other => panic!("expected Forbidden, got {other:?}"),
    }
    let refused = c
        .metric(
            "a",
            "starling_replica_rpc_served_total",
            "outcome=\"forbidden\"",
        )
        .await;
    assert_eq!(refused, 1.0);
    c.shutdown().await;
}
