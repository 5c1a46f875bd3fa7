//! Smoke tests of the `starling` binary against an in-process broker:
//! exit codes, one-line errors, pub/sub through stdin and stdout, and cache.

use std::process::Stdio;
use std::time::Duration;

use starling_broker::RunningBroker;
use starling_client::{Client, certificate_fingerprint};
use starling_testkit::broker::{SOON, pinned_config, start_broker, start_broker_with};
use tokio::io::AsyncWriteExt;
use tokio::process::Command;

fn starling(b: &RunningBroker) -> Command {
    let fp: Vec<String> = certificate_fingerprint(&b.certificate_der)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.env_remove("STARLING_SERVER")
        .arg("--server")
        .arg(b.quic_addr.to_string())
        .arg("--fingerprint")
        .arg(fp.concat())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    cmd
}

#[tokio::test]
async fn sub_with_a_group_shares_the_messages_among_its_members() {
    let b = start_broker().await;
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let mut waits = Vec::new();
    for _ in 0..2 {
        let mut sub = starling(&b);
        sub.args(["sub", "cli.jobs", "--group", "workers", "--count", "5"])
            .stdout(Stdio::piped());
        let child = sub.spawn().expect("spawn sub");
        waits.push(tokio::spawn(child.wait_with_output()));
    }
    let deadline = tokio::time::Instant::now() + SOON;
    let mut n = 0u32;
    while !waits.iter().all(|w| w.is_finished()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "a member never exited"
        );
        client
            .publish_acked("cli.jobs", format!("job {n}"))
            .await
            .expect("publish");
        n += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut lines = Vec::new();
    for w in waits {
        let out = w.await.expect("join").expect("sub output");
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(text.lines().count(), 5, "{text}");
        lines.extend(text.lines().map(str::to_string));
    }
    let distinct: std::collections::HashSet<_> = lines.iter().collect();
    assert_eq!(
        distinct.len(),
        10,
        "no message printed by both members: {lines:?}"
    );

    let mut bad = starling(&b);
    bad.args(["sub", "cli.jobs", "--group", "w", "--from-time", "0"]);
    let (code, _, _) = run(bad).await;
    assert_eq!(code, 2, "--group is live only");
    client.close().await;
    b.shutdown().await;
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

#[tokio::test]
async fn trust_option_is_required_with_a_one_line_error() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.args(["--server", "127.0.0.1:9", "cache", "get", "k"]);
    let (code, _, err) = run(cmd).await;
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("exactly one of --ca FILE, --insecure or --fingerprint HEX"),
        "{err}"
    );

    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.args(["--insecure", "cache", "put", "k", "v", "--ttl", "soon"]);
    let (code, _, err) = run(cmd).await;
    assert_ne!(code, 0);
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_commands_and_exit_codes() {
    let b = start_broker().await;
    let mut put = starling(&b);
    put.args(["cache", "put", "greeting", "hi there", "--ttl", "30s"]);
    assert_eq!(run(put).await.0, 0);

    let mut get = starling(&b);
    get.args(["cache", "get", "greeting"]);
    let (code, out, _) = run(get).await;
    assert_eq!((code, out.as_str()), (0, "hi there\n"));

    let mut del = starling(&b);
    del.args(["cache", "del", "greeting"]);
    assert_eq!(run(del).await.1, "deleted\n");

    let mut miss = starling(&b);
    miss.args(["cache", "get", "greeting"]);
    let (code, out, err) = run(miss).await;
    assert_eq!((code, out.as_str(), err.trim()), (1, "", "not found"));
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_from_stdin_reaches_a_subscriber() {
    let b = start_broker().await;
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let mut sub = client.subscribe("cli.lines").await.expect("subscribe");

    let mut publish = starling(&b);
    publish
        .args(["pub", "cli.lines", "-"])
        .stdin(Stdio::piped());
    let mut child = publish.spawn().expect("spawn pub");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(b"one\ntwo\nthree\n")
        .await
        .expect("write stdin");
    drop(stdin);
    let status = tokio::time::timeout(SOON, child.wait())
        .await
        .expect("pub exits")
        .expect("pub runs");
    assert!(status.success());

    let mut got = Vec::new();
    while got.len() < 3 {
        let e = tokio::time::timeout(SOON, sub.next_event())
            .await
            .expect("event in time")
            .expect("subscription open")
            .expect("event");
        got.push(String::from_utf8_lossy(&e.payload).into_owned());
    }
    assert_eq!(got, ["one", "two", "three"]);
    client.close().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_prints_lines_and_exits_after_count() {
    let b = start_broker().await;
    let mut sub = starling(&b);
    sub.args(["sub", "cli.sub", "--count", "2"])
        .stdout(Stdio::piped());
    let child = sub.spawn().expect("spawn sub");
    let waiting = tokio::spawn(child.wait_with_output());

    // Publish until the subscriber has seen two messages and exited.
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let deadline = tokio::time::Instant::now() + SOON;
    while !waiting.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "sub never exited");
        client
            .publish_acked("cli.sub", "ping")
            .await
            .expect("publish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = waiting.await.expect("join").expect("sub output");
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ping\nping\n");
    client.close().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_from_a_time_prints_what_came_after_it_then_live() {
    let b = start_broker().await;
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    client
        .publish_acked("cli.time", "before")
        .await
        .expect("publish");
    tokio::time::sleep(Duration::from_millis(60)).await;
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis();
    tokio::time::sleep(Duration::from_millis(60)).await;
    client
        .publish_acked("cli.time", "after 1")
        .await
        .expect("publish");
    client
        .publish_acked("cli.time", "after 2")
        .await
        .expect("publish");

    // Retained by the broker (replay_window_ms): the two after the time, then one live.
    let mut sub = starling(&b);
    sub.args(["sub", "cli.time", "--count", "3", "--from-time"])
        .arg(since.to_string())
        .stdout(Stdio::piped());
    let child = sub.spawn().expect("spawn sub");
    let waiting = tokio::spawn(child.wait_with_output());
    let deadline = tokio::time::Instant::now() + SOON;
    while !waiting.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "sub never exited");
        client
            .publish_acked("cli.time", "live")
            .await
            .expect("publish");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let out = waiting.await.expect("join").expect("sub output");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "after 1\nafter 2\nlive\n"
    );

    let mut bad = starling(&b);
    bad.args(["sub", "cli.time", "--from-time", "2026-02-30T00:00:00Z"]);
    let (code, _, err) = run(bad).await;
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("the day is out of range"), "{err}");
    client.close().await;
    b.shutdown().await;
}

#[tokio::test]
async fn prints_shell_completions_without_a_broker() {
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef starling"),
        ("fish", "complete -c starling"),
    ] {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
        cmd.args(["completions", shell])
            .env_remove("STARLING_SERVER");
        let (code, out, err) = run(cmd).await;
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(out.contains(marker), "{shell} script lacks {marker:?}");
        for sub in ["pub", "sub", "cache", "bench", "completions"] {
            assert!(
                out.contains(sub),
                "{shell} script lacks the {sub} subcommand"
            );
        }
    }
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.args(["completions", "tcsh"]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_json_for_sub_and_cache_get() {
    let b = start_broker().await;
    let mut sub = starling(&b);
    sub.args(["--output", "json", "sub", "cli.json", "--count", "1"])
        .stdout(Stdio::piped());
    let waiting = tokio::spawn(sub.spawn().expect("spawn sub").wait_with_output());
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let deadline = tokio::time::Instant::now() + SOON;
    while !waiting.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "sub never exited");
        client
            .publish_acked("cli.json", &[0xffu8, b'x'][..])
            .await
            .expect("publish");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = waiting.await.expect("join").expect("sub output");
    assert!(out.status.success());
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(line["topic"], "cli.json");
    assert_eq!(line["payload_base64"], "/3g=", "{line}");
    assert!(
        line["position"]["stream"].as_u64().is_some_and(|s| s > 0),
        "{line}"
    );

    client.cache_put("k", "v1", None).await.expect("cache put");
    let mut get = starling(&b);
    get.args(["cache", "get", "k", "--output", "json"]);
    let (code, out, _) = run(get).await;
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        v,
        serde_json::json!({"key": "k", "found": true, "value": "v1"})
    );
    let mut miss = starling(&b);
    miss.args(["--output", "json", "cache", "get", "absent"]);
    let (code, out, _) = run(miss).await;
    assert_eq!(code, 1);
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(v, serde_json::json!({"key": "absent", "found": false}));
    client.close().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sub_with_a_pattern_prints_every_matching_topic_with_its_name() {
    let b = start_broker().await;
    let mut sub = starling(&b);
    sub.args(["--output", "json", "sub", "cli.w.*", "--count", "4"])
        .stdout(Stdio::piped());
    let waiting = tokio::spawn(sub.spawn().expect("spawn sub").wait_with_output());
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let deadline = tokio::time::Instant::now() + SOON;
    while !waiting.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "sub never exited");
        for (topic, msg) in [("cli.w.a", "a"), ("cli.w.b", "b"), ("cli.x", "x")] {
            client.publish_acked(topic, msg).await.expect("publish");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = waiting.await.expect("join").expect("sub output");
    assert!(out.status.success());
    let mut topics = std::collections::BTreeSet::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("a JSON line");
        let topic = v["topic"].as_str().expect("a topic").to_string();
        // Each message under its own topic, and only the matching topics.
        assert_eq!(
            Some(&topic[topic.len() - 1..]),
            v["payload"].as_str(),
            "{v}"
        );
        assert!(topic.starts_with("cli.w."), "{v}");
        topics.insert(topic);
    }
    assert_eq!(topics.len(), 2, "both matching topics: {topics:?}");
    client.close().await;
    b.shutdown().await;
}

/// `starling pub -H KEY=VALUE` (repeatable) publishes headers that `sub --output json` prints,
/// in order, with the value split at the first `=` only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_headers_show_in_sub_json() {
    let b = start_broker().await;
    let mut sub = starling(&b);
    sub.args(["--output", "json", "sub", "cli.h", "--count", "1"])
        .stdout(Stdio::piped());
    let waiting = tokio::spawn(sub.spawn().expect("spawn sub").wait_with_output());
    let deadline = tokio::time::Instant::now() + SOON;
    while !waiting.is_finished() {
        assert!(tokio::time::Instant::now() < deadline, "sub never exited");
        let mut publish = starling(&b);
        publish.args([
            "pub",
            "cli.h",
            "hello",
            "--ack",
            "-H",
            "trace=a=b",
            "--header",
            "empty=",
        ]);
        let (code, _, err) = run(publish).await;
        assert_eq!(code, 0, "{err}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = waiting.await.expect("join").expect("sub output");
    assert!(out.status.success());
    let line: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(line["payload"], "hello", "{line}");
    assert_eq!(
        line["headers"],
        serde_json::json!([{"name": "trace", "value": "a=b"}, {"name": "empty", "value": ""}])
    );
    // A header that is not KEY=VALUE is a usage error before anything is sent.
    let mut bad = starling(&b);
    bad.args(["pub", "cli.h", "x", "-H", "novalue"]);
    let (code, _, err) = run(bad).await;
    assert_ne!(code, 0);
    assert!(err.contains("KEY=VALUE"), "{err}");
    b.shutdown().await;
}

/// `starling pub --msg-id ID` run twice (a retry after a lost ack) delivers the message once,
/// and both runs succeed (each got its ack).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pub_with_a_msg_id_twice_delivers_once() {
    let b = start_broker().await;
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    let mut sub = client.subscribe("cli.dedup").await.expect("subscribe");
    for _ in 0..2 {
        let mut publish = starling(&b);
        publish.args(["pub", "cli.dedup", "once", "--ack", "--msg-id", "cli-1"]);
        let (code, _, err) = run(publish).await;
        assert_eq!(code, 0, "{err}");
    }
    client
        .publish_acked("cli.dedup", "marker")
        .await
        .expect("publish");
    let mut got = Vec::new();
    while got.len() < 2 {
        match tokio::time::timeout(SOON, sub.next_event()).await {
            Ok(Some(Ok(ev))) => got.push(String::from_utf8_lossy(&ev.payload).into_owned()),
            other => panic!("expected an event, got {other:?}"),
        }
    }
    assert_eq!(got, ["once", "marker"]);
    client.close().await;
    b.shutdown().await;
}

/// `starling bench` runs the harness named by STARLING_BENCH_BIN with the command line minus
/// `bench` (and `--direct`), and exits with its code; here the "harness" is a script that
/// records its arguments.
#[tokio::test]
async fn bench_runs_the_separate_harness_with_the_same_arguments() {
    let dir = std::env::temp_dir().join(format!("starling-cli-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let script = dir.join("fake-bench");
    let record = dir.join("args");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {}\nexit 3\n",
            record.display()
        ),
    )
    .expect("write script");
    let mut perms = std::fs::metadata(&script).expect("script").permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("chmod");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling"));
    cmd.env("STARLING_BENCH_BIN", &script).args([
        "--profile",
        "latency",
        "--direct",
        "bench",
        "cache",
        "--server",
        "h:1",
        "--help",
    ]);
    let (code, _, err) = run(cmd).await;
    assert_eq!(code, 3, "the harness's exit code is kept: {err}");
    assert!(err.is_empty(), "the harness reports its own errors: {err}");
    let got = std::fs::read_to_string(&record).expect("the harness ran");
    assert_eq!(
        got.lines().collect::<Vec<_>>(),
        // The harness takes options after its subcommand, not before it.
        ["cache", "--profile", "latency", "--server", "h:1", "--help"]
    );

    let mut missing = Command::new(env!("CARGO_BIN_EXE_starling"));
    missing
        .env("STARLING_BENCH_BIN", dir.join("absent"))
        .args(["bench", "--embedded"]);
    let (code, _, err) = run(missing).await;
    assert_eq!(code, 2);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cargo build -p starling-bench"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn req_and_reply_with_the_no_responders_exit_code() {
    let b = start_broker().await;
    let mut req = starling(&b);
    req.args(["req", "cli.rr", "hello"]);
    let (code, stdout, stderr) = run(req).await;
    assert_eq!((code, stdout.as_str()), (5, ""), "{stderr}");
    assert!(stderr.contains("no responders"), "{stderr}");

    let mut reply = starling(&b);
    reply.args(["reply", "cli.*", "pong", "--count", "1"]);
    let replier = tokio::spawn(run(reply));
    // Until the replier's subscription is in place, requests find no responders (exit 5).
    let deadline = tokio::time::Instant::now() + SOON;
    loop {
        assert!(tokio::time::Instant::now() < deadline, "never answered");
        let mut req = starling(&b);
        req.args(["req", "cli.rr", "hello", "--timeout", "2s"]);
        let (code, stdout, stderr) = run(req).await;
        if code == 0 {
            assert_eq!(stdout, "pong\n");
            break;
        }
        assert_eq!(code, 5, "{stderr}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, _, stderr) = replier.await.expect("join");
    assert_eq!(code, 0, "{stderr}");

    let mut help = Command::new(env!("CARGO_BIN_EXE_starling"));
    help.arg("--help");
    let (_, stdout, _) = run(help).await;
    assert!(stdout.contains("5  `req`: no responders"), "{stdout}");
    b.shutdown().await;
}

/// `starling --output json consume TOPIC --consumer w --count COUNT`, which must exit 0: its
/// output and its lines, each parsed as JSON.
async fn consume_json(
    b: &RunningBroker,
    topic: &str,
    count: u32,
) -> (String, Vec<serde_json::Value>) {
    let mut cmd = starling(b);
    cmd.args([
        "--output",
        "json",
        "consume",
        topic,
        "--consumer",
        "w",
        "--count",
    ])
    .arg(count.to_string());
    let (code, out, err) = run(cmd).await;
    assert_eq!(code, 0, "{err}");
    let lines = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    (out, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consume_acks_what_it_prints_and_a_second_run_goes_on_from_there() {
    let dir = tempfile::tempdir().expect("tmp");
    let b = start_broker_with(&starling_config::ConfigOverrides {
        durable_topics: Some(vec!["cli.jobs".into()]),
        storage_dir: Some(Some(dir.path().to_path_buf())),
        ack_level: Some(starling_config::AckLevel::Persisted),
        ..starling_config::ConfigOverrides::default()
    })
    .await;
    let client = Client::connect(pinned_config(&b)).await.expect("connect");
    for i in 0..3 {
        client
            .publish_acked("cli.jobs", format!("job {i}"))
            .await
            .expect("publish");
    }
    let (out, lines) = consume_json(&b, "cli.jobs", 2).await;
    assert_eq!(lines.len(), 2, "{out}");
    assert_eq!(lines[0]["payload"], "job 0");
    assert_eq!(lines[1]["payload"], "job 1");
    assert_eq!(lines[0]["delivery"], 1);
    assert_eq!(lines[0]["topic"], "cli.jobs");
    assert!(
        lines[0]["position"]["stream"]
            .as_u64()
            .is_some_and(|s| s > 0)
    );

    // The first run acked both before exiting: the consumer goes on at the third.
    let mut second = starling(&b);
    second.args(["consume", "cli.jobs", "--consumer", "w", "--count", "1"]);
    let (code, out, err) = run(second).await;
    assert_eq!((code, out.as_str()), (0, "job 2\n"), "{err}");

    // A nak'd message comes back (to the next run, as its second delivery).
    client
        .publish_acked("cli.jobs", "job 3")
        .await
        .expect("publish");
    let mut refuse = starling(&b);
    refuse.args([
        "consume",
        "cli.jobs",
        "--consumer",
        "w",
        "--count",
        "1",
        "--nak",
    ]);
    let (code, out, err) = run(refuse).await;
    assert_eq!((code, out.as_str()), (0, "job 3\n"), "{err}");
    let (out, lines) = consume_json(&b, "cli.jobs", 1).await;
    assert_eq!(lines.len(), 1, "{out}");
    let line = &lines[0];
    assert_eq!(
        (line["payload"].as_str(), line["delivery"].as_u64()),
        (Some("job 3"), Some(2))
    );

    // Bad input is one line and exit 2, before any connection.
    let mut bad = starling(&b);
    bad.args(["consume", "cli.jobs", "--consumer", "w", "--start", "0:5"]);
    let (code, _, err) = run(bad).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("stream 0"), "{err}");
    // An ephemeral topic is refused by the broker with a clear error.
    let mut ephemeral = starling(&b);
    ephemeral.args(["consume", "cli.other", "--consumer", "w", "--count", "1"]);
    let (code, _, err) = run(ephemeral).await;
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("durable"), "{err}");
    client.close().await;
    b.shutdown().await;
}
