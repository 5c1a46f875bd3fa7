//! The tier autoscaler on the real cluster. The e2e Helm values shrink the tier capacities
//! (small 200 msg/s, medium 2000 msg/s) and the BrokerCluster shrinks the windows, so a few
//! hundred msg/s from `starling bench --rate` through the client Service move the cluster from
//! small to medium within minutes, and stopping the load moves it back down. Throughout, a
//! separate SDK publisher sends acked, numbered messages at a low rate to a subscriber, and
//! cache keys written before the moves are read after them. Every acked message must arrive,
//! during the moves too: brokers restart and topics change owner under the subscription, which
//! resumes from its last event and is replayed what it missed. How many arrived only through a
//! replay, and how many acked messages fell inside the moves, is printed.
//!
//! With `STARLING_E2E_AUTOSCALING_RECORD=<file>` the test writes one CSV line per status poll
//! (seconds, observed publish msg/s, utilisation, effective tier, rendered tier, ready
//! brokers, recommendation); `e2e/plot-autoscaling.py` turns it into the plot of
//! `docs/autoscaling.md`.
//!
//! Every broker pod's log (per-batch topic trace, cluster and subscription debug) is kept in
//! `STARLING_E2E_LOG_DIR` (default `$TMPDIR/starling-e2e-logs`)`/<namespace>/`, with
//! `probe.csv`: when each probe number was acked, and at which position and when it arrived. A
//! lost number is printed with the positions of its neighbours and the log lines around them.

use std::collections::{BTreeSet, HashMap};
use std::io::Write;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use starling_client::{ClientConfig, Position};
use starling_config::{ConfigOverrides, Tier};
use starling_e2e::pod_logs::{PodLogs, log_dir};
use starling_e2e::{Env, TestNamespace};
use starling_operator::crd::{AutoscalingSpec, BrokerCluster, BrokerClusterSpec};
use tokio::sync::Mutex;

use crate::cli::cli;

const CLUSTER: &str = "auto";
const TOPIC: &str = "auto-acked";
const KEYS: u32 = 20;
/// Offered load: twice small's e2e capacity (200 msg/s), a tenth of medium's.
const LOAD_RATE: u32 = 400;
/// The acked probe stream: far below every threshold.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
const MOVE_TIMEOUT: Duration = Duration::from_secs(600);
/// The autoscaler's windows on this test's BrokerCluster: as short as a steady signal allows
/// (the load is twice small's capacity against an 80% threshold, the quiet probe a twentieth
/// against 50%), since every second of a window is a second of the suite's critical path.
const SCALE_UP_WINDOW: &str = "15s";
const SCALE_DOWN_WINDOW: &str = "20s";
const COOLDOWN: &str = "15s";
/// The operator scrapes every broker this often: each window holds several rounds, and a
/// round that missed a just-restarted broker (which never moves the cluster) passes sooner.
const SCRAPE_INTERVAL: &str = "2s";
/// How often the test reads the cluster's status while it waits for a move.
const STATUS_POLL: Duration = Duration::from_secs(2);
/// How long after a move settled every key written before must be readable again.
const KEYS_SETTLE: Duration = Duration::from_secs(30);

/// The brokers' log filter in this test.
const BROKER_LOG: &str = "info,starling_broker::pubsub::topic=trace,starling_broker::cluster=debug,starling_broker::server::subscribe=debug";

async fn service_addr(ns: &TestNamespace) -> String {
    let svc = ns
        .api::<Service>()
        .get(CLUSTER)
        .await
        .expect("client Service");
    let ip = svc.spec.and_then(|s| s.cluster_ip).expect("ClusterIP");
    format!("{ip}:7400")
}

/// Status polls, printed and optionally recorded.
struct Recorder {
    start: Instant,
    /// `start` in seconds since the Unix epoch, to read the times beside the brokers' logs.
    start_unix: f64,
    file: Option<std::fs::File>,
}

impl Recorder {
    fn new() -> Self {
        let file = std::env::var_os("STARLING_E2E_AUTOSCALING_RECORD").map(|p| {
            let mut f = std::fs::File::create(p).expect("record file");
            let _ = writeln!(
                f,
                "seconds,publish_msgs_per_sec,utilization_percent,effective_tier,tier,ready,recommendation,phase"
            );
            f
        });
        Recorder {
            start: Instant::now(),
            start_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
            file,
        }
    }

    fn record(&mut self, bc: &BrokerCluster, phase: &str) {
        let s = bc.status.clone().unwrap_or_default();
        let a = s.autoscaling.clone().unwrap_or_default();
        let line = format!(
            "{:.1},{},{},{},{},{},{},{phase}",
            self.start.elapsed().as_secs_f64(),
            a.publish_msgs_per_sec,
            a.utilization_percent,
            s.effective_tier.map_or("-".into(), |t| t.to_string()),
            s.tier.map_or("-".into(), |t| t.to_string()),
            s.ready.unwrap_or_default(),
            a.recommendation,
        );
        println!("{line}  {}", a.reason);
        if let Some(f) = self.file.as_mut() {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// Polls the cluster every [`STATUS_POLL`] until `done` holds, recording each poll. Returns the cluster
/// and the probe's last number sent at the last poll before `status.effectiveTier` left
/// `from` (the start of the move, to within one poll), or at the end when it never left.
async fn watch_until(
    ns: &TestNamespace,
    rec: &mut Recorder,
    phase: &str,
    probe: &Mutex<Probe>,
    from: Tier,
    done: impl Fn(&BrokerCluster) -> bool,
) -> (BrokerCluster, u64) {
    let deadline = Instant::now() + MOVE_TIMEOUT;
    let mut before_move = probe.lock().await.sent;
    let mut moved = false;
    loop {
        let sent = probe.lock().await.sent;
        if let Ok(bc) = ns.clusters().get(CLUSTER).await {
            rec.record(&bc, phase);
            let chosen = bc
                .status
                .as_ref()
                .and_then(|s| s.effective_tier)
                .unwrap_or(from);
            moved |= chosen != from;
            if !moved {
                before_move = sent;
            }
            if done(&bc) {
                return (bc, before_move);
            }
        }
        assert!(
            Instant::now() < deadline,
            "{phase}: not reached within {MOVE_TIMEOUT:?}"
        );
        tokio::time::sleep(STATUS_POLL).await;
    }
}

fn settled_at(bc: &BrokerCluster, tier: Tier, brokers: i32) -> bool {
    let Some(s) = bc.status.as_ref() else {
        return false;
    };
    let ready = s
        .conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let stable = s
        .conditions
        .iter()
        .any(|c| c.type_ == "Progressing" && c.status == "False");
    ready
        && stable
        && s.effective_tier == Some(tier)
        && s.tier == Some(tier)
        && s.ready_replicas == brokers
        && s.members == Some(brokers)
}

/// Runs `starling bench --rate` against the client Service until stopped, restarting it when
/// it exits (a broker restart during a move can end a run). It authenticates with the
/// credentials directory `creds`, verifies the brokers by `server_name`, and writes each run's
/// output to `logs`.
fn start_load(
    addr: String,
    creds: std::path::PathBuf,
    server_name: String,
    logs: std::path::PathBuf,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut runs = 0;
        while !stop.load(Ordering::SeqCst) {
            runs += 1;
            // Each run's output is kept beside the brokers' logs (`bench-<run>.log`).
            let output = std::fs::create_dir_all(&logs)
                .and_then(|()| std::fs::File::create(logs.join(format!("bench-{runs}.log"))));
            let (stdout, stderr) = match output.and_then(|f| Ok((f.try_clone()?, f))) {
                Ok((out, err)) => (Stdio::from(out), Stdio::from(err)),
                Err(_) => (Stdio::null(), Stdio::null()),
            };
            let child = tokio::process::Command::new(cli())
                .args(["bench", "--server", &addr, "--server-name", &server_name])
                .arg("--credentials")
                .arg(&creds)
                .arg("--rate")
                .arg(LOAD_RATE.to_string())
                .args(["--duration", "900s", "--warmup", "0s", "--payload", "64"])
                .args(["--timeout", "5s", "--drain-timeout", "1s"])
                .arg("--no-progress")
                .stdout(stdout)
                .stderr(stderr)
                .kill_on_drop(true)
                .spawn();
            let mut child = match child {
                Ok(c) => c,
                Err(e) => {
                    println!("cannot run {}: {e}", cli().display());
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            };
            let started = Instant::now();
            loop {
                if stop.load(Ordering::SeqCst) {
                    let _ = child.kill().await;
                    return runs;
                }
                if let Ok(status) = tokio::time::timeout(Duration::from_secs(1), child.wait()).await
                {
                    println!(
                        "bench run {runs} ended after {:.0?}: {status:?}",
                        started.elapsed()
                    );
                    break;
                }
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        runs
    })
}

/// What the acked probe saw.
struct Probe {
    start: Instant,
    /// The last number sent.
    sent: u64,
    acked: BTreeSet<u64>,
    failed: u64,
    received: BTreeSet<u64>,
    /// Numbers received more than once.
    duplicates: u64,
    /// When each number was acked (seconds since the start).
    acked_at: HashMap<u64, f64>,
    /// Where and when each number was received: its position and seconds since the start.
    received_at: HashMap<u64, (Position, f64)>,
    /// Events the subscriptions counted as dropped (gaps inside one stream).
    dropped: u64,
}

impl Probe {
    fn new(start: Instant) -> Probe {
        Probe {
            start,
            sent: 0,
            acked: BTreeSet::new(),
            failed: 0,
            received: BTreeSet::new(),
            duplicates: 0,
            acked_at: HashMap::new(),
            received_at: HashMap::new(),
            dropped: 0,
        }
    }

    /// One line per number sent: when it was acked, and where and when it was received
    /// (empty fields when it was not), for reading a run beside the brokers' logs.
    fn write_csv(&self, path: &std::path::Path) {
        let mut out = String::from("n,acked_at,stream,seq,received_at\n");
        for n in 1..=self.sent {
            let acked = self
                .acked_at
                .get(&n)
                .map(|t| format!("{t:.3}"))
                .unwrap_or_default();
            let (stream, seq, at) = self
                .received_at
                .get(&n)
                .map_or_else(Default::default, |(p, t)| {
                    (p.stream.to_string(), p.seq.to_string(), format!("{t:.3}"))
                });
            out.push_str(&format!("{n},{acked},{stream},{seq},{at}\n"));
        }
        let _ = std::fs::write(path, out);
    }

    /// The nearest numbers received before and after `n` (within 50), with where and when.
    fn neighbours(&self, n: u64) -> [Option<(u64, &(Position, f64))>; 2] {
        let received = |k: u64| self.received_at.get(&k).map(|r| (k, r));
        [
            (1..50).filter_map(|d| n.checked_sub(d)).find_map(received),
            (1..50).map(|d| n + d).find_map(received),
        ]
    }

    /// For each of the first `lost` numbers: when it was acked, and where and when the
    /// numbers received just before and after it were.
    fn around(&self, lost: &[u64]) -> Vec<String> {
        let show = |near: Option<(u64, &(Position, f64))>| {
            near.map_or_else(
                || "-".to_string(),
                |(k, (pos, at))| format!("#{k} at {}:{} ({at:.1}s)", pos.stream, pos.seq),
            )
        };
        lost.iter()
            .take(5)
            .map(|&n| {
                let [before, after] = self.neighbours(n);
                format!(
                    "#{n} acked at {:.1}s; received before: {}; after: {}",
                    self.acked_at.get(&n).copied().unwrap_or(f64::NAN),
                    show(before),
                    show(after),
                )
            })
            .collect()
    }

    /// The streams of the numbers received next to the first lost ones, and the sequence
    /// numbers around the gap in each: what to look for in the brokers' logs.
    fn gap_positions(&self, lost: &[u64]) -> Vec<(u64, u64, u64)> {
        lost.iter()
            .take(5)
            .flat_map(|&n| self.neighbours(n))
            .flatten()
            .map(|(_, (pos, _))| (pos.stream, pos.seq.saturating_sub(3), pos.seq + 3))
            .collect()
    }
}

async fn connect(cfg: &ClientConfig) -> starling_client::Client {
    loop {
        match starling_client::Client::connect(cfg.clone()).await {
            Ok(c) => return c,
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

/// Publishes numbered acked messages every [`PROBE_INTERVAL`] until stopped; an unacked
/// publish is counted and never retried under the same number.
fn start_probe_publisher(
    cfg: ClientConfig,
    probe: Arc<Mutex<Probe>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client = connect(&cfg).await;
        let mut seq = 0u64;
        let mut errors_in_a_row = 0;
        while !stop.load(Ordering::SeqCst) {
            seq += 1;
            let sent = tokio::time::timeout(
                Duration::from_secs(5),
                client.publish_acked(TOPIC, seq.to_string().into_bytes()),
            )
            .await;
            let mut p = probe.lock().await;
            p.sent = seq;
            if matches!(sent, Ok(Ok(()))) {
                p.acked.insert(seq);
                let at = p.start.elapsed().as_secs_f64();
                p.acked_at.insert(seq, at);
                errors_in_a_row = 0;
            } else {
                p.failed += 1;
                errors_in_a_row += 1;
            }
            drop(p);
            if errors_in_a_row >= 3 {
                client.close().await;
                client = connect(&cfg).await;
                errors_in_a_row = 0;
            }
            tokio::time::sleep(PROBE_INTERVAL).await;
        }
        client.close().await;
    })
}

/// Subscribes and records every probe number received. The SDK subscription resubscribes by
/// itself; should it give up, a new one resumes from where the last one stopped.
fn start_probe_subscriber(
    cfg: ClientConfig,
    probe: Arc<Mutex<Probe>>,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<u32> {
    tokio::spawn(async move {
        let mut subscriptions = 0;
        let mut resume = None;
        while !stop.load(Ordering::SeqCst) {
            let client = connect(&cfg).await;
            let Ok(mut sub) = client.subscribe_from(TOPIC, resume).await else {
                client.close().await;
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            };
            subscriptions += 1;
            loop {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                match tokio::time::timeout(Duration::from_secs(1), sub.next_event()).await {
                    Err(_) => continue,
                    Ok(Some(Ok(ev))) => {
                        if let Some(n) = std::str::from_utf8(&ev.payload)
                            .ok()
                            .and_then(|s| s.parse::<u64>().ok())
                        {
                            let mut p = probe.lock().await;
                            if !p.received.insert(n) {
                                p.duplicates += 1;
                            }
                            let at = p.start.elapsed().as_secs_f64();
                            p.received_at.insert(n, (ev.position, at));
                        }
                    }
                    Ok(_) => break,
                }
            }
            resume = sub.resume_point().or(resume);
            probe.lock().await.dropped += sub.dropped_events();
            client.close().await;
        }
        subscriptions
    })
}

/// Reads the keys written before the moves right after a move settled, and again every second
/// until all are readable or [`KEYS_SETTLE`] passed (the hand-off to the keys' new owners runs
/// in the background). Returns the keys readable at once, those readable at the end, and how
/// long that took.
async fn keys_after_move(ns: &TestNamespace) -> (Vec<u32>, Vec<u32>, Duration) {
    let start = Instant::now();
    let at_once = readable_keys(ns).await;
    let mut now = at_once.clone();
    while now.len() < KEYS as usize && start.elapsed() < KEYS_SETTLE {
        tokio::time::sleep(Duration::from_secs(1)).await;
        now = readable_keys(ns).await;
    }
    (at_once, now, start.elapsed())
}

/// The cache keys written before the moves that are still readable, by number.
async fn readable_keys(ns: &TestNamespace) -> Vec<u32> {
    let reader = ns.client(CLUSTER).await.expect("client");
    let mut found = Vec::new();
    for i in 0..KEYS {
        if let Ok(Some(v)) = reader.cache_get(format!("auto-key-{i}")).await
            && v.as_ref() == format!("value-{i}").as_bytes()
        {
            found.push(i);
        }
    }
    reader.close().await;
    found
}

async fn tier_events(ns: &TestNamespace) -> Vec<String> {
    let events = ns
        .api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("events");
    events
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("TierChanged"))
        .filter_map(|e| e.note)
        .collect()
}

#[tokio::test]
async fn autoscaling_moves_small_to_medium_and_back() {
    let env = Env::new().await.expect("e2e environment");
    let harness = cli().with_file_name("starling-bench");
    assert!(
        cli().is_file() && harness.is_file(),
        "the load generator {} (which runs {}) is missing: cargo build --release -p starling-cli -p starling-bench",
        cli().display(),
        harness.display()
    );
    let ns = env.namespace("autoscale").await.expect("namespace");
    ns.create_cluster(
        CLUSTER,
        BrokerClusterSpec {
            tier: Tier::Small,
            autoscaling: Some(AutoscalingSpec {
                enabled: true,
                min_tier: Tier::Small,
                max_tier: Tier::Medium,
                scale_up_threshold: 80,
                scale_up_window: SCALE_UP_WINDOW.into(),
                scale_down_threshold: 50,
                scale_down_window: SCALE_DOWN_WINDOW.into(),
                cooldown: COOLDOWN.into(),
                scrape_interval: SCRAPE_INTERVAL.into(),
            }),
            // Each topic batch and every ownership, upstream and resume step, in the pod logs
            // the test keeps (a lost message is looked up in them).
            config: Some(ConfigOverrides {
                log_level: Some(BROKER_LOG.into()),
                ..ConfigOverrides::default()
            }),
            ..Default::default()
        },
    )
    .await
    .expect("create");
    let logs = PodLogs::follow(
        env.client.clone(),
        &ns.name,
        CLUSTER,
        log_dir().join(&ns.name),
    );
    ns.wait_ready(CLUSTER).await.expect("Ready");
    let addr = service_addr(&ns).await;
    // Every client here (the probe, the cache reader, the bench load) is the suite's
    // full-access BrokerUser; the bench reads its Secret from a directory.
    let user = ns.full_access_user(CLUSTER).await.expect("BrokerUser");
    let creds = user.write_dir().expect("credentials directory");

    // `kubectl scale` (the /scale subresource) cannot fight the tier autoscaler.
    let scaled = ns
        .clusters()
        .patch_scale(
            CLUSTER,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"replicas": 3}})),
        )
        .await;
    let refusal = scaled.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        refusal.contains("replicas cannot be set while autoscaling.enabled is true"),
        "a /scale write is refused while autoscaling is enabled: {refusal:?}"
    );
    let mut rec = Recorder::new();

    // Cache keys written before any move.
    let writer = ns.client(CLUSTER).await.expect("client");
    for i in 0..KEYS {
        writer
            .cache_put(
                format!("auto-key-{i}"),
                format!("value-{i}"),
                Some(Duration::from_secs(3600)),
            )
            .await
            .unwrap_or_else(|e| panic!("put {i}: {e}"));
    }
    writer.close().await;

    // The acked probe runs through both moves.
    let probe = Arc::new(Mutex::new(Probe::new(rec.start)));
    let probe_stop = Arc::new(AtomicBool::new(false));
    let subscriber = start_probe_subscriber(user.config(&addr), probe.clone(), probe_stop.clone());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let publish_stop = Arc::new(AtomicBool::new(false));
    let publisher = start_probe_publisher(user.config(&addr), probe.clone(), publish_stop.clone());

    // Low load: the autoscaler observes and stays small.
    watch_until(&ns, &mut rec, "idle", &probe, Tier::Small, |bc| {
        bc.status
            .as_ref()
            .and_then(|s| s.autoscaling.as_ref())
            .is_some_and(|a| a.recommendation == "Stay" && a.pods_scraped == 1)
    })
    .await;

    // Load above 80% of small's capacity: small → medium.
    let load_stop = Arc::new(AtomicBool::new(false));
    let load = start_load(
        addr.clone(),
        creds.path().to_path_buf(),
        user.server_name().to_string(),
        log_dir().join(&ns.name),
        load_stop.clone(),
    );
    let (up, up_started) = watch_until(&ns, &mut rec, "load", &probe, Tier::Small, |bc| {
        settled_at(bc, Tier::Medium, 3)
    })
    .await;
    let up_settled = probe.lock().await.sent;
    let a = up
        .status
        .and_then(|s| s.autoscaling)
        .expect("status.autoscaling");
    let reason = a.last_change_reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("tier small→medium: publish ")
            && reason.contains(&format!("> 80% of 200 for {SCALE_UP_WINDOW}")),
        "{reason}"
    );
    assert!(a.last_change_time.is_some());
    let events = tier_events(&ns).await;
    assert!(
        events.iter().any(|n| n.starts_with("tier small→medium")),
        "TierChanged event: {events:?}"
    );
    assert_eq!(ns.broker_pods(CLUSTER).await.expect("pods").len(), 3);
    let (at_once_up, keys_after_up, took_up) = keys_after_move(&ns).await;

    // Stop the load: medium → small (the probe's 10 msg/s is below 50% of 200).
    load_stop.store(true, Ordering::SeqCst);
    let bench_runs = load.await.expect("load task");
    let (down, down_started) = watch_until(&ns, &mut rec, "quiet", &probe, Tier::Medium, |bc| {
        settled_at(bc, Tier::Small, 1)
    })
    .await;
    let down_settled = probe.lock().await.sent;
    let reason = down
        .status
        .and_then(|s| s.autoscaling)
        .and_then(|a| a.last_change_reason)
        .unwrap_or_default();
    assert!(
        reason.starts_with("tier medium→small: publish "),
        "{reason}"
    );
    let events = tier_events(&ns).await;
    assert!(
        events.iter().any(|n| n.starts_with("tier medium→small")),
        "TierChanged event: {events:?}"
    );
    let pods = ns.broker_pods(CLUSTER).await.expect("pods");
    assert_eq!(pods.len(), 1, "{pods:?}");

    // Cache keys written before both moves are still there.
    let (at_once_down, keys_after_down, took_down) = keys_after_move(&ns).await;
    println!(
        "cache: after small→medium {}/{KEYS} keys readable at once, {}/{KEYS} after {:.1}s {keys_after_up:?}; after medium→small {}/{KEYS} at once, {}/{KEYS} after {:.1}s {keys_after_down:?}",
        at_once_up.len(),
        keys_after_up.len(),
        took_up.as_secs_f64(),
        at_once_down.len(),
        keys_after_down.len(),
        took_down.as_secs_f64(),
    );
    // The probe: stop publishing, give the last deliveries up to 30 s, then compare. Every
    // acked message must have arrived, those acked during the moves included.
    tokio::time::sleep(Duration::from_secs(2)).await;
    publish_stop.store(true, Ordering::SeqCst);
    publisher.await.expect("publisher");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let p = probe.lock().await;
        if p.acked.is_subset(&p.received) || Instant::now() > deadline {
            break;
        }
        drop(p);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    probe_stop.store(true, Ordering::SeqCst);
    let subscriptions = subscriber.await.expect("subscriber");
    let p = probe.lock().await;
    let lost: Vec<u64> = p.acked.difference(&p.received).copied().collect();
    let moving = |n: u64| {
        (up_started..=up_settled).contains(&n) || (down_started..=down_settled).contains(&n)
    };
    let (lost_moving, lost_steady): (Vec<u64>, Vec<u64>) = lost.iter().partition(|n| moving(**n));
    let acked_moving = p.acked.iter().filter(|n| moving(**n)).count();
    println!(
        "probe: {} acked ({} during the moves: #{up_started}..#{up_settled} and #{down_started}..#{down_settled}), {} unacked (never retried), {} received; lost while steady: {} {:?}; lost during the moves: {} of {} ({:.1}%) {:?}; {} received twice; {} counted as dropped; {} subscriptions; {} bench runs",
        p.acked.len(),
        acked_moving,
        p.failed,
        p.received.len(),
        lost_steady.len(),
        lost_steady,
        lost_moving.len(),
        acked_moving,
        100.0 * lost_moving.len() as f64 / acked_moving.max(1) as f64,
        lost_moving,
        p.duplicates,
        p.dropped,
        subscriptions,
        bench_runs
    );
    p.write_csv(&logs.dir().join("probe.csv"));
    println!(
        "broker logs and probe.csv: {} (second 0 of the probe is {:.3} s after the Unix epoch, UTC)",
        logs.dir().display(),
        rec.start_unix
    );
    if !lost.is_empty() {
        for line in p.around(&lost) {
            println!("lost {line}");
        }
        let gaps = p.gap_positions(&lost);
        let matters = |line: &str| {
            gaps.iter().any(|&(stream, lo, hi)| {
                if !line.contains(&format!("stream={stream}"))
                    && !line.contains(&format!("stream: {stream}"))
                {
                    return false;
                }
                // Of the per-batch lines, only those near the gap.
                !line.contains(" delivered ")
                    || (lo..=hi).any(|q| line.contains(&format!(" seq={q} ")))
            }) || line.contains("membership")
                || line.contains("upstream")
                || line.contains("draining")
        };
        for line in logs.grep(&matters, 120) {
            println!("log {line}");
        }
    }
    assert!(p.acked.len() > 100, "the probe published through the moves");
    assert!(
        acked_moving > 50,
        "the probe published during the moves ({acked_moving})"
    );
    assert!(
        lost.is_empty(),
        "acked messages lost: {} while steady {lost_steady:?}, {} during the moves {lost_moving:?}",
        lost_steady.len(),
        lost_moving.len()
    );
    assert_eq!(
        (keys_after_up.len(), keys_after_down.len()),
        (KEYS as usize, KEYS as usize),
        "cache keys written before the moves must be readable within {KEYS_SETTLE:?} after each"
    );
    ns.delete().await;
}
