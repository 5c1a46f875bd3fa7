//! The `starling` binary's credentials against an in-process broker that requires them:
//! `--token`, `STARLING_TOKEN`, `--cert/--key`, `--credentials DIR` (its `address` as the
//! server), and the one-line errors and exit codes of a refused handshake (3) and a refused
//! operation (4); `starling check` as the chart's `helm test` pod runs it (a credentials
//! directory, retries of a refused login, no retry of a forbidden topic).

use std::process::Stdio;

use starling_client::certificate_fingerprint;
use starling_testkit::broker::SOON;
use starling_testkit::broker::secured::{Secured, TOKEN};
use tokio::process::Command;

/// `starling` pinned to the broker's certificate, with no server and no credentials from the
/// environment.
fn starling(s: &Secured) -> Command {
    let fp: String = certificate_fingerprint(&s.broker.certificate_der)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.env_remove("STARLING_SERVER")
        .env_remove("STARLING_TOKEN")
        .arg("--fingerprint")
        .arg(fp)
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

fn at(s: &Secured) -> Command {
    let mut cmd = starling(s);
    cmd.arg("--server").arg(s.broker.quic_addr.to_string());
    cmd
}

async fn run(mut cmd: Command) -> (i32, String, String) {
    let out = tokio::time::timeout(SOON, cmd.output())
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
async fn tokens_are_checked_and_refusals_are_one_line_with_their_exit_code() {
    let s = Secured::start("cli-token").await;

    let mut none = at(&s);
    none.args(["pub", "allowed.x", "hi", "--ack"]);
    let (code, _, err) = run(none).await;
    assert_eq!(code, 3, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("error: unauthorized"), "{err}");

    let mut wrong = at(&s);
    wrong.args(["--token", "nobody", "pub", "allowed.x", "hi", "--ack"]);
    let (code, _, err) = run(wrong).await;
    assert_eq!(code, 3, "{err}");
    assert!(!err.contains("nobody"), "the token is never echoed: {err}");

    let mut ok = at(&s);
    ok.args(["--token", TOKEN, "pub", "allowed.x", "hi", "--ack"]);
    let (code, _, err) = run(ok).await;
    assert_eq!(code, 0, "{err}");

    let mut denied = at(&s);
    denied
        .env("STARLING_TOKEN", TOKEN)
        .args(["pub", "denied.x", "hi", "--ack"]);
    let (code, _, err) = run(denied).await;
    assert_eq!(code, 4, "{err}");
    assert_eq!(
        err.trim_end(),
        r#"error: forbidden: user "app" may not publish topic "denied.x""#
    );

    let mut cache = at(&s);
    cache
        .env("STARLING_TOKEN", TOKEN)
        .args(["cache", "get", "denied.k"]);
    let (code, _, err) = run(cache).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("denied.k"), "{err}");
    s.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_and_credentials_directories_authenticate() {
    let s = Secured::start("cli-cert").await;
    let files = tempfile::tempdir().unwrap();
    s.write_cert(files.path());
    let (cert, key) = (files.path().join("tls.crt"), files.path().join("tls.key"));

    let mut ok = at(&s);
    ok.arg("--cert").arg(&cert).arg("--key").arg(&key);
    ok.args(["pub", "billing.eu", "x", "--ack"]);
    let (code, _, err) = run(ok).await;
    assert_eq!(code, 0, "{err}");

    let mut denied = at(&s);
    denied.arg("--cert").arg(&cert).arg("--key").arg(&key);
    denied.args(["sub", "billing.eu", "--count", "1"]);
    let (code, _, err) = run(denied).await;
    assert_eq!(code, 4, "{err}");
    assert!(err.contains(r#"user "billing" may not subscribe"#), "{err}");

    // The directory's `address` is the server when --server is not given.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.path().join("address"), s.broker.quic_addr.to_string()).unwrap();
    let mut put = starling(&s);
    put.arg("--credentials").arg(dir.path());
    put.args(["cache", "put", "allowed.k", "v"]);
    let (code, _, err) = run(put).await;
    assert_eq!(code, 0, "{err}");
    let mut get = starling(&s);
    get.arg("--credentials").arg(dir.path());
    get.args(["cache", "get", "allowed.k"]);
    let (code, out, err) = run(get).await;
    assert_eq!((code, out.as_str()), (0, "v\n"), "{err}");

    // Two identities at once are refused before connecting.
    let mut both = at(&s);
    both.arg("--credentials")
        .arg(dir.path())
        .args(["--token", TOKEN]);
    both.args(["cache", "get", "allowed.k"]);
    let (code, _, err) = run(both).await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("choose at most one of --cert"), "{err}");
    // A directory that is not one is named.
    let mut missing = at(&s);
    missing.args(["--credentials", "/nonexistent/creds", "cache", "get", "k"]);
    let (code, _, err) = run(missing).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("/nonexistent/creds"), "{err}");
    s.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_round_trips_with_a_credentials_directory_and_retries_only_what_may_pass() {
    let s = Secured::start("cli-check").await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.path().join("address"), s.broker.quic_addr.to_string()).unwrap();

    // Someone else's message on the topic does not count as the check's own.
    let mut other = at(&s);
    other.args([
        "--token",
        TOKEN,
        "pub",
        "allowed.check",
        "not the check's",
        "--ack",
    ]);
    assert_eq!(run(other).await.0, 0);
    let mut ok = starling(&s);
    ok.arg("--credentials").arg(dir.path());
    ok.args(["check", "allowed.check", "--count", "5"]);
    let (code, out, err) = run(ok).await;
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("ok: published 5 message(s) to allowed.check and received them back in ")
            && out.trim_end().ends_with("ms (attempt 1)")
            && out.lines().count() == 1,
        "{out}"
    );

    // A forbidden topic fails at once, even with retries allowed.
    let started = std::time::Instant::now();
    let mut denied = starling(&s);
    denied.arg("--credentials").arg(dir.path());
    denied.args(["check", "denied.check", "--retry-for", "30s"]);
    let (code, _, err) = run(denied).await;
    assert_eq!(code, 4, "{err}");
    assert_eq!(
        err.trim_end(),
        r#"error: forbidden: user "app" may not subscribe topic "denied.check""#
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));

    // A refused login is retried until --retry-for has passed, each failure reported.
    let mut wrong = at(&s);
    wrong.args([
        "--token",
        "nobody",
        "check",
        "allowed.check",
        "--retry-for",
        "5s",
    ]);
    let (code, _, err) = run(wrong).await;
    assert_eq!(code, 3, "{err}");
    let lines: Vec<&str> = err.lines().collect();
    assert!(lines.len() >= 3, "{err}");
    assert!(
        lines[0].starts_with("check: attempt 1 failed: unauthorized")
            && lines[0].ends_with("; retrying"),
        "{err}"
    );
    assert!(
        lines[lines.len() - 2].starts_with("check: giving up after ")
            && lines[lines.len() - 1].starts_with("error: unauthorized"),
        "{err}"
    );
    assert!(!err.contains("nobody"), "the token is never echoed: {err}");
    s.broker.shutdown().await;
}
