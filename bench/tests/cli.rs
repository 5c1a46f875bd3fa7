//! The `starling-bench` binary end to end: an embedded run whose `--output json` is one result
//! object.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test crate: a panic is the failure report

use tokio::process::Command;

async fn run(mut cmd: Command) -> (i32, String, String) {
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), cmd.output())
        .await
        .expect("command finishes")
        .expect("command runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_output_json_is_one_result_object() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling-bench"));
    cmd.args([
        "--output",
        "json",
        "--embedded",
        "--policy",
        "block",
        "--no-progress",
        "--count",
        "500",
        "--payload",
        "64",
        "--warmup",
        "0ms",
    ]);
    let (code, out, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert!(v.get("name").is_some_and(|n| n.is_string()), "{v}");
    assert!(v.get("failure").is_none_or(|f| f.is_null()), "{v}");
}
