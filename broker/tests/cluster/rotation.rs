//! Certificate rotation without a restart: one of three brokers gets a new server certificate
//! (same cluster CA) in place, serves it to new connections, and the cluster stays meshed:
//! links dialled afterwards, in both directions, still authenticate.

use std::time::{Duration, Instant};

use starling_client::{Client, Trust};
use starling_placement::Kind;

use crate::harness::{SOON, TestCluster, index, key_owned_by, payload};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_certificate_rotation_on_one_broker_keeps_the_cluster_meshed() {
    let ids = ["a", "b", "c"];
    let mut c = TestCluster::start("rotate", &ids).await;
    c.converge(&ids).await;
    let mut old = c.config("b");
    old.trust = Trust::Fingerprint(c.fingerprint());

    let new_fingerprint = c.rotate_server_cert("b");
    let deadline = Instant::now() + SOON;
    while c.metric("b", "starling_tls_reloads_total", "applied").await < 1.0 {
        assert!(
            Instant::now() < deadline,
            "b did not reload its certificate"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // New connections to b see the new certificate; the old pin no longer matches.
    let mut pinned_new = c.config("b").without_cluster_routing();
    pinned_new.trust = Trust::Fingerprint(new_fingerprint);
    let on_b = Client::connect(pinned_new)
        .await
        .expect("b serves the new certificate");
    assert!(
        Client::connect(old.without_cluster_routing())
            .await
            .is_err(),
        "b no longer serves the old certificate"
    );

    // a restarts: its links to b and b's to a are dialled anew, with b on the new certificate.
    c.kill("a").await;
    c.start_broker("a").await;
    c.converge(&ids).await;
    let on_a = c.plain_client("a").await;
    let topic_b = key_owned_by("rot", Kind::Topic, &ids, "b");
    let topic_a = key_owned_by("rot", Kind::Topic, &ids, "a");
    let on_c = c.plain_client("c").await;
    let mut sub_b = on_c.subscribe(&topic_b).await.expect("sub on c");
    let mut sub_a = on_b.subscribe(&topic_a).await.expect("sub on b");
    // Let the upstream subscriptions reach the owners.
    tokio::time::sleep(Duration::from_millis(500)).await;
    for i in 0..3 {
        on_a.publish_acked(&topic_b, payload(i))
            .await
            .expect("a forwards to b");
        on_b.publish_acked(&topic_a, payload(i))
            .await
            .expect("b forwards to a");
    }
    for sub in [&mut sub_b, &mut sub_a] {
        for i in 0..3 {
            let ev = tokio::time::timeout(SOON, sub.next_event())
                .await
                .expect("in time")
                .expect("an event")
                .expect("no error");
            assert_eq!(index(&ev.payload), i);
        }
    }
    on_a.close().await;
    on_b.close().await;
    on_c.close().await;
    c.shutdown().await;
}
