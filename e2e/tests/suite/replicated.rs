//! Replicated durable topics on the real cluster: three brokers with a volume each, and a
//! durable topic acked `persisted`, made durable with three replicas fsynced `always` by a
//! `BrokerTopic` (`orders.>`, `replicas: 3`), not by `spec.durability`: its `Ready` condition
//! is `Accepted`, and its status lists the topic with its leader and three in-sync replicas
//! as the brokers report them.
//!
//! - **Node loss.** Two publishers send persisted publishes, each connected to one of the two
//!   brokers that do not lead the topic (they forward to the leader). The leader's pod is
//!   force-deleted together with its PersistentVolumeClaim: the StatefulSet recreates the pod
//!   on a new, empty volume, and its replica is caught up by the other two under the same
//!   identity (the same replica id, still a voter). Every acked message is read back once, in
//!   each publisher's order, from the start at the new pod and at a survivor, and the longest
//!   time the topic acked no publish around the loss is printed and bounded. The brokers' logs
//!   are kept (`starling_e2e::pod_logs`); a gap past the bound prints the publishers' errors
//!   and what the brokers logged during it.
//! - **Safe roll.** A profile change rolls the three pods one at a time while a publisher sends
//!   persisted publishes through the Service. The operator holds the roll (the StatefulSet's
//!   `RollingUpdate` partition, seen above 0 during the roll and back at 0 at its end) and lets
//!   the next pod restart only while every other broker reports its replicas in sync
//!   (`GET /replicas`): a pod is deleted only while the replicas on the other two report
//!   themselves in sync. The publisher sees no error that is not retryable, the topic keeps
//!   acking throughout, and every acked message is read back at each pod.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime};

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{DeleteParams, ListParams};
use starling_client::{Client, ClientConfig, ClientError, Position, ProtocolError};
use starling_e2e::credentials::UserCredentials;
use starling_e2e::pod_logs::{PodLogs, log_dir};
use starling_e2e::topics::topic_ready;
use starling_e2e::{Env, TestNamespace, replicas, wait};
use starling_operator::crd::BrokerClusterSpec;
use starling_testkit::payload::{payload, try_index};
use tokio::sync::watch;

const CLUSTER: &str = "ledger";
const TOPIC: &str = "orders.r3";
/// A resume position older than any: everything the replica's log holds.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };
/// How long one publish may take before the publisher gives up on it (not acked) and sends
/// the next one, under a new number.
const PUBLISH_TIMEOUT: Duration = Duration::from_secs(2);
/// Publisher `p` numbers its messages from `p * PUBLISHER_SPAN`.
const PUBLISHER_SPAN: u32 = 100_000_000;
/// The number of the message that creates the topic.
const FIRST: u32 = 9 * PUBLISHER_SPAN;
/// The longest the topic may ack no publish: around the loss of its leader (the issue's
/// target for the fail-over itself is 5 s; this bound also covers the publisher's own
/// timeout), and at any time during a roll.
const MAX_GAP: Duration = Duration::from_secs(10);

/// The brokers' log filter: every leader change, peer link and replica RPC step is in the pod
/// logs the leader-loss test keeps (a long ack gap is looked up in them).
const BROKER_LOG: &str =
    "info,starling_broker::cluster=debug,starling_broker::durable::replicated=debug,openraft=info";

/// The BrokerTopic that makes [`TOPIC`] durable with three replicas.
const BROKER_TOPIC: &str = "orders";

/// Three brokers with volumes; no topic is durable by the cluster's own knobs.
fn r3_spec() -> BrokerClusterSpec {
    serde_json::from_value(serde_json::json!({
        "tier": "small",
        "replicas": 3,
        "storage": { "size": "1Gi" },
        "config": { "ack_level": "persisted", "log_level": BROKER_LOG },
    }))
    .expect("spec")
}

/// Creates the cluster and the BrokerTopic `orders` (`orders.>`, three replicas, fsync
/// `always`), and waits until both are Ready, the BrokerTopic with reason `Accepted`.
async fn create_r3_cluster(ns: &TestNamespace) {
    ns.create_cluster(CLUSTER, r3_spec()).await.expect("create");
    ns.create_topic(
        BROKER_TOPIC,
        CLUSTER,
        serde_json::json!({ "topic": "orders.>", "replicas": 3, "fsync": "always" }),
    )
    .await
    .expect("create the BrokerTopic");
    ns.wait_ready(CLUSTER).await.expect("Ready");
    let topic = ns
        .wait_topic_ready(BROKER_TOPIC)
        .await
        .expect("the BrokerTopic is Ready");
    let (status, reason, message) = topic_ready(&topic).expect("a Ready condition");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Accepted"),
        "{message}"
    );
}

/// Waits until the BrokerTopic's status lists [`TOPIC`] with a leader and all three replicas
/// in sync (the operator reads the brokers' `GET /replicas` at least every 30 s).
async fn assert_listed_in_sync(ns: &TestNamespace) {
    let entry = ns
        .wait_topic_listed(BROKER_TOPIC, TOPIC, 3, Duration::from_secs(90))
        .await
        .expect("the BrokerTopic's status lists the topic");
    eprintln!("BrokerTopic {BROKER_TOPIC} status: {entry}");
    assert_eq!(entry["replicas"], 3, "{entry}");
}

/// What the publishers saw.
#[derive(Default)]
struct Log {
    /// Acked message numbers, with the time of the ack.
    acked: Vec<(u32, Instant)>,
    /// Failed publishes and connections: when, what, and whether the error is retryable.
    errors: Vec<(Instant, String, bool)>,
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    log.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether a publisher may simply publish again after `e` (the broker was draining, the
/// leader changed, the connection went away with its broker).
fn retryable(e: &ClientError) -> bool {
    match e {
        ClientError::Connect(_)
        | ClientError::Connection(_)
        | ClientError::Io(_)
        | ClientError::Timeout
        | ClientError::Closed
        | ClientError::Protocol(ProtocolError::EndedEarly(_) | ProtocolError::TruncatedFrame) => {
            true
        }
        ClientError::Server { code, .. } => {
            matches!(code.name(), "unavailable" | "moved" | "overloaded")
        }
        _ => false,
    }
}

/// Publishes numbered messages from `first` on until `stop`, each acked `persisted` or
/// given up after [`PUBLISH_TIMEOUT`] (then not counted as acked; the next publish takes the
/// next number, so a message is never published twice), connecting with `cfg` again after
/// a failure that may have cost the connection.
fn publisher(
    cfg: ClientConfig,
    first: u32,
    log: Arc<Mutex<Log>>,
    stop: watch::Receiver<bool>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut client: Option<Client> = None;
        let mut i = first;
        while !*stop.borrow() {
            let Some(c) = client.as_ref() else {
                match tokio::time::timeout(PUBLISH_TIMEOUT, Client::connect(cfg.clone())).await {
                    Ok(Ok(c)) => client = Some(c),
                    Ok(Err(e)) => {
                        lock(&log).errors.push((
                            Instant::now(),
                            format!("connect: {e}"),
                            retryable(&e),
                        ));
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(_) => {
                        lock(&log)
                            .errors
                            .push((Instant::now(), "connect timed out".into(), true));
                    }
                }
                continue;
            };
            match tokio::time::timeout(PUBLISH_TIMEOUT, c.publish_acked(TOPIC, payload(i))).await {
                Ok(Ok(())) => lock(&log).acked.push((i, Instant::now())),
                Ok(Err(e)) => {
                    // A lost connection, or a refusal (a draining broker refuses every
                    // publish until it closes its connections): start over on a new
                    // connection, which the Service gives to a broker that is Ready.
                    let lost_connection = matches!(
                        e,
                        ClientError::Connection(_)
                            | ClientError::Closed
                            | ClientError::Io(_)
                            | ClientError::Server { .. }
                    );
                    lock(&log)
                        .errors
                        .push((Instant::now(), e.to_string(), retryable(&e)));
                    if lost_connection {
                        client = None;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(_) => {
                    // The broker may be gone without closing: start over on a new connection.
                    lock(&log)
                        .errors
                        .push((Instant::now(), "publish timed out".into(), true));
                    client = None;
                }
            }
            i += 1;
        }
        if let Some(c) = client {
            c.close().await;
        }
    })
}

/// Waits until `n` more publishes than `from` are acked; the count then.
async fn acked_past(log: &Mutex<Log>, from: usize, n: usize, what: &str) -> usize {
    wait::until(what, Duration::from_secs(180), || async {
        let len = lock(log).acked.len();
        (len >= from + n).then_some(len)
    })
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Creates the topic with a first persisted publish through the Service (the replicas
/// elect their first leader meanwhile).
async fn create_topic(ns: &TestNamespace, user: &UserCredentials) -> (u32, Instant) {
    let client = ns.client_as(CLUSTER, user).await.expect("client");
    wait::until(
        "the topic takes its first persisted publish",
        Duration::from_secs(120),
        || async {
            tokio::time::timeout(PUBLISH_TIMEOUT, client.publish_acked(TOPIC, payload(FIRST)))
                .await
                .ok()?
                .ok()
        },
    )
    .await
    .expect("the topic is created");
    client.close().await;
    (FIRST, Instant::now())
}

/// Every event of the topic from its start, read at `addr` (a pod, `<ip>:7400`) without
/// cluster routing, so what is read is that broker's replica.
async fn read_back(user: &UserCredentials, addr: String, at: &str) -> Vec<u32> {
    let client = starling_e2e::kube_env::connect_retrying(
        &format!("reader at {at}"),
        user.config(addr).without_cluster_routing(),
    )
    .await
    .expect("reader connects");
    let mut sub = client
        .subscribe_from(TOPIC, Some(FROM_THE_START))
        .await
        .unwrap_or_else(|e| panic!("{at}: resume from the start: {e}"));
    let mut got = Vec::new();
    let mut wait_for = Duration::from_secs(15);
    while let Ok(Some(ev)) = tokio::time::timeout(wait_for, sub.next_event()).await {
        got.push(try_index(&ev.expect("event").payload).expect("a 4-byte index"));
        wait_for = Duration::from_secs(3);
    }
    client.close().await;
    got
}

/// Reads the topic back at `addr` until every acked message is there (the replica may still
/// be applying the last entries), then checks: every acked message once, no message twice,
/// each publisher's messages in the order it published them.
async fn check_at(user: &UserCredentials, addr: String, at: &str, acked: &[u32]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let got = read_back(user, addr.clone(), at).await;
        let have: HashSet<u32> = got.iter().copied().collect();
        let complete = acked.iter().all(|a| have.contains(a));
        if complete || Instant::now() > deadline {
            let mut seen = HashSet::new();
            for g in &got {
                assert!(seen.insert(*g), "{at}: message {g} read twice");
            }
            let mut last: BTreeMap<u32, u32> = BTreeMap::new();
            for g in &got {
                if let Some(prev) = last.insert(g / PUBLISHER_SPAN, *g) {
                    assert!(prev < *g, "{at}: {g} read after {prev}: out of order");
                }
            }
            let lost: Vec<u32> = acked
                .iter()
                .copied()
                .filter(|a| !seen.contains(a))
                .collect();
            assert!(
                lost.is_empty(),
                "{at}: {} of {} acked messages lost: {:?}",
                lost.len(),
                acked.len(),
                &lost[..lost.len().min(20)]
            );
            eprintln!(
                "{at}: read back {} messages, every one of the {} acked",
                got.len(),
                acked.len()
            );
            return;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The longest time without an ack (of any publisher) from `from` on: from `from` to the
/// first ack, and between consecutive acks after it; and where it started. Counted from
/// `from`, not from the last ack before it: that may be far older than anything measured
/// (the topic's creating publish, acked before the test waited up to 30 s for the operator's
/// status and started the publishers), and counting from it reported a 28 s "gap" before the
/// loss that no broker caused.
fn longest_gap(acked: &[(u32, Instant)], from: Instant) -> (Duration, Instant) {
    let mut times: Vec<Instant> = acked.iter().map(|a| a.1).collect();
    times.sort();
    let mut best = (Duration::ZERO, from);
    let mut prev: Option<Instant> = Some(from);
    for t in times.into_iter().filter(|t| *t >= from) {
        if let Some(p) = prev {
            let gap = t.duration_since(p);
            if gap > best.0 {
                best = (gap, p);
            }
        }
        prev = Some(t);
    }
    best
}

/// Stops the publishers and returns what they saw.
async fn stop_publishers(
    stop: watch::Sender<bool>,
    publishers: Vec<tokio::task::JoinHandle<()>>,
    log: &Mutex<Log>,
) -> (Vec<(u32, Instant)>, Vec<(Instant, String, bool)>) {
    let _ = stop.send(true);
    for p in publishers {
        let _ = tokio::time::timeout(Duration::from_secs(30), p).await;
    }
    let l = lock(log);
    (l.acked.clone(), l.errors.clone())
}

/// The publishers' errors from a second before `from` on, as `+<seconds> <error> (xN)`, runs
/// of the same error folded into one line.
fn error_timeline(errors: &[(Instant, String, bool)], from: Instant) -> Vec<String> {
    let mut sorted: Vec<&(Instant, String, bool)> = errors.iter().collect();
    sorted.sort_by_key(|e| e.0);
    let mut lines: Vec<(f64, String, usize)> = Vec::new();
    for (at, what, _) in sorted {
        let secs = if *at >= from {
            at.duration_since(from).as_secs_f64()
        } else {
            -from.duration_since(*at).as_secs_f64()
        };
        if secs < -1.0 {
            continue;
        }
        match lines.last_mut() {
            Some(last) if last.1 == *what => last.2 += 1,
            _ => lines.push((secs, what.clone(), 1)),
        }
    }
    lines
        .into_iter()
        .map(|(secs, what, n)| format!("{secs:+.3}s {what} (x{n})"))
        .collect()
}

/// What the brokers said about the topic's replicas over the whole test, shortened to fit a
/// failure message (CI keeps only its end): replica opens, creation, leaders, moves, removals,
/// panics, the brokers' own start, drain and stop, and their warnings and errors; each line the pod's file name and the broker's own
/// time and message, the last [`STORY_LINES`] of them.
fn replica_story(logs: &PodLogs) -> Vec<String> {
    const STORY_LINES: usize = 60;
    let lines = logs.grep(
        &|l: &str| {
            l.contains("replicated topic:")
                || l.contains("replica move:")
                || l.contains("panicked")
                || l.contains("starling_broker::broker:")
                || (l.contains("starling_broker")
                    && (l.contains(" WARN ") || l.contains(" ERROR ")))
        },
        2000,
    );
    // `<file>: <kubelet time> <broker time>  LEVEL target: message`, in time order over
    // every pod.
    let mut timed: Vec<(String, String)> = lines
        .iter()
        .map(|l| {
            let mut parts = l.splitn(3, ' ');
            let file = parts.next().unwrap_or("");
            let kubelet = parts.next().unwrap_or("").to_string();
            let rest: String = parts.next().unwrap_or("").chars().take(260).collect();
            (kubelet, format!("{file} {rest}"))
        })
        .collect();
    timed.sort();
    let short: Vec<String> = timed.into_iter().map(|(_, l)| l).collect();
    let skip = short.len().saturating_sub(STORY_LINES);
    short.into_iter().skip(skip).collect()
}

/// The wall time of `at`, given that `base` was `base_wall`.
fn wall_at(base_wall: SystemTime, base: Instant, at: Instant) -> Timestamp {
    let wall = if at >= base {
        base_wall + at.duration_since(base)
    } else {
        base_wall - base.duration_since(at)
    };
    Timestamp::try_from(wall).unwrap_or(Timestamp::UNIX_EPOCH)
}

/// `at` moved by `secs` seconds, to the second, as the pod logs' timestamps begin
/// (`2026-12-07T10:00:00`).
fn second_of(at: Timestamp, secs: i64) -> String {
    let moved = at
        .checked_add(k8s_openapi::jiff::SignedDuration::from_secs(secs))
        .unwrap_or(at);
    moved.to_string().chars().take(19).collect()
}

fn pod_addr(ip: Option<IpAddr>, name: &str) -> String {
    format!(
        "{}:7400",
        ip.unwrap_or_else(|| panic!("pod {name} has no IP"))
    )
}

#[tokio::test]
async fn losing_the_leaders_pod_and_volume_loses_no_acked_message() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("r3-loss").await.expect("namespace");
    let logs = PodLogs::follow(
        env.client.clone(),
        &ns.name,
        CLUSTER,
        log_dir().join(&ns.name),
    );
    create_r3_cluster(&ns).await;
    let user = ns.full_access_user(CLUSTER).await.expect("BrokerUser");
    let first = create_topic(&ns, &user).await;
    assert_listed_in_sync(&ns).await;

    let leader = replicas::leader_pod(&ns, CLUSTER, TOPIC, Duration::from_secs(60))
        .await
        .expect("the topic has a leader");
    let pods = ns.broker_pods(CLUSTER).await.expect("pods");
    let old = pods
        .iter()
        .find(|p| p.name == leader)
        .expect("the leader's pod")
        .clone();
    let old_replica = replicas::of_topic(&old, TOPIC)
        .await
        .expect("the leader's replica");
    let followers: Vec<_> = pods.iter().filter(|p| p.name != leader).cloned().collect();
    assert_eq!(followers.len(), 2, "two followers: {pods:?}");
    eprintln!(
        "leader {leader} (replica {:016x}); publishing through {:?}",
        old_replica.replica,
        followers.iter().map(|p| &p.name).collect::<Vec<_>>()
    );

    let log: Arc<Mutex<Log>> = Arc::default();
    lock(&log).acked.push(first);
    let (stop_tx, stop_rx) = watch::channel(false);
    let publishers: Vec<_> = followers
        .iter()
        .enumerate()
        .map(|(n, p)| {
            let cfg = user
                .config(pod_addr(p.ip, &p.name))
                .without_cluster_routing();
            publisher(
                cfg,
                n as u32 * PUBLISHER_SPAN,
                Arc::clone(&log),
                stop_rx.clone(),
            )
        })
        .collect();
    let at_loss = acked_past(
        &log,
        1,
        300,
        "persisted publishes acked through both followers",
    )
    .await;

    // The leader's claim is deleted first (its protection finalizer holds it while a pod
    // names it), then its pod, at once.
    let claims = ns.api::<PersistentVolumeClaim>();
    let claim = format!("data-{leader}");
    let old_claim = claims.get(&claim).await.expect("the leader's claim").uid();
    claims
        .delete(&claim, &DeleteParams::default())
        .await
        .expect("delete the leader's claim");
    let lost_at = Instant::now();
    let lost_wall = SystemTime::now();
    ns.api::<Pod>()
        .delete(&leader, &DeleteParams::default().grace_period(0))
        .await
        .expect("force-delete the leader's pod");

    // The StatefulSet recreates the pod and a claim. A new pod that still names the old
    // claim (it was terminating when the pod was made) cannot start: it is deleted again,
    // until a new claim is provisioned.
    let back = wait::until(
        "the pod back on a new volume and Ready",
        Duration::from_secs(300),
        || async {
            let current = claims.get_opt(&claim).await.ok()?;
            let fresh = current
                .as_ref()
                .is_some_and(|c| c.uid() != old_claim && c.metadata.deletion_timestamp.is_none());
            let pods = ns.broker_pods(CLUSTER).await.ok()?;
            let pod = pods.iter().find(|p| p.name == leader && p.uid != old.uid);
            if !fresh {
                if pod.is_some_and(|p| !p.ready) {
                    let _ = ns
                        .api::<Pod>()
                        .delete(&leader, &DeleteParams::default().grace_period(0))
                        .await;
                }
                return None;
            }
            pod.filter(|p| p.ready).cloned()
        },
    )
    .await
    .expect("the lost broker comes back");
    let back_after = lost_at.elapsed();
    let at_back = lock(&log).acked.len();
    acked_past(
        &log,
        at_back,
        200,
        "publishes acked after the pod came back",
    )
    .await;
    // Caught up under the same identity: the same replica id, one of the same voters, in sync.
    let caught_up = wait::until(
        "the new pod's replica in sync",
        Duration::from_secs(60),
        || async {
            replicas::of_topic(&back, TOPIC)
                .await
                .filter(|r| r.in_sync())
        },
    )
    .await
    .expect("the emptied replica catches up");
    assert_eq!(
        caught_up.replica, old_replica.replica,
        "the same replica id"
    );
    let (acked, errors) = stop_publishers(stop_tx, publishers, &log).await;

    let (gap, gap_from) = longest_gap(
        &acked,
        lost_at
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(lost_at),
    );
    let first_after = acked
        .iter()
        .map(|a| a.1)
        .filter(|t| *t >= lost_at)
        .min()
        .expect("acks after the loss");
    eprintln!(
        "{} acked ({} before the loss); first ack {:?} after the loss; longest time without an \
         ack {gap:?}, from {:?} after the loss; the pod Ready on its new volume {back_after:?} \
         after the loss; {} failed publishes",
        acked.len(),
        at_loss,
        first_after.duration_since(lost_at),
        gap_from.saturating_duration_since(lost_at),
        errors.len()
    );
    for line in error_timeline(&errors, lost_at) {
        eprintln!("  {line}");
    }
    if gap >= MAX_GAP {
        let start = wall_at(lost_wall, lost_at, gap_from);
        let end = wall_at(lost_wall, lost_at, gap_from + gap);
        eprintln!(
            "the gap: {start} to {end} (the loss at {}); broker logs in {}; what they said then:",
            wall_at(lost_wall, lost_at, lost_at),
            logs.dir().display()
        );
        let (from, to) = (second_of(start, -1), second_of(end, 1));
        for line in logs.grep(
            &|l: &str| {
                let at = l.get(..19).unwrap_or("");
                at >= from.as_str() && at <= to.as_str() && !l.contains(" TRACE ")
            },
            400,
        ) {
            eprintln!("  {line}");
        }
    }
    let fatal: Vec<&String> = errors.iter().filter(|e| !e.2).map(|e| &e.1).collect();
    assert!(fatal.is_empty(), "errors that are not retryable: {fatal:?}");
    assert!(
        gap < MAX_GAP,
        "the topic acked nothing for {gap:?}, from {:?} after the loss; the replicas' own \
         story over the whole test:\n{}",
        gap_from.saturating_duration_since(lost_at),
        replica_story(&logs).join("\n")
    );

    // Every acked message at the emptied broker (caught up) and at a survivor.
    let numbers: Vec<u32> = acked.iter().map(|a| a.0).collect();
    check_at(
        &user,
        pod_addr(back.ip, &back.name),
        "the new pod",
        &numbers,
    )
    .await;
    let survivor = &followers[0];
    check_at(
        &user,
        pod_addr(survivor.ip, &survivor.name),
        "a survivor",
        &numbers,
    )
    .await;
    ns.delete().await;
}

/// Per pod at the last look: whether its replica of the topic is in sync.
type InSync = BTreeMap<String, bool>;

/// The `RollingUpdate` partition of the cluster's StatefulSet (0 when unset), if it was read.
async fn partition(ns: &TestNamespace) -> Option<i32> {
    let sts = ns.api::<StatefulSet>().get(CLUSTER).await.ok()?;
    Some(
        sts.spec
            .and_then(|s| s.update_strategy)
            .and_then(|u| u.rolling_update)
            .and_then(|r| r.partition)
            .unwrap_or(0),
    )
}

/// One look at the roll: the pods, which are terminating, and each live pod's replica.
struct Look {
    /// (name, uid) of every broker pod, terminating or not.
    pods: Vec<(String, String, bool)>,
    /// Ready pods with the new config hash.
    rolled: usize,
    in_sync: InSync,
}

async fn look(ns: &TestNamespace, new_hash: Option<&str>) -> Option<Look> {
    let selector =
        format!("app.kubernetes.io/name=starling-broker,app.kubernetes.io/instance={CLUSTER}");
    let raw = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&selector))
        .await
        .ok()?;
    let pods: Vec<(String, String, bool)> = raw
        .items
        .iter()
        .map(|p| {
            (
                p.name_any(),
                p.uid().unwrap_or_default(),
                p.metadata.deletion_timestamp.is_some(),
            )
        })
        .collect();
    let states = ns.broker_pods(CLUSTER).await.ok()?;
    let rolled = states
        .iter()
        .filter(|p| p.ready && new_hash.is_some_and(|h| p.config_hash == h))
        .count();
    let mut in_sync = InSync::new();
    for p in &states {
        let terminating = pods
            .iter()
            .any(|(n, u, t)| *n == p.name && *u == p.uid && *t);
        let ok = !terminating
            && replicas::of_topic(p, TOPIC)
                .await
                .is_some_and(|r| r.in_sync());
        in_sync.insert(p.name.clone(), ok);
    }
    Some(Look {
        pods,
        rolled,
        in_sync,
    })
}

#[tokio::test]
async fn a_rolling_restart_keeps_an_r3_topic_writable_and_waits_for_its_replicas() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("r3-roll").await.expect("namespace");
    create_r3_cluster(&ns).await;
    let user = ns.full_access_user(CLUSTER).await.expect("BrokerUser");
    let first = create_topic(&ns, &user).await;
    assert_listed_in_sync(&ns).await;
    replicas::leader_pod(&ns, CLUSTER, TOPIC, Duration::from_secs(60))
        .await
        .expect("the topic has a leader");
    let before = ns.broker_pods(CLUSTER).await.expect("pods");
    let old_hash = before[0].config_hash.clone();

    let log: Arc<Mutex<Log>> = Arc::default();
    lock(&log).acked.push(first);
    let (stop_tx, stop_rx) = watch::channel(false);
    let cfg = user.config(ns.service_addr(CLUSTER).await.expect("address"));
    let publishers = vec![publisher(cfg, 0, Arc::clone(&log), stop_rx)];
    acked_past(&log, 1, 200, "persisted publishes acked before the roll").await;
    let mut last = wait::until(
        "every replica in sync before the roll",
        Duration::from_secs(60),
        || async {
            look(&ns, None)
                .await
                .filter(|l| l.in_sync.len() == 3 && l.in_sync.values().all(|s| *s))
        },
    )
    .await
    .expect("in sync before the roll");

    let rolling_from = Instant::now();
    ns.patch_spec(CLUSTER, serde_json::json!({ "profile": "latency" }))
        .await
        .expect("patch");
    // Watch the roll: each pod's deletion (seen terminating, gone, or replaced since the last
    // look) with what the other pods' replicas said at the look before.
    let mut deletions: BTreeMap<(String, String), InSync> = BTreeMap::new();
    let mut current: BTreeMap<String, String> = before
        .iter()
        .map(|p| (p.name.clone(), p.uid.clone()))
        .collect();
    let mut uids: BTreeMap<String, BTreeSet<String>> = current
        .iter()
        .map(|(n, u)| (n.clone(), BTreeSet::from([u.clone()])))
        .collect();
    let mut not_yet_in_sync: BTreeSet<String> = BTreeSet::new();
    // Every partition the StatefulSet was seen at during the roll (the operator holds it).
    let mut partitions: BTreeSet<i32> = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(420);
    let new_hash = loop {
        if let Some(p) = partition(&ns).await {
            partitions.insert(p);
        }
        let target = ns
            .clusters()
            .get(CLUSTER)
            .await
            .ok()
            .and_then(|bc| bc.status)
            .and_then(|s| s.config_hash)
            .filter(|h| *h != old_hash);
        let Some(now) = look(&ns, target.as_deref()).await else {
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        for (name, uid) in current.clone() {
            let here = now.pods.iter().find(|(n, _, _)| *n == name);
            let deleted = match here {
                None => true,
                Some((_, u, terminating)) => *u != uid || *terminating,
            };
            if deleted {
                deletions
                    .entry((name.clone(), uid.clone()))
                    .or_insert_with(|| others(&last.in_sync, &name));
            }
            if let Some((_, u, _)) = here {
                current.insert(name.clone(), u.clone());
                uids.entry(name.clone()).or_default().insert(u.clone());
            }
        }
        for (name, ok) in &now.in_sync {
            let restarted = uids.get(name).is_some_and(|u| u.len() > 1);
            if restarted && !ok {
                not_yet_in_sync.insert(name.clone());
            }
        }
        let done = now.rolled == 3 && now.pods.len() == 3 && now.pods.iter().all(|p| !p.2);
        last = now;
        if let (true, Some(hash)) = (done, target) {
            break hash;
        }
        assert!(
            Instant::now() < deadline,
            "the roll did not finish: {:?}",
            last.pods
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    };
    let roll_took = rolling_from.elapsed();
    ns.wait_ready(CLUSTER).await.expect("Ready after the roll");
    // The operator held the roll: the partition was above 0 while pods restarted, and is back
    // at 0 once every pod runs the new revision.
    assert!(
        partitions.iter().any(|p| *p > 0),
        "the partition was never seen above 0 during the roll: {partitions:?}"
    );
    wait::until(
        "the partition back at 0",
        Duration::from_secs(60),
        || async { (partition(&ns).await == Some(0)).then_some(()) },
    )
    .await
    .expect("the partition returns to 0 after the roll");
    let at = lock(&log).acked.len();
    acked_past(&log, at, 200, "publishes acked after the roll").await;
    let (acked, errors) = stop_publishers(stop_tx, publishers, &log).await;

    // Each pod was deleted once, each time with the other two in sync.
    for (name, seen) in &uids {
        assert_eq!(seen.len(), 2, "{name} replaced exactly once: {seen:?}");
    }
    assert_eq!(deletions.len(), 3, "three deletions: {deletions:?}");
    for ((name, _), others) in &deletions {
        assert!(
            others.len() == 2 && others.values().all(|s| *s),
            "{name} was deleted while the other replicas were not all in sync: {others:?}"
        );
    }
    let fatal: Vec<&String> = errors.iter().filter(|e| !e.2).map(|e| &e.1).collect();
    assert!(fatal.is_empty(), "errors that are not retryable: {fatal:?}");
    let (gap, gap_from) = longest_gap(&acked, rolling_from);
    eprintln!(
        "roll to {new_hash} took {roll_took:?}; {} acked, {} retryable errors; longest time \
         without an ack {gap:?}, {:?} into the roll; restarted pods seen not yet in sync: \
         {not_yet_in_sync:?}; partitions seen: {partitions:?}",
        acked.len(),
        errors.len(),
        gap_from.saturating_duration_since(rolling_from)
    );
    assert!(
        gap < MAX_GAP,
        "the topic acked nothing for {gap:?} during the roll"
    );

    let numbers: Vec<u32> = acked.iter().map(|a| a.0).collect();
    for p in ns.broker_pods(CLUSTER).await.expect("pods") {
        check_at(&user, pod_addr(p.ip, &p.name), &p.name, &numbers).await;
    }
    ns.delete().await;
}

/// `in_sync` without `name`.
fn others(in_sync: &InSync, name: &str) -> InSync {
    in_sync
        .iter()
        .filter(|(n, _)| n.as_str() != name)
        .map(|(n, s)| (n.clone(), *s))
        .collect()
}
