//! The HTTP listener's budgets against a slowloris client: connections that never finish a
//! request head are closed after the header timeout, connections past the caps are closed at
//! once, both are counted, and the endpoints answer again once the slots are released. The
//! client spreads its connections over several loopback source addresses, as a slowloris
//! client must now that each address has a share of the slots (`http_probes.rs` tests that).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use starling_broker::http::{
    HEADER_READ_TIMEOUT, MAX_CONNECTIONS, MAX_CONNECTIONS_PER_SOURCE, PROBE_SLOTS,
    PROBE_SLOTS_PER_SOURCE,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::{SOON, start_default};

/// A TCP connection to `addr` from `127.0.0.<host>`.
pub async fn connect_from(host: u8, addr: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, host), 0)))
        .expect("bind a loopback address");
    socket.connect(addr).await.expect("tcp connect")
}

#[tokio::test]
async fn a_slowloris_client_is_cut_off_and_the_endpoints_recover() {
    let b = start_default().await;
    let addr = b.running.http_addr;
    // Every general slot and every probe slot from enough addresses to fill both pools, then
    // `extra` more.
    let sources = MAX_CONNECTIONS / MAX_CONNECTIONS_PER_SOURCE;
    assert_eq!(sources * PROBE_SLOTS_PER_SOURCE, PROBE_SLOTS);
    let extra = 16;
    let per_source = MAX_CONNECTIONS_PER_SOURCE + PROBE_SLOTS_PER_SOURCE + extra / sources;
    let mut held = Vec::new();
    for i in 0..sources * per_source {
        let mut s = connect_from(2 + (i % sources) as u8, addr).await;
        // Half a request head, never finished.
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .expect("write");
        held.push(s);
    }
    let started = Instant::now();
    // Every held connection is closed by the broker: the ones past the cap at once, the others
    // when the header timeout passes. A read sees EOF (or a reset).
    for s in &mut held {
        let mut buf = [0u8; 512];
        let closed = tokio::time::timeout(HEADER_READ_TIMEOUT + SOON, async {
            loop {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {} // hyper may answer 408 before closing
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a half-open request was never closed");
    }
    let waited = started.elapsed();
    assert!(
        waited >= HEADER_READ_TIMEOUT - Duration::from_millis(500),
        "closed after {waited:?}, before the header timeout"
    );
    // The endpoints answer again and the closures are counted.
    let m = b.metrics().await;
    let cap = m.get("starling_http_refused_total{reason=connection_cap}");
    let timeout = m.get("starling_http_refused_total{reason=header_timeout}");
    assert!(cap >= extra as f64, "connection_cap refusals: {cap}");
    assert!(
        timeout >= (MAX_CONNECTIONS - 1) as f64,
        "header_timeout closures: {timeout}"
    );
    let (status, body) = b.http_get("/readyz").await;
    assert_eq!(status, 200, "{body}");
}
