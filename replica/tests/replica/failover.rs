//! Measurements on real files and the real clock (in-process replicas on `SimNet`, each
//! with its own data directory in a tempdir, every fsync real):
//!
//! - the fail-over gap: the time from stopping the leader to the first publish acknowledged
//!   by a new leader, with the default (realistic) heartbeat and election timeouts; asserted
//!   under 5 s, printed per trial;
//! - `throughput_r1_vs_r3` (ignored by default; run with `--ignored --nocapture`): publish
//!   throughput of 256-byte single-message publishes from concurrent publishers, R1 and R3.
//!   An in-process figure, not the `bench/compare` one.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use openraft::BasicNode;
use starling_replica::{NodeId, ReplicaConfig, ReplicatedTopic, SimNet};
use starling_storage::RealFs;

struct RealCluster {
    net: SimNet,
    _dir: tempfile::TempDir,
    topics: BTreeMap<NodeId, Arc<ReplicatedTopic<RealFs>>>,
}

impl RealCluster {
    async fn start(n: u64, seed: u64) -> RealCluster {
        let dir = tempfile::tempdir().unwrap();
        let net = SimNet::new(seed);
        let mut topics = BTreeMap::new();
        for id in 1..=n {
            let t = ReplicatedTopic::open(
                "t",
                id,
                RealFs,
                &dir.path().join(format!("n{id}")),
                ReplicaConfig::default(),
                Arc::new(net.clone()),
            )
            .await
            .unwrap();
            t.founding();
            net.register(id, t.server());
            topics.insert(id, Arc::new(t));
        }
        let members = (1..=n)
            .map(|id| (id, BasicNode::new(format!("n{id}"))))
            .collect();
        topics[&1].initialize(members).await.unwrap();
        RealCluster {
            net,
            _dir: dir,
            topics,
        }
    }

    fn leader(&self) -> Option<NodeId> {
        self.topics
            .values()
            .map(|t| t.status())
            .filter(|s| s.is_leader)
            .max_by_key(|s| s.term)
            .map(|s| s.id)
    }

    async fn await_leader(&self) -> NodeId {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(l) = self.leader() {
                return l;
            }
            assert!(Instant::now() < deadline, "no leader");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn kill(&mut self, id: NodeId) {
        self.net.unregister(id);
        let t = self.topics.remove(&id).unwrap();
        t.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fail_over_gap_is_under_five_seconds() {
    let mut gaps = Vec::new();
    for trial in 0..3 {
        let mut c = RealCluster::start(3, trial).await;
        c.net
            .set_delay(Duration::from_micros(100), Duration::from_millis(1));
        let leader = c.await_leader().await;
        for i in 0..20 {
            c.topics[&leader]
                .publish(vec![format!("warm-{i}").into_bytes()])
                .await
                .unwrap();
        }
        let killed = Instant::now();
        c.kill(leader).await;
        let gap = loop {
            if let Some(l) = c.leader() {
                let published = tokio::time::timeout(
                    Duration::from_secs(1),
                    c.topics[&l].publish(vec![b"after".to_vec()]),
                )
                .await;
                if matches!(published, Ok(Ok(_))) {
                    break killed.elapsed();
                }
            }
            assert!(killed.elapsed() < Duration::from_secs(30), "no new leader");
            tokio::time::sleep(Duration::from_millis(2)).await;
        };
        eprintln!("fail-over trial {trial}: {} ms", gap.as_millis());
        gaps.push(gap);
        for t in c.topics.values() {
            t.shutdown().await.unwrap();
        }
    }
    let worst = gaps.iter().max().unwrap();
    assert!(*worst < Duration::from_secs(5), "fail-over gap {worst:?}");
}

async fn throughput(replicas: u64, publishers: usize, run: Duration) -> f64 {
    let c = RealCluster::start(replicas, 7).await;
    let leader = c.await_leader().await;
    let topic = Arc::clone(&c.topics[&leader]);
    let count = Arc::new(AtomicU64::new(0));
    let stop = Instant::now() + run;
    let mut tasks = Vec::new();
    for _ in 0..publishers {
        let topic = Arc::clone(&topic);
        let count = Arc::clone(&count);
        tasks.push(tokio::spawn(async move {
            let payload = vec![7u8; 256];
            while Instant::now() < stop {
                topic.publish(vec![payload.clone()]).await.unwrap();
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let started = Instant::now();
    for t in tasks {
        t.await.unwrap();
    }
    let rate = count.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64();
    for t in c.topics.values() {
        t.shutdown().await.unwrap();
    }
    rate
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn throughput_r1_vs_r3() {
    for publishers in [1, 16] {
        let r1 = throughput(1, publishers, Duration::from_secs(3)).await;
        let r3 = throughput(3, publishers, Duration::from_secs(3)).await;
        eprintln!(
            "{publishers} publishers, 256 B: R1 {r1:.0} publishes/s, R3 {r3:.0} publishes/s (R3/R1 {:.2})",
            r3 / r1
        );
    }
}
