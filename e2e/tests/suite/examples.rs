//! Every example in `manifests/examples/` is applied for real: its BrokerCluster becomes Ready
//! with the tier and profile it names (tiers shrunk by e2e/values-e2e.yaml so they fit one
//! small node), each of its BrokerTopics becomes Ready (accepted into the cluster's topics
//! document), and each of its BrokerUsers becomes Ready and, with the credentials Secret the
//! operator wrote, publishes to (and subscribes to) a topic its patterns allow.

use std::time::Duration;

use kube::api::{DynamicObject, PostParams};
use starling_e2e::Env;
use starling_operator::crd::BrokerCluster;

/// A concrete name matched by `pattern`: each wildcard token becomes `e2e`.
fn name_for(pattern: &str) -> String {
    pattern
        .split('.')
        .map(|t| if t == "*" || t == ">" { "e2e" } else { t })
        .collect::<Vec<_>>()
        .join(".")
}

/// The first `allow` pattern of one operation of a BrokerUser's permissions.
fn first_allowed(user: &serde_json::Value, op: &str) -> Option<String> {
    user.pointer(&format!("/spec/permissions/{op}/allow/0"))
        .and_then(|p| p.as_str())
        .map(str::to_string)
}

#[tokio::test]
async fn every_example_becomes_ready() {
    let env = Env::new().await.expect("e2e environment");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "examples: {files:?}");
    for file in files {
        let at = file.display().to_string();
        let text = std::fs::read_to_string(&file).expect("read example");
        let docs: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{at}: {e}"));
        let kind = |d: &serde_json::Value| d["kind"].as_str().unwrap_or_default().to_string();
        let clusters: Vec<BrokerCluster> = docs
            .iter()
            .filter(|d| kind(d) == "BrokerCluster")
            .map(|d| serde_json::from_value(d.clone()).unwrap_or_else(|e| panic!("{at}: {e}")))
            .collect();
        let users: Vec<&serde_json::Value> =
            docs.iter().filter(|d| kind(d) == "BrokerUser").collect();
        let topics: Vec<&serde_json::Value> =
            docs.iter().filter(|d| kind(d) == "BrokerTopic").collect();
        assert_eq!(clusters.len(), 1, "{at}: one BrokerCluster");
        assert!(
            !users.is_empty(),
            "{at}: every example shows a BrokerUser (brokers require authentication)"
        );
        assert_eq!(
            clusters.len() + users.len() + topics.len(),
            docs.len(),
            "{at}: only BrokerClusters, BrokerUsers and BrokerTopics"
        );
        let bc = &clusters[0];
        let name = bc.metadata.name.clone().expect("example has a name");
        let ns = env.namespace("example").await.expect("namespace");
        ns.create_cluster(&name, bc.spec.clone())
            .await
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        for user in &users {
            let obj: DynamicObject =
                serde_json::from_value((*user).clone()).unwrap_or_else(|e| panic!("{at}: {e}"));
            ns.users()
                .create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("{at}: create BrokerUser: {e}"));
        }
        for topic in &topics {
            let obj: DynamicObject =
                serde_json::from_value((*topic).clone()).unwrap_or_else(|e| panic!("{at}: {e}"));
            ns.topics()
                .create(&PostParams::default(), &obj)
                .await
                .unwrap_or_else(|e| panic!("{at}: create BrokerTopic: {e}"));
        }
        let ready = ns
            .wait_ready(&name)
            .await
            .unwrap_or_else(|e| panic!("{at}: {e}"));
        let status = ready.status.expect("status");
        assert_eq!(status.profile, Some(bc.spec.profile), "{at}");
        assert_eq!(status.tier, Some(bc.spec.tier), "{at}");
        assert_eq!(status.ready_replicas, status.replicas, "{at}");
        let pods = ns.broker_pods(&name).await.expect("pods");
        let cfg = ns.broker_config(&pods[0]).await.expect("broker /config");
        assert_eq!(
            cfg.profile, bc.spec.profile,
            "{at}: the running broker has the example's profile"
        );

        for topic in &topics {
            let topic_name = topic["metadata"]["name"].as_str().expect("topic name");
            assert_eq!(
                topic["spec"]["clusterRef"], name,
                "{at}: {topic_name}'s cluster"
            );
            ns.wait_topic_ready(topic_name)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
        }
        for user in users {
            let user_name = user["metadata"]["name"].as_str().expect("user name");
            assert_eq!(user["spec"]["cluster"], name, "{at}: {user_name}'s cluster");
            ns.wait_user_ready(user_name)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let creds = ns
                .user_credentials(user_name)
                .await
                .unwrap_or_else(|e| panic!("{at}: {e}"));
            let client = ns
                .client_as(&name, &creds)
                .await
                .unwrap_or_else(|e| panic!("{at}: {user_name} connects: {e}"));
            let mut sub = match first_allowed(user, "subscribe") {
                Some(p) => Some(
                    client
                        .subscribe(&name_for(&p))
                        .await
                        .unwrap_or_else(|e| panic!("{at}: {user_name} subscribes {p}: {e}")),
                ),
                None => None,
            };
            if let Some(p) = first_allowed(user, "publish") {
                let topic = name_for(&p);
                let same_topic =
                    first_allowed(user, "subscribe").map(|s| name_for(&s)) == Some(topic.clone());
                // With several brokers the subscription may take a moment to reach the topic's
                // owner: publish until the subscriber sees one (at most 30 s).
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                loop {
                    client
                        .publish_acked(&topic, "from the example")
                        .await
                        .unwrap_or_else(|e| panic!("{at}: {user_name} publishes {topic}: {e}"));
                    let Some(sub) = sub.as_mut().filter(|_| same_topic) else {
                        break;
                    };
                    let seen =
                        tokio::time::timeout(Duration::from_millis(500), sub.next_event()).await;
                    if let Ok(Some(Ok(ev))) = seen {
                        assert_eq!(ev.payload.as_ref(), b"from the example", "{at}");
                        break;
                    }
                    assert!(
                        tokio::time::Instant::now() < deadline,
                        "{at}: {user_name}'s subscription to {topic} saw nothing in 30 s"
                    );
                }
            }
            println!("{at}: BrokerUser {user_name} authenticates and acts within its patterns");
            client.close().await;
        }
        ns.delete().await;
    }
}
