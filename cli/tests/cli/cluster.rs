//! The CLI pointed at ONE broker of a cluster (`--direct`, as through a Kubernetes Service)
//! reaches every topic and key: that broker forwards to the owners.

use std::process::Stdio;
use std::time::{Duration, Instant};

use starling_placement::Kind;
use starling_testkit::cluster::{SOON, TestCluster, key_owned_by};
use tokio::process::Command;

fn starling(c: &TestCluster, via: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.env_remove("STARLING_SERVER")
        .args(["--direct", "--server", &c.addr(via)])
        .args(["--fingerprint", &c.fingerprint_hex()])
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

async fn run(mut cmd: Command) -> (i32, String) {
    let out = tokio::time::timeout(SOON, cmd.output())
        .await
        .expect("command finishes")
        .expect("command runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_cli_through_one_address_reaches_every_owner() {
    let ids = ["a", "b", "c"];
    let c = TestCluster::start("cli", &ids).await;
    let topic = key_owned_by("cli", Kind::Topic, &ids, "c");

    let mut sub = starling(&c, "a");
    sub.args(["sub", &topic, "--count", "3"])
        .stdout(Stdio::piped());
    let sub = sub.spawn().expect("sub starts");
    // a holds one upstream subscription at c for the CLI's subscription.
    let deadline = Instant::now() + SOON;
    while c.metric("c", "starling_subscriptions", "").await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "no upstream subscription at the owner"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    for m in ["one", "two", "three"] {
        let mut publish = starling(&c, "a");
        publish.args(["pub", &topic, m, "--ack"]);
        run(publish).await;
    }
    let out = tokio::time::timeout(SOON, sub.wait_with_output())
        .await
        .expect("sub ends after 3 messages")
        .expect("sub runs");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "one\ntwo\nthree\n");

    for owner in ["b", "c"] {
        let key = key_owned_by("cli-key", Kind::CacheKey, &ids, owner);
        let mut put = starling(&c, "a");
        put.args(["cache", "put", &key, owner]);
        run(put).await;
        let mut get = starling(&c, "a");
        get.args(["cache", "get", &key]);
        assert_eq!(run(get).await.1, format!("{owner}\n"));
    }
    assert!(
        c.metric("a", "starling_cluster_forwarded_total", "op=\"publish\"")
            .await
            >= 3.0
    );
    assert!(
        c.metric("a", "starling_cluster_forwarded_total", "op=\"cache\"")
            .await
            >= 4.0
    );
    c.shutdown().await;
}
