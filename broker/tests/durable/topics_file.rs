//! A broker with a topics document (`topics_file`, the per-topic durability policies the
//! operator renders from `BrokerTopic` objects), mounted the way a Kubernetes ConfigMap volume
//! is (`topics.json` → `..data/topics.json`, `..data` → a timestamped directory, updated by
//! swapping the `..data` symlink): a topic matching a policy is durable, with the policy's
//! retention and largest message, as `GET /storage` shows; a larger message is refused with
//! `LimitExceeded`, counted, and nothing of it is stored; a rewritten document is put in force
//! while the broker runs; a corrupt rewrite keeps the one in force and is counted; and a
//! missing or invalid document at start stops the broker with an error naming the file.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use starling_client::ClientError;
use starling_config::topics::{TopicPolicy, TopicsDocument};
use starling_config::{AckLevel, ConfigOverrides, Profile, StorageFsync, compose};
use starling_proto::ErrorCode;
use starling_testkit::payload::padded;

use crate::common::{SOON, TestBroker, base_overrides, payload, start, wait_metrics};
use crate::{FROM_THE_START, drain_some};

/// A ConfigMap-like volume holding `topics.json`.
struct Mount {
    root: PathBuf,
    version: u32,
}

impl Mount {
    fn new(root: &Path, text: &str) -> Mount {
        let mut m = Mount {
            root: root.to_path_buf(),
            version: 0,
        };
        m.write(text);
        std::os::unix::fs::symlink("..data/topics.json", root.join("topics.json")).unwrap();
        m
    }

    /// The file the broker is pointed at.
    fn file(&self) -> PathBuf {
        self.root.join("topics.json")
    }

    /// Writes `text` into a new version directory and swaps `..data` to it atomically, as the
    /// kubelet does.
    fn write(&mut self, text: &str) {
        self.version += 1;
        let dir = format!("..v{}", self.version);
        std::fs::create_dir(self.root.join(&dir)).unwrap();
        std::fs::write(self.root.join(&dir).join("topics.json"), text).unwrap();
        let tmp = self.root.join("..data_tmp");
        std::os::unix::fs::symlink(&dir, &tmp).unwrap();
        std::fs::rename(&tmp, self.root.join("..data")).unwrap();
    }
}

fn orders(max_message_bytes: u32, retention_max_bytes: u64) -> String {
    let mut p = TopicPolicy::new("orders", "orders.*");
    p.max_message_bytes = Some(max_message_bytes);
    p.retention_max_bytes = Some(retention_max_bytes);
    p.fsync = Some(StorageFsync::Always);
    TopicsDocument::new(vec![p]).render()
}

fn with_topics(storage: &Path, file: &Path) -> ConfigOverrides {
    ConfigOverrides {
        topics_file: Some(Some(file.to_path_buf())),
        storage_dir: Some(Some(storage.to_path_buf())),
        storage_fsync: Some(StorageFsync::Interval),
        ack_level: Some(AckLevel::Persisted),
        auth_reload_interval_ms: Some(100),
        ..ConfigOverrides::default()
    }
}

fn server_code(r: Result<(), ClientError>) -> (ErrorCode, String) {
    match r {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

/// `/storage`'s report of `topic` (`Null` when it is not open here).
async fn storage_topic(b: &TestBroker, topic: &str) -> serde_json::Value {
    let (status, body) = b.http_get("/storage").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(v["storage_dir"].is_string(), "the volume's fields stay: {body}");
    v["topics"]
        .as_array()
        .expect("topics")
        .iter()
        .find(|t| t["topic"] == topic)
        .cloned()
        .unwrap_or(serde_json::Value::Null)
}

const REFUSED: &str = "starling_limit_refusals_total{limit=max_message_bytes}";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_makes_its_topics_durable_and_refuses_larger_messages_storing_nothing() {
    let storage = tempfile::tempdir().expect("tmp");
    let mount_dir = tempfile::tempdir().expect("tmp");
    let mount = Mount::new(mount_dir.path(), &orders(64, 1 << 20));
    let b = start(Profile::Balanced, with_topics(storage.path(), &mount.file())).await;
    let c = b.client().await;

    for i in 0..5 {
        c.publish_acked("orders.eu", padded(i, 64))
            .await
            .expect("persisted ack");
    }
    // Not matched by the policy, not in durable_topics: not durable.
    c.publish_acked("chat", payload(0)).await.expect("ack");
    let m = b.metrics().await;
    let appended = m.sum("starling_storage_appended_records_total");
    assert!(appended >= 1.0, "the policy's topic has a log");
    assert_eq!(m.get("starling_topics_policies"), 1.0);
    assert_eq!(m.get("starling_topics_document_valid"), 1.0);
    let names: Vec<String> = std::fs::read_dir(storage.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, vec!["orders.eu".to_string()], "only the policy's topic");

    let t = storage_topic(&b, "orders.eu").await;
    assert_eq!(t["policy"], "orders", "{t}");
    assert_eq!(t["retention_max_bytes"], 1 << 20, "{t}");
    assert!(t["retention_max_age_ms"].is_null(), "the knob: no limit: {t}");
    assert_eq!(t["max_message_bytes"], 64, "{t}");
    assert_eq!(t["fsync"], "always", "the policy's, over the knob's interval: {t}");
    assert_eq!(t["configured_replicas"], 1, "{t}");
    assert_eq!(t["current_replicas"], 1, "{t}");
    assert!(storage_topic(&b, "chat").await.is_null(), "not durable");

    // One byte over: refused whole (a batch with one large message too), typed and counted.
    let (code, why) = server_code(c.publish_acked("orders.eu", padded(5, 65)).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("max_message_bytes = 64"), "{why}");
    let batch = vec![padded(6, 10), padded(7, 100)];
    let (code, why) = server_code(c.publish_batch("orders.eu", batch, true).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("message 1"), "{why}");
    let m = b.metrics().await;
    assert_eq!(m.get(REFUSED), 2.0);
    assert_eq!(
        m.sum("starling_storage_appended_records_total"),
        appended,
        "nothing of a refused publish is stored"
    );
    // The log holds exactly the five that fit.
    let mut sub = c
        .subscribe_from("orders.eu", Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain_some(&mut sub, Duration::from_millis(700)).await;
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        (0..5).collect::<Vec<_>>()
    );
    // A topic without a policy keeps the decoder's bound only.
    c.publish_acked("chat", Bytes::from(vec![0u8; 4096]))
        .await
        .expect("no policy, no lower bound");
    drop(sub);
    drop(c);
    b.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rewritten_document_is_put_in_force_and_a_corrupt_one_keeps_it() {
    let storage = tempfile::tempdir().expect("tmp");
    let mount_dir = tempfile::tempdir().expect("tmp");
    let mut mount = Mount::new(mount_dir.path(), &orders(64, 1 << 20));
    let b = start(Profile::Balanced, with_topics(storage.path(), &mount.file())).await;
    let c = b.client().await;
    c.publish_acked("orders.eu", padded(0, 64))
        .await
        .expect("fits");
    let (code, _) = server_code(c.publish_acked("orders.eu", padded(1, 100)).await);
    assert_eq!(code, ErrorCode::LimitExceeded);

    // A new document, swapped in as the kubelet does: in force on the open topic.
    mount.write(&orders(1024, 4096));
    wait_metrics(&b, "the rewrite applied", |m| {
        m.get("starling_topics_document_reloads_total{result=applied}") == 1.0
    })
    .await;
    c.publish_acked("orders.eu", padded(2, 100))
        .await
        .expect("fits the new policy");
    let t = storage_topic(&b, "orders.eu").await;
    assert_eq!(t["max_message_bytes"], 1024, "{t}");
    assert_eq!(t["retention_max_bytes"], 4096, "retention follows too: {t}");

    // A corrupt rewrite: counted, the state gauge drops, the policy in force stays.
    mount.write("{\"version\": 1, \"topics\": [");
    let m = wait_metrics(&b, "the corrupt rewrite counted", |m| {
        m.get("starling_topics_document_reloads_total{result=invalid}") >= 1.0
    })
    .await;
    assert_eq!(m.get("starling_topics_document_valid"), 0.0);
    assert_eq!(m.get("starling_topics_policies"), 1.0);
    c.publish_acked("orders.eu", padded(3, 100))
        .await
        .expect("the policy in force stays");
    let (code, why) = server_code(c.publish_acked("orders.eu", padded(4, 2000)).await);
    assert_eq!(code, ErrorCode::LimitExceeded, "{why}");
    assert!(why.contains("max_message_bytes = 1024"), "{why}");
    // A document that is JSON but invalid (replicas 2) is refused the same way.
    mount.write(
        r#"{"version":1,"topics":[{"name":"orders","pattern":"orders.*","replicas":2}]}"#,
    );
    wait_metrics(&b, "the invalid rewrite counted", |m| {
        m.get("starling_topics_document_reloads_total{result=invalid}") >= 2.0
    })
    .await;
    let t = storage_topic(&b, "orders.eu").await;
    assert_eq!(t["max_message_bytes"], 1024, "{t}");

    // A valid one again: in force, the state gauge back; a policy removed lifts its bound.
    mount.write(&TopicsDocument::new(vec![TopicPolicy::new("orders", "orders.*")]).render());
    let m = wait_metrics(&b, "the good rewrite applied", |m| {
        m.get("starling_topics_document_reloads_total{result=applied}") == 2.0
    })
    .await;
    assert_eq!(m.get("starling_topics_document_valid"), 1.0);
    c.publish_acked("orders.eu", padded(5, 2000))
        .await
        .expect("no lower bound now");
    let mut sub = c
        .subscribe_from("orders.eu", Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain_some(&mut sub, Duration::from_millis(700)).await;
    assert_eq!(
        got.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![0, 2, 3, 5],
        "exactly the accepted messages, in order"
    );
    drop(sub);
    drop(c);
    b.running.shutdown().await;
}

#[tokio::test]
async fn a_missing_or_invalid_document_at_start_stops_the_broker_naming_the_file() {
    let storage = tempfile::tempdir().expect("tmp");
    let mount_dir = tempfile::tempdir().expect("tmp");
    let missing = mount_dir.path().join("absent.json");
    let invalid = mount_dir.path().join("invalid.json");
    std::fs::write(
        &invalid,
        r#"{"version":1,"topics":[{"name":"big","pattern":"x","max_message_bytes":0}]}"#,
    )
    .unwrap();
    for (file, why) in [(&missing, "No such file"), (&invalid, "max_message_bytes")] {
        let mut o = base_overrides();
        o.merge(&with_topics(storage.path(), file));
        let cfg = compose(Profile::Balanced, None, &o);
        let broker = starling_broker::Broker::new(cfg).expect("valid config");
        let started = tokio::time::timeout(SOON, broker.start())
            .await
            .expect("start returns");
        let Err(e) = started else {
            panic!("started with {}", file.display());
        };
        let e = e.to_string();
        assert!(e.contains(&file.display().to_string()), "{e}");
        assert!(e.contains(why), "{e}");
    }
}
