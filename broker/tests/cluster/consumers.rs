//! Durable consumers in a cluster: a consumer is served by its topic's owner. A routing client
//! bootstrapped at another member consumes there all the same; a plain client at another
//! member is refused with the owner named.

use std::time::Duration;

use starling_client::{ClientError, ConsumerConfig};
use starling_placement::Kind;
use starling_proto::ErrorCode;
use starling_testkit::payload::{index, payload};

use crate::harness::{TestCluster, key_owned_by};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumer_is_served_by_its_topics_owner_for_a_client_at_any_member() {
    let cluster = TestCluster::start_durable("consumers", &["a", "b"], &["jobs.*"]).await;
    let topic = key_owned_by("jobs.t", Kind::Topic, &["a", "b"], "b");
    let routing = cluster.routing_client("a").await;
    for i in 0..5 {
        routing
            .publish_acked(&topic, payload(i))
            .await
            .expect("publish");
    }

    let plain = cluster.plain_client("a").await;
    match plain.consume(&topic, ConsumerConfig::new("w")).await {
        Err(ClientError::Server {
            code: ErrorCode::InvalidRequest,
            message,
        }) => assert!(message.contains(&cluster.addr("b")), "{message}"),
        Err(other) => panic!("expected InvalidRequest, got {other}"),
        Ok(_) => panic!("a plain client's consumer was opened at a member that does not own it"),
    }

    let mut member = routing
        .consume(&topic, ConsumerConfig::new("w"))
        .await
        .expect("the routing client opens the consumer at the owner");
    for i in 0..5 {
        let d = tokio::time::timeout(Duration::from_secs(10), member.next())
            .await
            .expect("in time")
            .expect("a delivery")
            .expect("no error");
        assert_eq!((index(&d.payload), d.delivery), (i, 1));
        d.ack().expect("ack");
    }
    member.close().await;
    // Acked at the owner: a new member of the consumer starts after them.
    routing
        .publish_acked(&topic, payload(5))
        .await
        .expect("publish");
    let mut again = routing
        .consume(&topic, ConsumerConfig::new("w"))
        .await
        .expect("open again");
    let d = tokio::time::timeout(Duration::from_secs(10), again.next())
        .await
        .expect("in time")
        .expect("a delivery")
        .expect("no error");
    assert_eq!(index(&d.payload), 5);
    d.ack().expect("ack");
    again.close().await;
    routing.close().await;
    plain.close().await;
    cluster.shutdown().await;
}
