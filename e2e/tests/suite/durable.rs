//! Durable topics on the real cluster: a one-broker BrokerCluster with `spec.storage` (a PVC
//! from the local-path provisioner) and a durable topic acked `persisted` under
//! `storage_fsync: always`. The broker pod is force-deleted (`--grace-period=0 --force`) in the
//! middle of acked publishing; its StatefulSet brings it back on the same volume, and a
//! subscriber resuming from the start of the topic receives every acked message, in order and
//! without duplicates, from the broker's disk. `status.storage` reports the claims, and
//! deleting a cluster keeps its claims under `whenDeleted: Retain` (the default) and removes
//! them under `Delete`.
//!
//! A three-broker durable cluster (declared with `spec.durability`) is scaled 3 → 1 → 3 while a publisher spreads `persisted`
//! publishes over several topics (so each broker owns some): after each change the new owners
//! copy the former owners' logs (the durable hand-off), and a subscriber resuming each topic
//! from its start receives every acked message, in order and without duplicates.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use kube::api::DeleteParams;
use starling_client::Position;
use starling_e2e::{Env, wait};
use starling_operator::crd::BrokerClusterSpec;
use starling_testkit::payload::{payload, try_index};

const TOPIC: &str = "orders.e2e";
/// A resume position older than any stream: everything the log holds.
const FROM_THE_START: Position = Position { stream: 1, seq: 0 };

fn lock(acked: &Mutex<Vec<u32>>) -> std::sync::MutexGuard<'_, Vec<u32>> {
    acked
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Publishes `from..` with acks until `stop` turns true, recording each acked index; a failed
/// publish (the broker is gone) waits and reconnects through `reconnect`.
async fn publish_until<F, Fut>(
    mut client: starling_client::Client,
    from: u32,
    acked: Arc<Mutex<Vec<u32>>>,
    stop: tokio::sync::watch::Receiver<bool>,
    reconnect: F,
) where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Option<starling_client::Client>>,
{
    let mut i = from;
    while !*stop.borrow() {
        match client.publish_acked(TOPIC, payload(i)).await {
            Ok(_) => lock(&acked).push(i),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Some(c) = reconnect().await {
                    client = c;
                }
            }
        }
        i += 1;
    }
}

#[tokio::test]
async fn a_force_deleted_durable_broker_loses_no_acked_message() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("durable").await.expect("namespace");
    let spec: BrokerClusterSpec = serde_json::from_value(serde_json::json!({
        "tier": "small",
        "storage": { "size": "1Gi" },
        "config": {
            "durable_topics": ["orders.>"],
            "ack_level": "persisted",
            "storage_fsync": "always",
        },
    }))
    .expect("spec");
    ns.create_cluster("ledger", spec).await.expect("create");
    let bc = ns.wait_ready("ledger").await.expect("Ready");
    let storage = bc.status.and_then(|s| s.storage).expect("status.storage");
    assert_eq!(storage.size, "1Gi");
    assert_eq!(storage.claim_template, "data");
    assert_eq!(
        serde_json::to_value(storage.persistent_volume_claim_retention_policy).expect("json"),
        serde_json::json!({ "whenDeleted": "Retain", "whenScaled": "Retain" }),
        "Retain by default"
    );
    let pvcs = ns
        .api::<PersistentVolumeClaim>()
        .list(&Default::default())
        .await
        .expect("PVCs");
    assert_eq!(pvcs.items.len(), 1, "one volume for the one broker");

    let user = ns.full_access_user("ledger").await.expect("BrokerUser");
    let client = ns.client_as("ledger", &user).await.expect("client");
    let acked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let publisher = {
        let acked = Arc::clone(&acked);
        let addr = ns.service_addr("ledger").await.expect("address");
        let cfg = user.config(addr);
        tokio::spawn(publish_until(client, 0, acked, stop_rx, move || {
            let cfg = cfg.clone();
            async move { starling_client::Client::connect(cfg).await.ok() }
        }))
    };

    // Acks flow, then the pod is force-deleted in the middle of them.
    wait::until("200 acked publishes", Duration::from_secs(60), || async {
        (lock(&acked).len() >= 200).then_some(())
    })
    .await
    .expect("persisted publishes are acked");
    let before = ns.broker_pods("ledger").await.expect("pods");
    let old_uid = before.first().expect("one pod").uid.clone();
    ns.api::<Pod>()
        .delete("ledger-0", &DeleteParams::default().grace_period(0))
        .await
        .expect("force-delete ledger-0");
    let acked_at_kill = lock(&acked).len();

    // The StatefulSet brings the broker back on the same volume; publishing resumes.
    wait::until(
        "ledger-0 replaced and Ready",
        Duration::from_secs(180),
        || async {
            let pods = ns.broker_pods("ledger").await.ok()?;
            let p = pods.first()?;
            (p.uid != old_uid && p.ready).then_some(())
        },
    )
    .await
    .expect("the broker comes back");
    wait::until(
        "publishes acked after the restart",
        Duration::from_secs(120),
        || async { (lock(&acked).len() >= acked_at_kill + 200).then_some(()) },
    )
    .await
    .expect("publishing resumes on the restarted broker");
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), publisher).await;
    let acked = lock(&acked).clone();

    // A subscriber resuming from the start of the topic gets every acked message from disk.
    let reader = ns.client_as("ledger", &user).await.expect("client");
    let mut sub = reader
        .subscribe_from(TOPIC, Some(FROM_THE_START))
        .await
        .expect("resume from the start");
    let mut got: Vec<(u32, Position)> = Vec::new();
    while let Ok(Some(ev)) = tokio::time::timeout(Duration::from_secs(3), sub.next_event()).await {
        let ev = ev.expect("event");
        got.push((try_index(&ev.payload).expect("a 4-byte index"), ev.position));
    }
    for w in got.windows(2) {
        assert!(w[0].0 < w[1].0, "out of order or duplicated: {w:?}");
        assert!(
            (w[0].1.stream, w[0].1.seq) < (w[1].1.stream, w[1].1.seq),
            "positions not increasing: {w:?}"
        );
    }
    let seen: HashSet<u32> = got.iter().map(|(i, _)| *i).collect();
    let missing: Vec<u32> = acked
        .iter()
        .copied()
        .filter(|i| !seen.contains(i))
        .collect();
    assert!(
        missing.is_empty(),
        "{} of {} acked messages lost across the force-delete: {:?}",
        missing.len(),
        acked.len(),
        &missing[..missing.len().min(20)]
    );
    eprintln!(
        "{} acked ({} before the force-delete), {} delivered on resume",
        acked.len(),
        acked_at_kill,
        got.len()
    );

    // Retain (the default): deleting the cluster keeps the broker's claim.
    delete_cluster_and_wait(&ns, "ledger").await;
    let claims = claim_names(&ns).await;
    assert_eq!(
        claims,
        vec!["data-ledger-0".to_string()],
        "whenDeleted Retain keeps the claim"
    );

    // Delete: the StatefulSet's claims go with the cluster.
    let spec: BrokerClusterSpec = serde_json::from_value(serde_json::json!({
        "tier": "small",
        "storage": {
            "size": "1Gi",
            "persistentVolumeClaimRetentionPolicy": { "whenDeleted": "Delete" },
        },
    }))
    .expect("spec");
    ns.create_cluster("scratch", spec).await.expect("create");
    ns.wait_ready("scratch").await.expect("Ready");
    assert!(
        claim_names(&ns)
            .await
            .contains(&"data-scratch-0".to_string())
    );
    delete_cluster_and_wait(&ns, "scratch").await;
    wait::until(
        "data-scratch-0 deleted with its cluster",
        Duration::from_secs(120),
        || async {
            let claims = claim_names(&ns).await;
            (!claims.contains(&"data-scratch-0".to_string())).then_some(())
        },
    )
    .await
    .expect("whenDeleted Delete removes the claim");
    assert_eq!(claim_names(&ns).await, vec!["data-ledger-0".to_string()]);
    ns.delete().await;
}

/// Every event of `topic` from its start, read by `client` (`at`: where, for the messages),
/// asserted in order and without duplicates.
async fn read_from_the_start(client: &starling_client::Client, topic: &str, at: &str) -> Vec<u32> {
    let mut sub = client
        .subscribe_from(topic, Some(FROM_THE_START))
        .await
        .unwrap_or_else(|e| panic!("{topic} {at}: resume from the start: {e}"));
    let mut got: Vec<u32> = Vec::new();
    let mut wait_for = Duration::from_secs(15);
    while let Ok(Some(ev)) = tokio::time::timeout(wait_for, sub.next_event()).await {
        got.push(try_index(&ev.expect("event").payload).expect("a 4-byte index"));
        wait_for = Duration::from_secs(3);
    }
    for w in got.windows(2) {
        assert!(
            w[0] < w[1],
            "{topic} {at}: out of order or duplicated: {w:?}"
        );
    }
    got
}

/// Topics the scale test spreads its publishes over (enough that each of three brokers owns
/// some).
const SCALE_TOPICS: u32 = 6;

fn scale_topic(i: u32) -> String {
    format!("orders.scale-{}", i % SCALE_TOPICS)
}

/// Like [`publish_until`], over [`SCALE_TOPICS`] topics (message `i` to `scale_topic(i)`).
async fn publish_spread(
    cfg: starling_client::ClientConfig,
    acked: Arc<Mutex<Vec<u32>>>,
    stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut client =
        starling_e2e::kube_env::connect_retrying("durable scale publisher", cfg.clone())
            .await
            .expect("publisher connects");
    let mut i = 0;
    while !*stop.borrow() {
        match client.publish_acked(&scale_topic(i), payload(i)).await {
            Ok(_) => lock(&acked).push(i),
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
                if let Ok(c) = starling_client::Client::connect(cfg.clone()).await {
                    client = c;
                }
            }
        }
        i += 1;
    }
}

/// Waits until `n` more publishes than `from` are acked.
async fn acked_past(acked: &Mutex<Vec<u32>>, from: usize, n: usize, what: &str) -> usize {
    wait::until(what, Duration::from_secs(180), || async {
        let len = lock(acked).len();
        (len >= from + n).then_some(len)
    })
    .await
    .unwrap_or_else(|e| panic!("{what}: {e}"))
}

/// Waits until the cluster runs exactly `n` broker pods, all Ready, and is Ready itself.
async fn scaled_to(ns: &starling_e2e::TestNamespace, name: &str, n: usize) {
    wait::until(
        &format!("{name} at {n} Ready brokers"),
        Duration::from_secs(300),
        || async {
            let pods = ns.broker_pods(name).await.ok()?;
            (pods.len() == n && pods.iter().all(|p| p.ready)).then_some(())
        },
    )
    .await
    .unwrap_or_else(|e| panic!("scale to {n}: {e}"));
    let bc = ns.wait_ready(name).await.expect("Ready after the scale");
    let members = bc.status.and_then(|s| s.members);
    assert_eq!(members, Some(n as i32), "members follow the scale");
}

#[tokio::test]
async fn a_durable_cluster_scaled_three_to_one_to_three_loses_no_acked_message() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("durable-scale").await.expect("namespace");
    let spec: BrokerClusterSpec = serde_json::from_value(serde_json::json!({
        "tier": "small",
        "replicas": 3,
        "storage": { "size": "1Gi" },
        "durability": { "topics": ["orders.>"], "fsync": "always" },
        "config": { "ack_level": "persisted" },
    }))
    .expect("spec");
    ns.create_cluster("ledger", spec).await.expect("create");
    ns.wait_ready("ledger").await.expect("Ready");
    // spec.durability reaches the brokers' config.
    let pods = ns.broker_pods("ledger").await.expect("pods");
    let rendered = ns
        .broker_config(pods.first().expect("a broker"))
        .await
        .expect("broker /config");
    assert_eq!(rendered.durable_topics, vec!["orders.>".to_string()]);
    assert_eq!(
        rendered.storage_fsync,
        starling_config::StorageFsync::Always
    );
    let user = ns.full_access_user("ledger").await.expect("BrokerUser");
    let cfg = user.config(ns.service_addr("ledger").await.expect("address"));

    let acked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let publisher = tokio::spawn(publish_spread(cfg, Arc::clone(&acked), stop_rx));
    let mut at = acked_past(&acked, 0, 150, "acks on three brokers").await;

    ns.patch_spec("ledger", serde_json::json!({ "replicas": 1 }))
        .await
        .expect("scale to 1");
    scaled_to(&ns, "ledger", 1).await;
    at = acked_past(&acked, at, 150, "acks on one broker").await;

    ns.patch_spec("ledger", serde_json::json!({ "replicas": 3 }))
        .await
        .expect("scale to 3");
    scaled_to(&ns, "ledger", 3).await;
    acked_past(&acked, at, 150, "acks on three brokers again").await;
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), publisher).await;
    let acked = lock(&acked).clone();

    // Every topic, resumed from its start at its current owner (the broker pod itself, so
    // what is read is the owner's log, not a relay's retained tail): every acked message.
    let pods = ns.broker_pods("ledger").await.expect("pods");
    let ids: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
    let mut lost = Vec::new();
    let mut delivered = 0;
    for t in 0..SCALE_TOPICS {
        let topic = scale_topic(t);
        let owner = starling_placement::owner(
            ids.iter().copied(),
            starling_placement::Kind::Topic,
            topic.as_bytes(),
        )
        .expect("an owner");
        let ip = pods
            .iter()
            .find(|p| p.name == owner)
            .and_then(|p| p.ip)
            .expect("the owner's pod IP");
        let reader = starling_e2e::kube_env::connect_retrying(
            &format!("reader at {owner}"),
            user.config(format!("{ip}:7400")).without_cluster_routing(),
        )
        .await
        .expect("reader connects to the owner");
        let got = read_from_the_start(&reader, &topic, "at its owner").await;
        reader.close().await;
        delivered += got.len();
        let seen: HashSet<u32> = got.into_iter().collect();
        lost.extend(
            acked
                .iter()
                .copied()
                .filter(|i| scale_topic(*i) == topic && !seen.contains(i)),
        );
    }
    assert!(
        lost.is_empty(),
        "{} of {} acked messages lost across 3 -> 1 -> 3: {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(20)]
    );
    eprintln!(
        "{} acked across 3 -> 1 -> 3, {delivered} delivered on resume",
        acked.len()
    );

    // The same through the Service with a plain client: its connections land on any broker,
    // so most topics are read at a member that does not own them and relays them. A resume
    // from the start there is fed from the owner first (`cluster::catchup`): every acked
    // message again, in the owner's order.
    let via_service = starling_e2e::kube_env::connect_retrying(
        "reader through the Service",
        user.config(ns.service_addr("ledger").await.expect("address"))
            .without_cluster_routing(),
    )
    .await
    .expect("reader connects through the Service");
    for t in 0..SCALE_TOPICS {
        let topic = scale_topic(t);
        let got = read_from_the_start(&via_service, &topic, "through the Service").await;
        let seen: HashSet<u32> = got.into_iter().collect();
        let missing: Vec<u32> = acked
            .iter()
            .copied()
            .filter(|i| scale_topic(*i) == topic && !seen.contains(i))
            .collect();
        assert!(
            missing.is_empty(),
            "{topic} through the Service: {} acked messages not delivered: {:?}",
            missing.len(),
            &missing[..missing.len().min(20)]
        );
    }
    via_service.close().await;
    ns.delete().await;
}

/// The names of the namespace's PersistentVolumeClaims that are not being deleted, sorted.
async fn claim_names(ns: &starling_e2e::TestNamespace) -> Vec<String> {
    let mut names: Vec<String> = ns
        .api::<PersistentVolumeClaim>()
        .list(&Default::default())
        .await
        .expect("PVCs")
        .items
        .into_iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    names
}

/// Deletes a BrokerCluster and waits until its StatefulSet is gone (garbage-collected).
async fn delete_cluster_and_wait(ns: &starling_e2e::TestNamespace, name: &str) {
    ns.clusters()
        .delete(name, &DeleteParams::default())
        .await
        .expect("delete the BrokerCluster");
    let sets = ns.api::<StatefulSet>();
    wait::until(
        &format!("StatefulSet {name} deleted"),
        Duration::from_secs(120),
        || {
            let sets = sets.clone();
            async move { sets.get_opt(name).await.ok()?.is_none().then_some(()) }
        },
    )
    .await
    .expect("the StatefulSet goes with its BrokerCluster");
}
