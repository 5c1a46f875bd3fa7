//! The SDK's credentials against a broker that requires them, over real QUIC: a token in
//! `Hello`, a client certificate, a credentials directory; a refused handshake is
//! `Unauthorized`, a refused operation is `Forbidden` naming it, and neither a refused publish,
//! subscribe nor cache operation disturbs the client's other requests or subscriptions.

use starling_client::{Client, ClientConfig, ClientError, Credentials};
use starling_testkit::assert_forbidden;
use starling_testkit::broker::secured::{CERT_USER, Secured, TOKEN, TOKEN_USER, revoke_token_user};
use starling_testkit::broker::{SOON, pinned_config};

fn config(s: &Secured) -> ClientConfig {
    pinned_config(&s.broker)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_or_unknown_credentials_are_unauthorized() {
    let s = Secured::start("sdk-unauth").await;
    let none = Client::connect(config(&s)).await;
    assert!(
        matches!(none, Err(ClientError::Unauthorized(_))),
        "{none:?}"
    );
    let wrong =
        Client::connect(config(&s).with_credentials(Credentials::token("not-a-user"))).await;
    assert!(
        matches!(wrong, Err(ClientError::Unauthorized(_))),
        "{wrong:?}"
    );
    s.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forbidden_operation_leaves_the_connection_and_other_streams_working() {
    let s = Secured::start("sdk-forbidden").await;
    let client = Client::connect(config(&s).with_credentials(Credentials::token(TOKEN)))
        .await
        .expect("the token user connects");
    let mut sub = client.subscribe("allowed.feed").await.expect("subscribe");

    assert_forbidden(
        client.publish_acked("denied.x", "no").await,
        "publish",
        "denied.x",
        TOKEN_USER,
    );
    assert_forbidden(
        client.subscribe("denied.feed").await,
        "subscribe",
        "denied.feed",
        TOKEN_USER,
    );
    assert_forbidden(
        client.cache_put("denied.k", "v", None).await,
        "cache_write",
        "denied.k",
        TOKEN_USER,
    );
    assert_forbidden(
        client.cache_get("denied.k").await,
        "cache_read",
        "denied.k",
        TOKEN_USER,
    );
    // A fire-and-forget publish that is refused is only logged; the stream goes on.
    client.publish("denied.y", "dropped").await.expect("queued");

    // Everything allowed still works on the same pools, and the subscription still delivers.
    client
        .publish_acked("allowed.feed", "after refusals")
        .await
        .expect("allowed publish");
    let event = tokio::time::timeout(SOON, sub.next_event())
        .await
        .expect("event in time")
        .expect("subscription open")
        .expect("event");
    assert_eq!(&event.payload[..], b"after refusals");
    client
        .cache_put("allowed.k", "v", None)
        .await
        .expect("cache put");
    let got = client.cache_get("allowed.k").await.expect("cache get");
    assert_eq!(got.as_deref(), Some(&b"v"[..]));
    client.close().await;
    s.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_and_a_credentials_directory_authenticate() {
    let s = Secured::start("sdk-cert").await;
    let cert = Credentials::Certificate {
        cert_pem: s.cert.cert_pem.clone().into_bytes(),
        key_pem: s.cert.key_pem.clone().into_bytes(),
    };
    let client = Client::connect(config(&s).with_credentials(cert))
        .await
        .expect("the certificate user connects");
    client
        .publish_acked("billing.eu", "x")
        .await
        .expect("allowed");
    assert_forbidden(
        client.publish_acked("allowed.x", "x").await,
        "publish",
        "allowed.x",
        CERT_USER,
    );
    client.close().await;

    // The Secret layout: the certificate user's files, then a token directory with an address.
    let dir = tempfile::tempdir().unwrap();
    s.write_cert(dir.path());
    let loaded = Credentials::load_dir(dir.path()).expect("certificate directory");
    let client = Client::connect(config(&s).with_credentials(loaded.credentials))
        .await
        .expect("connect with the directory's certificate");
    client
        .publish_acked("billing.x", "y")
        .await
        .expect("allowed");
    client.close().await;

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("token"), format!("{TOKEN}\n")).unwrap();
    std::fs::write(dir.path().join("address"), s.broker.quic_addr.to_string()).unwrap();
    let loaded = Credentials::load_dir(dir.path()).expect("token directory");
    let mut cfg = config(&s);
    cfg.server = loaded.address.expect("address");
    let client = Client::connect(cfg.with_credentials(loaded.credentials))
        .await
        .expect("connect with the directory's token");
    client
        .cache_put("allowed.d", "v", None)
        .await
        .expect("allowed");
    client.close().await;
    s.broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_users_subscription_ends_with_unauthorized() {
    let s = Secured::start("sdk-revoke").await;
    let client = Client::connect(config(&s).with_credentials(Credentials::token(TOKEN)))
        .await
        .expect("the token user connects");
    let mut sub = client.subscribe("allowed.live").await.expect("subscribe");
    revoke_token_user(&s);
    // The broker closes the user's connections within 10 s; the subscription's relay then
    // fails to resubscribe, and a refused handshake is not retried.
    let end = tokio::time::timeout(std::time::Duration::from_secs(15), sub.next_event())
        .await
        .expect("the subscription ends within the revocation bound");
    assert!(
        matches!(end, Some(Err(ClientError::Unauthorized(_)))),
        "{end:?}"
    );
    client.close().await;
    s.broker.shutdown().await;
}
