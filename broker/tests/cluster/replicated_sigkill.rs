//! Three real `starling-broker` processes on loopback with `durable_replicas: 3`: publishers
//! send `persisted` publishes continuously through the two followers; the topic's Raft
//! leader is killed with SIGKILL, its data directory deleted, and it is restarted empty. Every
//! acknowledged message is then read back once, in order, from the start, at the restarted
//! broker (caught up from the others) and at another one; the fail-over gap (the longest
//! time with no acknowledged publish around the kill) is measured and printed.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use starling_client::{Client, Position};
use starling_config::{ConfigOverrides, Profile, compose};
use starling_testkit::http_get;

use crate::harness::{TestCluster, index, payload};

const TOPIC: &str = "kill.orders";
const IDS: [&str; 3] = ["a", "b", "c"];
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
/// How long one publish may take before the publisher gives up on it (not acked) and sends
/// the next.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(1);

struct Proc {
    child: Child,
    config: PathBuf,
    data: PathBuf,
    http: SocketAddr,
}

fn free_tcp() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr")
}

fn spawn(id: &str, config: &Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling-broker"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("STARLING_")) {
        cmd.env_remove(k);
    }
    cmd.env("POD_NAME", id)
        .arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(if std::env::var_os("REPL_TEST_LOGS").is_some() {
            Stdio::inherit()
        } else {
            Stdio::null()
        })
        .spawn()
        .expect("broker process starts")
}

async fn metric(http: SocketAddr, name: &str, labels: &str) -> Option<f64> {
    let (status, body) = http_get(http, "/metrics").await;
    if status != 200 {
        return None;
    }
    Some(
        body.lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (series, value) = l.rsplit_once(' ')?;
                let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
                (metric == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
            })
            .sum(),
    )
}

/// The broker whose replica leads the topic, once exactly one says so.
async fn leader(procs: &[(String, Proc)]) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut leaders = Vec::new();
        for (id, p) in procs {
            let labels = format!("topic=\"{TOPIC}\"");
            if metric(p.http, "starling_replica_is_leader", &labels).await == Some(1.0) {
                leaders.push(id.clone());
            }
        }
        if leaders.len() == 1 {
            return leaders.remove(0);
        }
        assert!(Instant::now() < deadline, "no single leader: {leaders:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Publishes numbered messages through `client` until aborted; records each acked index
/// with the time of its ack.
fn publisher(
    client: Client,
    first: u64,
    acked: Arc<Mutex<Vec<(u64, Instant)>>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut i = first;
        loop {
            match tokio::time::timeout(PUBLISH_TIMEOUT, client.publish_acked(TOPIC, payload(i)))
                .await
            {
                Ok(Ok(())) => acked.lock().push((i, Instant::now())),
                Ok(Err(_)) => tokio::time::sleep(Duration::from_millis(10)).await,
                Err(_) => {}
            }
            i += 1;
        }
    })
}

async fn read_all(client: &Client) -> Vec<u64> {
    let mut sub = client
        .subscribe_from(TOPIC, Some(FROM_THE_START))
        .await
        .expect("subscribe from the start");
    let mut got = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(3), sub.next_event()).await {
        got.push(index(&ev.expect("event").payload));
    }
    got
}

/// Every acked index is in `got` once, and `got` is in publishing order per publisher.
fn check(got: &[u64], acked: &[(u64, Instant)], at: &str) {
    let mut seen = std::collections::HashSet::new();
    for g in got {
        assert!(seen.insert(*g), "{at}: message {g} delivered twice");
    }
    let lost: Vec<u64> = acked
        .iter()
        .map(|a| a.0)
        .filter(|a| !seen.contains(a))
        .collect();
    assert!(
        lost.is_empty(),
        "{at}: {} acked messages lost (first {:?}) of {}",
        lost.len(),
        &lost[..lost.len().min(10)],
        acked.len()
    );
    // Each publisher's numbers grow: the log keeps each publisher's order.
    for base in [0u64, 1 << 40] {
        let mine: Vec<u64> = got
            .iter()
            .copied()
            .filter(|g| *g >= base && *g < base + (1 << 40))
            .collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{at}: out of order");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_the_leader_and_wipe_its_volume_loses_no_acked_message() {
    // The harness writes the certificates and members file; the brokers are processes.
    let mut c = TestCluster::start_replicated("r3-sigkill", &[], &["kill.>"], 3).await;
    c.write_members(&IDS);
    let mut procs: Vec<(String, Proc)> = Vec::new();
    for id in IDS {
        let http = free_tcp();
        let o = ConfigOverrides {
            http_listen: Some(http),
            log_level: Some("warn".into()),
            ..c.overrides(id)
        };
        let cfg = compose(Profile::Balanced, None, &o);
        let data = cfg.storage_dir.clone().expect("storage dir");
        let config = c.dir().join(format!("broker-{id}.yaml"));
        std::fs::write(&config, cfg.to_yaml()).expect("config");
        let child = spawn(id, &config);
        procs.push((
            id.to_string(),
            Proc {
                child,
                config,
                data,
                http,
            },
        ));
    }
    // The topic is created on first use; wait for its leader.
    let first = c.plain_client("a").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while first
        .publish_acked(TOPIC, payload(u64::MAX - 1))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "the topic never took a publish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    first.close().await;
    let old = leader(&procs).await;
    let followers: Vec<String> = IDS
        .iter()
        .map(|s| s.to_string())
        .filter(|id| *id != old)
        .collect();
    println!("leader: {old}; publishing through {followers:?}");

    let acked: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let mut publishers = Vec::new();
    for (n, id) in followers.iter().enumerate() {
        let client = c.plain_client(id).await;
        publishers.push(publisher(client, (n as u64) << 40, Arc::clone(&acked)));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before_kill = acked.lock().len();
    assert!(before_kill > 0, "nothing acked before the kill");

    // SIGKILL the leader, wipe its volume, restart it empty.
    let killed_at = Instant::now();
    let p = &mut procs
        .iter_mut()
        .find(|(id, _)| *id == old)
        .expect("leader")
        .1;
    p.child.kill().expect("SIGKILL");
    let _ = p.child.wait();
    std::fs::remove_dir_all(&p.data).expect("wipe the leader's data directory");
    tokio::time::sleep(Duration::from_millis(500)).await;
    p.child = spawn(&old, &p.config);
    // Publishing goes on through the fail-over and the catch-up.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for h in &publishers {
        h.abort();
    }
    for h in publishers {
        let _ = h.await;
    }
    let acked = acked.lock().clone();
    let after_kill: Vec<Instant> = acked
        .iter()
        .map(|a| a.1)
        .filter(|t| *t >= killed_at)
        .collect();
    let last_before = acked
        .iter()
        .map(|a| a.1)
        .filter(|t| *t < killed_at)
        .max()
        .expect("acks before the kill");
    let first_after = after_kill
        .iter()
        .min()
        .copied()
        .expect("acks after the kill");
    let gap = first_after.duration_since(last_before);
    println!(
        "fail-over gap: {gap:?} (acked {} before the kill, {} after)",
        before_kill,
        after_kill.len()
    );
    assert!(gap < Duration::from_secs(5), "fail-over gap {gap:?}");

    // Every acked message, once, in order: at the wiped broker (caught up) and at another.
    for at in [old.as_str(), followers[0].as_str()] {
        let client = c.plain_client(at).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = read_all(&client).await;
            let have: std::collections::HashSet<u64> = got.iter().copied().collect();
            let complete = acked.iter().all(|a| have.contains(&a.0));
            if complete || Instant::now() > deadline {
                check(&got, &acked, at);
                println!(
                    "{at}: read back {} messages ({} acked)",
                    got.len(),
                    acked.len()
                );
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        client.close().await;
    }
    for (_, p) in &mut procs {
        let _ = p.child.kill();
        let _ = p.child.wait();
    }
    c.shutdown().await;
}
