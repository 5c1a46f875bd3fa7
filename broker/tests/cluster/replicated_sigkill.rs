//! Three real `starling-broker` processes on loopback with `durable_replicas: 3`: publishers
//! send `persisted` publishes continuously through the two followers, and the topic's Raft
//! leader is lost in one of two ways ([`Loss`]):
//!
//! - **killed**: SIGKILL, its data directory deleted, and restarted empty (caught up from the
//!   other two under the same replica id);
//! - **volume gone**: its data directory deleted while it runs (a volume deleted or failed
//!   under a live process: each write fails from then on), then killed and restarted empty;
//! - **frozen**: SIGSTOP for longer than the election timeout, then SIGCONT: a leader that
//!   stopped answering without closing anything (a hung node, a partition), and wakes up still
//!   believing it leads. A third publisher is connected to it throughout, so publishes it took
//!   before and while it was stopped meet the new leader's term when it wakes.
//!
//! Every acknowledged message is then read back once, in each publisher's order, from the
//! start, at the lost broker and at another one. The fail-over gap, the longest time between
//! two consecutive acks from just before the loss to the end, is printed and bounded by the
//! issue's 5 s target. `REPL_TEST_LOGS=<filter>` shows the brokers' logs at that filter.

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

/// The brokers' log filter when `REPL_TEST_LOGS` is set (their stderr is then shown).
fn log_filter() -> Option<String> {
    std::env::var("REPL_TEST_LOGS")
        .ok()
        .filter(|f| !f.is_empty())
}

/// A broker process is killed when the test ends, also when it fails (a stopped one too).
impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
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
        .stderr(if log_filter().is_some() {
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
    for base in [0u64, 1 << 40, 2 << 40] {
        let mine: Vec<u64> = got
            .iter()
            .copied()
            .filter(|g| *g >= base && *g < base + (1 << 40))
            .collect();
        assert!(mine.windows(2).all(|w| w[0] < w[1]), "{at}: out of order");
    }
}

/// How the topic's leader is lost.
#[derive(Debug, Clone, Copy)]
enum Loss {
    /// SIGKILL, its data directory deleted, restarted empty after half a second.
    Killed,
    /// SIGSTOP, then SIGCONT after this long.
    FrozenFor(Duration),
    /// Its data directory deleted under it while it runs (a volume deleted or failed under a
    /// live process); SIGKILLed after this long and restarted empty.
    VolumeGoneFor(Duration),
}

/// The longest time between two consecutive acks (of any publisher), counted from the last
/// ack before `from` on.
fn longest_gap(acked: &[(u64, Instant)], from: Instant) -> Duration {
    let mut times: Vec<Instant> = acked.iter().map(|a| a.1).collect();
    times.sort();
    let mut prev = times.iter().copied().rev().find(|t| *t < from);
    let mut longest = Duration::ZERO;
    for t in times.into_iter().filter(|t| *t >= from) {
        if let Some(p) = prev {
            longest = longest.max(t.duration_since(p));
        }
        prev = Some(t);
    }
    longest
}

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{sig} {}", child.id());
}

/// Acks after `since` (from acks recorded with their times).
fn acks_since(acked: &Mutex<Vec<(u64, Instant)>>, since: Instant) -> usize {
    acked.lock().iter().filter(|a| a.1 >= since).count()
}

async fn lose_the_leader(loss: Loss) {
    // The harness writes the certificates and members file; the brokers are processes.
    let tag = match loss {
        Loss::Killed => "r3-sigkill",
        Loss::FrozenFor(_) => "r3-sigstop",
        Loss::VolumeGoneFor(_) => "r3-volume-gone",
    };
    let mut c = TestCluster::start_replicated(tag, &[], &["kill.>"], 3).await;
    c.write_members(&IDS);
    let mut procs: Vec<(String, Proc)> = Vec::new();
    for id in IDS {
        let http = free_tcp();
        let o = ConfigOverrides {
            http_listen: Some(http),
            log_level: Some(log_filter().unwrap_or_else(|| "warn".into())),
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
    println!("{loss:?}: leader {old}; publishing through {followers:?}");

    let acked: Arc<Mutex<Vec<(u64, Instant)>>> = Arc::default();
    let mut publishers = Vec::new();
    for (n, id) in followers.iter().enumerate() {
        let client = c.plain_client(id).await;
        publishers.push(publisher(client, (n as u64) << 40, Arc::clone(&acked)));
    }
    if let Loss::FrozenFor(_) = loss {
        let client = c.plain_client(&old).await;
        publishers.push(publisher(client, 2 << 40, Arc::clone(&acked)));
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = acked.lock().len();
    assert!(before > 0, "nothing acked before the loss");

    let lost_at = Instant::now();
    let p = &mut procs
        .iter_mut()
        .find(|(id, _)| *id == old)
        .expect("leader")
        .1;
    let back_at = match loss {
        Loss::Killed => {
            p.child.kill().expect("SIGKILL");
            let _ = p.child.wait();
            std::fs::remove_dir_all(&p.data).expect("wipe the leader's data directory");
            tokio::time::sleep(Duration::from_millis(500)).await;
            p.child = spawn(&old, &p.config);
            Instant::now()
        }
        Loss::VolumeGoneFor(d) => {
            std::fs::remove_dir_all(&p.data).expect("delete the leader's data directory");
            tokio::time::sleep(d).await;
            p.child.kill().expect("SIGKILL");
            let _ = p.child.wait();
            let _ = std::fs::remove_dir_all(&p.data);
            tokio::time::sleep(Duration::from_millis(500)).await;
            p.child = spawn(&old, &p.config);
            Instant::now()
        }
        Loss::FrozenFor(d) => {
            signal(&p.child, "STOP");
            tokio::time::sleep(d).await;
            signal(&p.child, "CONT");
            Instant::now()
        }
    };
    // Publishing goes on through the fail-over and the lost broker's return, until a hundred
    // publishes are acked after it is back (or 40 s after the loss).
    let deadline = lost_at + Duration::from_secs(40);
    while acks_since(&acked, back_at) < 100 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    for h in &publishers {
        h.abort();
    }
    for h in publishers {
        let _ = h.await;
    }
    let acked = acked.lock().clone();
    let after = acked.iter().filter(|a| a.1 >= lost_at).count();
    let gap = longest_gap(&acked, lost_at);
    println!(
        "{loss:?}: longest time without an ack {gap:?} (acked {before} before the loss, {after} \
         after, {} after the lost broker was back)",
        acked.iter().filter(|a| a.1 >= back_at).count()
    );
    assert!(after > 0, "nothing acked after the loss");
    assert!(gap < Duration::from_secs(5), "fail-over gap {gap:?}");

    // Every acked message, once, in order: at the lost broker (caught up) and at another.
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
    drop(procs);
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_the_leader_and_wipe_its_volume_loses_no_acked_message() {
    lose_the_leader(Loss::Killed).await;
}

/// A leader that stops answering (SIGSTOP) for 7 s, far past the election timeout, is replaced
/// within the fail-over bound, and when it wakes believing it still leads, nothing it or the
/// new leader acked is lost or duplicated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_stops_answering_is_replaced_and_acks_nothing_it_loses() {
    lose_the_leader(Loss::FrozenFor(Duration::from_secs(7))).await;
}

/// A leader whose data directory is deleted under it (writes fail from then on) gives up
/// leading within the fail-over bound instead of holding the topic while it cannot commit.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_volume_vanishes_under_it_is_replaced() {
    lose_the_leader(Loss::VolumeGoneFor(Duration::from_secs(8))).await;
}
