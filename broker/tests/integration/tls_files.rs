//! TLS from PEM files (the Kubernetes Secret mount): a CA-signed certificate is served and
//! verified by a client trusting only that CA; unreadable files are a clear start-up error.

use starling_broker::{Broker, BrokerError, RunningBroker};
use starling_client::{Client, ClientConfig, Trust};
use starling_config::{ConfigOverrides, Profile, compose};
use starling_testkit::pki::Ca;

use crate::common::{base_overrides, index, payload, recv_n};

struct Pki {
    dir: std::path::PathBuf,
}

impl Pki {
    fn new(tag: &str) -> Pki {
        let dir = std::env::temp_dir().join(format!("starling-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let ca = Ca::new("starling test CA");
        let leaf = ca.issue("broker.starling.test", &["broker.starling.test"]);
        std::fs::write(dir.join("ca.crt"), &ca.pem).expect("write");
        std::fs::write(dir.join("tls.crt"), &leaf.cert).expect("write");
        std::fs::write(dir.join("tls.key"), &leaf.key).expect("write");
        Pki { dir }
    }

    fn path(&self, name: &str) -> std::path::PathBuf {
        self.dir.join(name)
    }
}

/// Starts a broker serving `cert` and `key` from `pki`'s directory.
async fn start_with(pki: &Pki, cert: &str, key: &str) -> Result<RunningBroker, BrokerError> {
    let mut o = base_overrides();
    o.merge(&ConfigOverrides {
        tls_cert_file: Some(Some(pki.path(cert))),
        tls_key_file: Some(Some(pki.path(key))),
        ..ConfigOverrides::default()
    });
    Broker::new(compose(Profile::Balanced, None, &o))?
        .start()
        .await
}

fn client_config(b: &RunningBroker, pki: &Pki, name: &str) -> ClientConfig {
    ClientConfig::new(b.quic_addr.to_string(), Trust::CaFile(pki.path("ca.crt")))
        .with_server_name(name)
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_ca_signed_certificate_from_files() {
    let pki = Pki::new("ok");
    let running = start_with(&pki, "tls.crt", "tls.key")
        .await
        .expect("starts");
    let cfg = client_config(&running, &pki, "broker.starling.test");
    let client = Client::connect(cfg).await.expect("CA-verified connection");
    let mut sub = client.subscribe("tls").await.expect("subscribe");
    client
        .publish_acked("tls", payload(5))
        .await
        .expect("publish");
    let got = recv_n(&mut sub, 1).await;
    assert_eq!(index(&got[0].1), 5);

    // The wrong name is refused by the client's verification.
    let wrong = client_config(&running, &pki, "other.example");
    assert!(Client::connect(wrong).await.is_err());
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_or_bad_files_fail_start_with_the_path() {
    let pki = Pki::new("bad");
    let err = start_with(&pki, "absent.crt", "tls.key").await.err();
    let msg = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("absent.crt"), "{msg}");

    std::fs::write(pki.path("empty.crt"), "not a pem\n").expect("write");
    let err = start_with(&pki, "empty.crt", "tls.key").await.err();
    let msg = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        msg.contains("empty.crt") && msg.contains("no CERTIFICATE"),
        "{msg}"
    );
}
