//! A replicated cluster's scale-down against the in-process fake API server and fake brokers
//! on loopback (plain HTTP servers answering `GET /replicas`, read by the operator's real
//! broker client): the member list drops at once, and the StatefulSet keeps the leaving pods
//! while one of them cannot be read or still reports a replica, saying so in `Progressing` and
//! in an event, and shrinks once every leaving broker reports none
//! ([`crate::members::leaving`]).

use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::controller::Action;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::autoscale::fetch::Fetcher;
use crate::build::{Sizes, render_sized};
use crate::context::Context;
use crate::crd::{
    BrokerCluster, BrokerClusterSpec, BrokerClusterStatus, DurabilitySpec, StorageSpec,
};
use crate::fake_api::{Fake, NS, fake_context};
use crate::members::leaving::MOVE_POLL;
use crate::validate::fixtures::broker_cluster;
use crate::validate::{ObjectIdentity, validate};

/// A fake broker's HTTP side: `GET /replicas` answers the current body, anything else 404.
struct FakeBroker {
    port: u16,
    replicas: Arc<Mutex<String>>,
}

impl FakeBroker {
    async fn start() -> std::io::Result<FakeBroker> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let replicas = Arc::new(Mutex::new("[]".to_string()));
        let body = replicas.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = listener.accept().await {
                let mut buf = vec![0u8; 8192];
                let n = s.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned();
                let answer = if head.starts_with("GET /replicas ") {
                    let text = body.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
                        text.len()
                    )
                } else {
                    "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                        .to_string()
                };
                let _ = s.write_all(answer.as_bytes()).await;
            }
        });
        Ok(FakeBroker { port, replicas })
    }

    fn answer(&self, body: &str) {
        *self.replicas.lock().unwrap_or_else(|p| p.into_inner()) = body.to_string();
    }
}

fn spec() -> BrokerClusterSpec {
    BrokerClusterSpec {
        replicas: Some(3),
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        }),
        durability: Some(DurabilitySpec {
            topics: Some(vec!["orders.*".into()]),
            ..DurabilitySpec::default()
        }),
        config: Some(starling_config::ConfigOverrides {
            durable_replicas: Some(3),
            ..starling_config::ConfigOverrides::default()
        }),
        ..BrokerClusterSpec::default()
    }
}

/// The five-broker StatefulSet as the API server holds it: as the operator renders `bc` (its
/// volume claim template included), with a UID (the pods' owner) and five ready pods.
fn five_brokers(bc: &BrokerCluster, ctx: &Context) -> Value {
    let id = ObjectIdentity::of(bc).unwrap_or_else(|e| panic!("{e}"));
    let v = validate(bc, id, &ctx.defaults).unwrap_or_else(|e| panic!("{e}"));
    let sts = render_sized(
        &v,
        Sizes {
            statefulset_replicas: 5,
            members: 3,
            partition: None,
        },
    )
    .statefulset;
    let mut sts = serde_json::to_value(sts).unwrap_or_default();
    sts["metadata"]["uid"] = json!("sts-uid");
    sts["metadata"]["generation"] = json!(1);
    sts["status"] = json!({"replicas": 5, "readyReplicas": 5, "observedGeneration": 1});
    sts
}

/// A Ready broker pod of the StatefulSet, its `http` port at `port` on loopback (`None`: no
/// pod IP yet).
fn pod(name: &str, port: Option<u16>) -> Value {
    let mut p = json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "messaging",
                        "labels": {"app.kubernetes.io/instance": "events"},
                        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                             "name": "events", "uid": "sts-uid",
                                             "controller": true}]},
           "spec": {"nodeName": format!("node-{name}"),
                    "containers": [{"name": "broker",
                                    "ports": [{"name": "http", "containerPort": port.unwrap_or(1)}]}]},
           "status": {"conditions": [{"type": "Ready", "status": "True",
                                      "lastTransitionTime": "2026-12-01T10:00:00Z"}]}});
    if port.is_some() {
        p["status"]["podIP"] = json!("127.0.0.1");
    }
    p
}

fn progressing(status: &Value) -> (String, String, String) {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == "Progressing"))
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("status"), s("reason"), s("message"))
        })
        .unwrap_or_default()
}

/// What one reconcile left: its requeue, the StatefulSet's `spec.replicas`, the last status
/// written and the events' reasons.
struct Step {
    action: Option<Action>,
    replicas: i64,
    status: Value,
    events: Vec<String>,
}

/// Installs the five-broker StatefulSet and `pods`, then reconciles `bc` once.
async fn step(
    fake: &Mutex<Fake>,
    ctx: &Arc<Context>,
    bc: &BrokerCluster,
    pods: &[(&str, Value)],
) -> Step {
    let sts_path = format!("/apis/apps/v1{NS}statefulsets/events");
    {
        let mut f = fake.lock().unwrap_or_else(|p| p.into_inner());
        f.calls.clear();
        f.objects.insert(sts_path.clone(), five_brokers(bc, ctx));
        for (name, p) in pods {
            f.objects
                .insert(format!("/api/v1{NS}pods/{name}"), p.clone());
        }
    }
    let action = super::reconcile(Arc::new(bc.clone()), ctx.clone()).await;
    let f = fake.lock().unwrap_or_else(|p| p.into_inner());
    Step {
        action: action.ok(),
        replicas: f
            .objects
            .get(&sts_path)
            .and_then(|s| s["spec"]["replicas"].as_i64())
            .unwrap_or(-1),
        // The BrokerCluster's own (a BrokerTopic's status write is a status PATCH too).
        status: f
            .calls
            .iter()
            .rfind(|c| c.method == "PATCH" && c.path.ends_with("brokerclusters/events/status"))
            .map(|c| c.body["status"].clone())
            .unwrap_or_default(),
        events: f.event_reasons(),
    }
}

/// `spec` as a cluster whose members were lowered from 5 to 3 a minute ago (the hand-off
/// grace, 15 s, is over), with the fake API server and the operator's broker HTTP client.
fn lowered_a_minute_ago(
    spec: BrokerClusterSpec,
) -> (BrokerCluster, Arc<Mutex<Fake>>, Arc<Context>) {
    let mut bc: BrokerCluster = broker_cluster(spec);
    let changed = Timestamp::now()
        .checked_sub(SignedDuration::from_secs(60))
        .unwrap_or(Timestamp::UNIX_EPOCH);
    bc.status = Some(BrokerClusterStatus {
        members: Some(3),
        members_changed_at: Some(Time(changed)),
        ..BrokerClusterStatus::default()
    });
    let (fake, ctx) = fake_context(&bc);
    let fetcher = Fetcher::new(None).unwrap_or_else(|e| panic!("{e}"));
    let ctx: Arc<Context> = Arc::new(
        Arc::into_inner(ctx)
            .unwrap_or_else(|| panic!("one context"))
            .with_brokers(fetcher),
    );
    (bc, fake, ctx)
}

fn condition(status: &Value, t: &str) -> (String, String) {
    status["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["type"] == t))
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or("").to_string();
            (s("status"), s("reason"))
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_replicated_scale_down_stops_no_broker_until_its_replicas_moved() {
    let (bc, fake, ctx) = lowered_a_minute_ago(spec());
    let three = FakeBroker::start().await.unwrap_or_else(|e| panic!("{e}"));
    let four = FakeBroker::start().await.unwrap_or_else(|e| panic!("{e}"));
    let pods = |three_port: Option<u16>| {
        vec![
            ("events-0", pod("events-0", None)),
            ("events-1", pod("events-1", None)),
            ("events-2", pod("events-2", None)),
            ("events-3", pod("events-3", three_port)),
            ("events-4", pod("events-4", Some(four.port))),
        ]
    };

    // events-3 has no pod IP yet: unknown is not safe, the StatefulSet keeps five pods.
    four.answer(r#"[{"topic":"orders.a","sync":{"state":"in_sync"}}]"#);
    let held = step(&fake, &ctx, &bc, &pods(None)).await;
    assert_eq!(
        held.replicas, 5,
        "no broker is stopped while events-3 cannot be read"
    );
    assert_eq!(
        held.action,
        Some(Action::requeue(MOVE_POLL)),
        "looked at again soon: {}",
        held.status
    );
    let (cond, reason, message) = progressing(&held.status);
    assert_eq!(
        (cond.as_str(), reason.as_str()),
        ("True", "ScaleDownWaitingForReplicas")
    );
    assert!(
        message.contains("events-3") && message.contains("no pod IP yet"),
        "{message}"
    );
    assert!(
        held.events
            .contains(&"ScaleDownWaitingForReplicas".to_string()),
        "{:?}",
        held.events
    );

    // events-3 answers with a blank replica only, events-4 still holds one topic (its move
    // under way).
    three.answer(r#"[{"topic":"orders.b","sync":{"state":"blank"}}]"#);
    let held = step(&fake, &ctx, &bc, &pods(Some(three.port))).await;
    assert_eq!(held.replicas, 5, "events-4 still holds orders.a");
    let (_, reason, message) = progressing(&held.status);
    assert_eq!(reason, "ScaleDownWaitingForReplicas");
    assert!(
        message.contains("events-4 still holds replicas of 1 replicated topic(s)")
            && message.contains("orders.a"),
        "{message}"
    );

    // The move finished: events-4 deleted its replica. The StatefulSet shrinks to three.
    four.answer("[]");
    let done = step(&fake, &ctx, &bc, &pods(Some(three.port))).await;
    assert_eq!(done.replicas, 3, "the StatefulSet follows the members");
    let (_, reason, _) = progressing(&done.status);
    assert_ne!(reason, "ScaleDownWaitingForReplicas");
}

/// The same wait for a cluster whose topics are replicated by a BrokerTopic only
/// (`durable_replicas` 1): the brokers' `GET /replicas` read once for the BrokerTopic's status
/// serve the scale-down too, and `ReplicationDegraded` judges the cluster against the
/// BrokerTopic's three replicas.
#[tokio::test]
async fn a_broker_topic_with_three_replicas_holds_the_scale_down_too() {
    let (bc, fake, ctx) = lowered_a_minute_ago(BrokerClusterSpec {
        replicas: Some(3),
        storage: Some(StorageSpec {
            size: "10Gi".into(),
            ..StorageSpec::default()
        }),
        ..BrokerClusterSpec::default()
    });
    fake.lock()
        .unwrap_or_else(|p| p.into_inner())
        .objects
        .insert(
            "/apis/starling.dev/v1alpha1/namespaces/messaging/brokertopics/orders".to_string(),
            json!({"apiVersion": "starling.dev/v1alpha1", "kind": "BrokerTopic",
               "metadata": {"name": "orders", "namespace": "messaging", "uid": "uid-orders",
                            "generation": 1, "creationTimestamp": "2026-12-01T10:00:00Z"},
               "spec": {"clusterRef": "events", "topic": "orders.*", "replicas": 3}}),
        );
    let four = FakeBroker::start().await.unwrap_or_else(|e| panic!("{e}"));
    let three = FakeBroker::start().await.unwrap_or_else(|e| panic!("{e}"));
    let pods = [
        ("events-0", pod("events-0", None)),
        ("events-1", pod("events-1", None)),
        ("events-2", pod("events-2", None)),
        ("events-3", pod("events-3", Some(three.port))),
        ("events-4", pod("events-4", Some(four.port))),
    ];
    four.answer(r#"[{"topic":"orders.a","sync":{"state":"catching_up","applied":3,"target":9}}]"#);
    let held = step(&fake, &ctx, &bc, &pods).await;
    assert_eq!(held.replicas, 5, "events-4 still holds orders.a");
    let (_, reason, message) = progressing(&held.status);
    assert_eq!(reason, "ScaleDownWaitingForReplicas", "{message}");
    assert!(message.contains("orders.a, catching up"), "{message}");
    assert_eq!(
        condition(&held.status, "ReplicationDegraded"),
        ("False".to_string(), "ReplicasApart".to_string()),
        "judged against the BrokerTopic's three replicas: {}",
        held.status
    );
    four.answer("[]");
    let done = step(&fake, &ctx, &bc, &pods).await;
    assert_eq!(done.replicas, 3);
}
