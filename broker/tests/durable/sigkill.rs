//! A real `starling-broker` process, killed with SIGKILL in the middle of acked `persisted`
//! publishing and restarted on the same data directory, 20 times: a resuming subscriber then
//! receives every acked message, in order and without duplicates.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use starling_client::{Client, ClientConfig, Trust};

use crate::common::payload;
use crate::{FROM_THE_START, assert_ordered_and_complete, drain_some};

const KILLS: usize = 20;
const TOPIC: &str = "kill.orders";

fn free_udp_port() -> SocketAddr {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind");
    s.local_addr().expect("addr")
}

fn spawn(config: &std::path::Path) -> Child {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_starling-broker"));
    // Only the file configures it (cargo sets STARLING_GIT_REVISION for the build).
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("STARLING_")) {
        cmd.env_remove(k);
    }
    cmd.arg("--config")
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("broker process starts")
}

async fn connect(addr: SocketAddr) -> Client {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let cfg =
            ClientConfig::new(addr.to_string(), Trust::Insecure).with_server_name("localhost");
        match Client::connect(cfg).await {
            Ok(c) => return c,
            Err(e) if Instant::now() > deadline => panic!("broker never came up: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigkill_during_persisted_publishing_loses_no_acked_message() {
    let dir = tempfile::tempdir().expect("tmp");
    let data = dir.path().join("data");
    let addr = free_udp_port();
    let config = dir.path().join("broker.yaml");
    std::fs::write(
        &config,
        format!(
            "auth_mode: none\nquic_listen: \"{addr}\"\nhttp_listen: \"127.0.0.1:0\"\n\
             log_level: warn\ndurable_topics: [\"kill.>\"]\nstorage_dir: \"{}\"\n\
             storage_fsync: always\nack_level: persisted\nreplay_window_ms: 0\n",
            data.display()
        ),
    )
    .expect("config");

    let acked: Arc<Mutex<Vec<u32>>> = Arc::default();
    let mut next = 0u32;
    let started = Instant::now();
    for round in 0..KILLS {
        let mut child = spawn(&config);
        let client = connect(addr).await;
        let from = next;
        let publisher = {
            let acked = Arc::clone(&acked);
            tokio::spawn(async move {
                let mut i = from;
                loop {
                    if client.publish_acked(TOPIC, payload(i)).await.is_ok() {
                        acked.lock().push(i);
                    }
                    i += 1;
                }
            })
        };
        // Let acks flow, then kill in the middle of it.
        let before = acked.lock().len();
        let deadline = Instant::now() + Duration::from_secs(5);
        while acked.lock().len() < before + 20 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(20 + 7 * round as u64)).await;
        child.kill().expect("SIGKILL");
        let _ = child.wait();
        publisher.abort();
        let _ = publisher.await;
        assert!(
            acked.lock().len() > before,
            "round {round}: no publish was acked"
        );
        // Indices never repeat across rounds, so order and duplicates are checkable.
        next = acked.lock().last().copied().unwrap_or(next) + 1_000;
    }

    let mut child = spawn(&config);
    let client = connect(addr).await;
    let mut sub = client
        .subscribe_from(TOPIC, Some(FROM_THE_START))
        .await
        .expect("resume");
    let got = drain_some(&mut sub, Duration::from_millis(1_500)).await;
    let acked = acked.lock().clone();
    assert_ordered_and_complete(&got, &acked);
    assert!(acked.len() >= KILLS * 20, "{} acked", acked.len());
    child.kill().expect("kill");
    let _ = child.wait();
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "took {:?}",
        started.elapsed()
    );
}
