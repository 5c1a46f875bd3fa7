//! Profile changes roll every pod exactly once; replica changes restart nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use starling_config::{AckLevel, Profile, Tier};
use starling_e2e::{Env, READY_TIMEOUT, wait};
use starling_operator::crd::BrokerClusterSpec;

#[tokio::test]
async fn profile_change_rolls_each_pod_exactly_once() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("rollout").await.expect("namespace");
    let spec = BrokerClusterSpec {
        tier: Tier::Small,
        profile: Profile::Balanced,
        replicas: Some(3),
        ..Default::default()
    };
    ns.create_cluster("roll", spec).await.expect("create");
    ns.wait_ready("roll").await.expect("Ready");
    let before = ns.broker_pods("roll").await.expect("pods");
    assert_eq!(before.len(), 3);
    let old_hash = before[0].config_hash.clone();

    ns.patch_spec("roll", serde_json::json!({ "profile": "latency" }))
        .await
        .expect("patch");
    // Watch the rollout: every UID seen per pod name, and the most pods unready at once.
    let mut uids: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut max_unready = 0usize;
    let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
    loop {
        let pods = ns.broker_pods("roll").await.expect("pods");
        for p in &pods {
            uids.entry(p.name.clone())
                .or_default()
                .insert(p.uid.clone());
        }
        let unready = 3usize.saturating_sub(pods.iter().filter(|p| p.ready).count());
        max_unready = max_unready.max(unready);
        let done = pods.len() == 3 && pods.iter().all(|p| p.ready && p.config_hash != old_hash);
        if done {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "rollout did not finish: {pods:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let bc = ns.wait_ready("roll").await.expect("Ready after rollout");
    for (name, seen) in &uids {
        assert_eq!(
            seen.len(),
            2,
            "{name} must be replaced exactly once, saw {seen:?}"
        );
    }
    assert!(
        max_unready <= 1,
        "the rollout must be one pod at a time (saw {max_unready} unready)"
    );
    let after = ns.broker_pods("roll").await.expect("pods");
    let new_hash = bc.status.and_then(|s| s.config_hash).expect("status hash");
    for pod in &after {
        assert_eq!(pod.config_hash, new_hash);
        let cfg = ns.broker_config(pod).await.expect("broker /config");
        assert_eq!(cfg.profile, Profile::Latency);
        assert_eq!(
            (cfg.event_batch_max_events, cfg.event_batch_max_delay_us),
            (8, 100)
        );
        assert_eq!(cfg.ack_level, AckLevel::Committed);
    }
    ns.delete().await;
}

#[tokio::test]
async fn scaling_up_restarts_nothing_and_adds_a_pdb() {
    let env = Env::new().await.expect("e2e environment");
    let ns = env.namespace("scale").await.expect("namespace");
    let spec = BrokerClusterSpec {
        tier: Tier::Small,
        replicas: Some(1),
        ..Default::default()
    };
    ns.create_cluster("grow", spec).await.expect("create");
    ns.wait_ready("grow").await.expect("Ready");
    let pdbs = ns.api::<PodDisruptionBudget>();
    assert!(
        pdbs.get_opt("grow").await.expect("get pdb").is_none(),
        "no PDB at one replica"
    );
    let first = ns.broker_pods("grow").await.expect("pods");

    ns.patch_spec("grow", serde_json::json!({ "replicas": 3 }))
        .await
        .expect("patch");
    let bc = ns.wait_ready("grow").await.expect("Ready at 3");
    assert_eq!(bc.status.as_ref().map(|s| s.ready_replicas), Some(3));
    let now = ns.broker_pods("grow").await.expect("pods");
    assert_eq!(now.len(), 3);
    let pod0 = now
        .iter()
        .find(|p| p.name == first[0].name)
        .expect("pod 0 still there");
    assert_eq!(
        pod0.uid, first[0].uid,
        "scaling must not replace existing pods"
    );
    assert_eq!(
        pod0.restarts, first[0].restarts,
        "scaling must not restart existing pods"
    );
    assert!(
        now.iter().all(|p| p.config_hash == first[0].config_hash),
        "replicas are not in the config hash"
    );
    let pdb = wait::until("PDB created", Duration::from_secs(30), || {
        let pdbs = pdbs.clone();
        async move { pdbs.get_opt("grow").await.ok().flatten() }
    })
    .await
    .expect("a PDB appears above one replica");
    let max_unavailable = pdb.spec.and_then(|s| s.max_unavailable);
    assert_eq!(
        max_unavailable,
        Some(k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(1))
    );
    ns.delete().await;
}
