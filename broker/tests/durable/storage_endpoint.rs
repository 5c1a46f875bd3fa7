//! `GET /storage`, what the operator's `DiskFull` condition reads: on a broker with durable
//! topics it names the storage directory and reports the volume's free and total bytes (the
//! volume of the test's temporary directory) and no full log while appends succeed; without
//! durable storage it measures nothing. A full volume's answer (`full: true`, the log counted)
//! is checked on the fault-injecting file system in the broker's `durable::log` unit tests.

use starling_config::{AckLevel, ConfigOverrides, Profile};

use crate::common::{payload, start};

#[tokio::test]
async fn storage_reports_the_volume_of_the_durable_logs() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            durable_topics: Some(vec!["jobs.*".into()]),
            storage_dir: Some(Some(dir.path().to_path_buf())),
            ack_level: Some(AckLevel::Persisted),
            ..ConfigOverrides::default()
        },
    )
    .await;
    let c = b.client().await;
    for i in 0..5 {
        c.publish_acked("jobs.a", payload(i))
            .await
            .expect("persisted ack");
    }
    let (status, body) = b.http_get("/storage").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert_eq!(v["storage_dir"], dir.path().display().to_string(), "{body}");
    let free = v["free_bytes"].as_u64().expect("free_bytes");
    let total = v["total_bytes"].as_u64().expect("total_bytes");
    assert!(free > 0 && total >= free, "{body}");
    assert_eq!(v["full_logs"], 0, "{body}");
    assert_eq!(v["full"], false, "{body}");
    drop(c);
    b.running.shutdown().await;

    let plain = start(Profile::Balanced, ConfigOverrides::default()).await;
    let (status, body) = plain.http_get("/storage").await;
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    assert!(
        v["storage_dir"].is_null() && v["free_bytes"].is_null(),
        "{body}"
    );
    assert_eq!(v["full"], false, "{body}");
    plain.running.shutdown().await;
}
