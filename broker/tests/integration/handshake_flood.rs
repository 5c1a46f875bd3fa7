//! Admission in two steps (issue 33, item 2) over real QUIC on loopback: strangers that finish
//! TLS and never send `Hello` hold pending slots (a small fixed grant, none of the connection
//! buffer budget) until `handshake_timeout_ms`, within `max_pending_handshakes` and
//! `max_pending_handshakes_per_source`; an established user keeps being served, a peer's
//! address keeps its share, and every refusal is counted by reason.
//!
//! The strangers come from their own loopback addresses (127.0.0.2 and up; Linux routes all of
//! 127/8 to `lo`), the user and the peer from 127.0.0.1.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use starling_config::{ConfigOverrides, Profile};
use starling_proto::{Frame, Hello, PROTOCOL_VERSION, features, write_frame};

use crate::common::*;

const MAX_PENDING: usize = 16;
/// An eighth of `MAX_PENDING`, kept for peers' addresses.
const PEERS_SHARE: usize = 2;
const PER_SOURCE: usize = 4;
const DEADLINE: Duration = Duration::from_secs(4);

fn refused(e: &quinn::ConnectionError) -> bool {
    matches!(e, quinn::ConnectionError::ConnectionClosed(c)
        if c.error_code == quinn::TransportErrorCode::CONNECTION_REFUSED)
}

/// A client endpoint whose datagrams come from `127.0.0.<host>`.
fn endpoint_at(b: &TestBroker, host: u8) -> quinn::Endpoint {
    let ep = b.raw_endpoint(None);
    let at = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, host)), 0);
    ep.rebind(UdpSocket::bind(at).expect("bind a loopback address"))
        .expect("rebind");
    ep
}

/// Completes TLS and the Starling handshake with `features`; the features granted.
async fn hello(ep: &quinn::Endpoint, b: &TestBroker, features: u64) -> (quinn::Connection, u64) {
    let conn = ep
        .connect(b.addr(), "localhost")
        .expect("connect")
        .await
        .expect("admitted");
    let (mut send, mut recv) = conn.open_bi().await.expect("stream");
    let hello = Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features,
        client_name: "flood-test".into(),
        auth_token: None,
    });
    write_frame(&mut send, &hello).await.expect("hello");
    match read_one(&mut recv).await {
        Some(Frame::HelloOk(ok)) => (conn, ok.features),
        other => panic!("expected HelloOk, got {other:?}"),
    }
}

/// Opens `attempts` connections from `ep` that finish TLS and never send `Hello`; the ones
/// admitted, and how many were refused.
async fn stall(
    ep: &quinn::Endpoint,
    b: &TestBroker,
    attempts: usize,
) -> (Vec<quinn::Connection>, usize) {
    let (mut held, mut refusals) = (Vec::new(), 0);
    for _ in 0..attempts {
        match ep.connect(b.addr(), "localhost").expect("connect").await {
            Ok(conn) => held.push(conn),
            Err(e) if refused(&e) => refusals += 1,
            Err(e) => panic!("unexpected failure: {e}"),
        }
    }
    (held, refusals)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handshake_flood_leaves_users_and_peer_links_served() {
    let b = start(
        Profile::Balanced,
        ConfigOverrides {
            max_pending_handshakes: Some(MAX_PENDING as u32),
            max_pending_handshakes_per_source: Some(PER_SOURCE as u32),
            handshake_timeout_ms: Some(DEADLINE.as_millis() as u64),
            // Past half of the pending slots new addresses must answer a QUIC Retry first,
            // which quinn's client does by itself: the caps below are what is tested.
            ..ConfigOverrides::default()
        },
    )
    .await;
    // A peer link (development mode: no client CA, so PEER is granted to whoever asks) and a
    // user, both from 127.0.0.1, before the flood.
    let home = endpoint_at(&b, 1);
    let (_first_link, granted) = hello(&home, &b, features::PEER).await;
    assert_ne!(
        granted & features::PEER,
        0,
        "the peer link was not granted PEER"
    );
    let mut user = Bystander::start(&b).await;
    let granted_before = b.metrics().await.get("starling_connection_buffer_bytes");

    // The flood: 8 stranger addresses, 8 stalled attempts each.
    let started = Instant::now();
    let (mut stalled, mut refusals) = (Vec::new(), 0);
    let mut endpoints = Vec::new();
    for host in 2..10 {
        let ep = endpoint_at(&b, host);
        let (held, refused) = stall(&ep, &b, 8).await;
        assert!(
            held.len() <= PER_SOURCE,
            "{} pending from one address",
            held.len()
        );
        stalled.extend(held);
        refusals += refused;
        endpoints.push(ep);
    }
    // Strangers got all but the peers' share; everyone else was refused and counted.
    assert_eq!(stalled.len(), MAX_PENDING - PEERS_SHARE);
    assert_eq!(refusals, 64 - stalled.len());
    let m = b.metrics().await;
    assert_eq!(
        m.get("starling_quic_refused_total{reason=pending_handshakes}")
            + m.get("starling_quic_refused_total{reason=pending_handshakes_per_source}"),
        refusals as f64
    );
    assert!(m.get("starling_quic_refused_total{reason=pending_handshakes_per_source}") > 0.0);
    // Pending connections hold none of the connection buffer budget.
    assert_eq!(m.get("starling_connection_buffer_bytes"), granted_before);

    // While the flood holds its slots: the user is served, and a new peer link from the peer's
    // address gets in through the peers' share.
    let round_trip = user.round_trip().await;
    assert!(
        round_trip < Duration::from_secs(2),
        "user round trip {round_trip:?}"
    );
    let (_second_link, granted) = hello(&home, &b, features::PEER).await;
    assert_ne!(granted & features::PEER, 0);
    assert!(
        started.elapsed() < DEADLINE,
        "the checks above ran past the handshake deadline; the test proves nothing"
    );

    // The deadline closes every stalled connection and frees its slot.
    for conn in &stalled {
        let closed = tokio::time::timeout(DEADLINE + SOON, conn.closed()).await;
        match closed {
            Ok(quinn::ConnectionError::ApplicationClosed(c)) => {
                assert_eq!(u64::from(c.error_code), 1, "{c:?}")
            }
            other => panic!("a stalled connection was not closed by the deadline: {other:?}"),
        }
    }
    assert!(started.elapsed() >= DEADLINE - Duration::from_millis(500));
    wait_metrics(&b, "every stalled handshake timed out", |m| {
        m.get("starling_quic_refused_total{reason=handshake_timeout}") == stalled.len() as f64
    })
    .await;

    // A flood from one address is held to its share: a new user from another address gets in.
    let flooder = endpoint_at(&b, 20);
    let (held, refused) = stall(&flooder, &b, 10).await;
    assert_eq!((held.len(), refused), (PER_SOURCE, 10 - PER_SOURCE));
    let newcomer = endpoint_at(&b, 21);
    let (_user_conn, _) = hello(&newcomer, &b, 0).await;
    user.round_trip().await;
    drop((held, stalled, endpoints));
    b.running.shutdown().await;
}
