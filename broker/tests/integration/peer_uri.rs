//! Peers recognised by their cluster's URI as well as the name (issue 33, item 5): with
//! `cluster_peer_uri` set, a `starling:peer` certificate of the cluster CA is a peer only when
//! it carries that URI as a subject alternative name. A peer certificate of the same CA issued
//! for another cluster (another URI), or one without a URI, is refused in the Starling
//! handshake and counted; one from another CA fails TLS.

use starling_broker::cluster::peer_client::PeerClient;
use starling_client::{ClientError, Credentials};
use starling_config::{AuthMode, ConfigOverrides, Profile};
use starling_testkit::pki::{Ca, Leaf, write_atomic};

use crate::common::{TestBroker, start};

const OURS: &str = "urn:starling:peer:messaging/events";
const THEIRS: &str = "urn:starling:peer:messaging/billing";

async fn broker(ca: &Ca) -> TestBroker {
    let dir = std::env::temp_dir().join(format!("starling-peer-uri-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("ca.crt"), &ca.pem).unwrap();
    write_atomic(&dir.join("users.yaml"), "version: 1\nusers: []\n");
    start(
        Profile::Balanced,
        ConfigOverrides {
            auth_mode: Some(AuthMode::Required),
            auth_users_file: Some(Some(dir.join("users.yaml"))),
            auth_client_ca_file: Some(Some(dir.join("ca.crt"))),
            cluster_peer_uri: Some(Some(OURS.into())),
            ..ConfigOverrides::default()
        },
    )
    .await
}

async fn as_peer(b: &TestBroker, leaf: Leaf) -> Result<PeerClient, ClientError> {
    let cfg = b
        .client_config()
        .with_credentials(Credentials::Certificate {
            cert_pem: leaf.cert.into_bytes(),
            key_pem: leaf.key.into_bytes(),
        });
    PeerClient::connect(cfg).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_certificate_must_name_this_cluster_by_its_uri() {
    let ca = Ca::new("cluster CA");
    let b = broker(&ca).await;

    let ours = as_peer(&b, ca.peer(OURS))
        .await
        .expect("our peer certificate is a peer");
    drop(ours);

    // The same CA, the peer name, another cluster's URI: refused, and no user either.
    let err = as_peer(&b, ca.peer(THEIRS))
        .await
        .expect_err("another cluster's peer certificate is refused");
    assert!(
        matches!(&err, ClientError::Unauthorized(m) if m.contains("issued for another cluster") && m.contains(OURS)),
        "{err}"
    );
    // The peer name without any URI (a certificate issued before the URI): refused.
    let err = as_peer(&b, ca.client(starling_broker::auth::PEER_IDENTITY))
        .await
        .expect_err("a peer certificate without the URI is refused");
    assert!(matches!(&err, ClientError::Unauthorized(_)), "{err}");
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_auth_failures_total{reason=foreign_peer}"),
        2.0
    );

    // Our URI from another CA: TLS refuses it before any Starling frame.
    let err = as_peer(&b, Ca::new("rogue CA").peer(OURS))
        .await
        .expect_err("a certificate of another CA is refused");
    assert!(
        !matches!(
            err,
            ClientError::Server { .. } | ClientError::Unauthorized(_)
        ),
        "refused by TLS: {err}"
    );
    assert_eq!(
        m.get("starling_auth_failures_total{reason=not_a_peer}"),
        0.0
    );
}
