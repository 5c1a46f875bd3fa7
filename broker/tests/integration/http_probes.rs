//! Probes never share the client cap (issue 33, item 3): with every general HTTP slot held by
//! half-open requests, the kubelet's probes are still answered on the slots kept for them, and
//! one source address cannot hold more than its share of the port.

use std::net::SocketAddr;
use std::time::Duration;

use starling_broker::http::{
    MAX_CONNECTIONS, MAX_CONNECTIONS_PER_SOURCE, PROBE_HEADER_TIMEOUT, PROBE_SLOTS_PER_SOURCE,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{SOON, start_default, wait_metrics};
use crate::http_budget::connect_from;

/// A GET of `path` from `127.0.0.<host>`: the status (0 when the connection was closed without
/// an answer) and the body.
async fn get_from(host: u8, addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = connect_from(host, addr).await;
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    if s.write_all(request.as_bytes()).await.is_err() {
        return (0, String::new());
    }
    let mut answer = Vec::new();
    let read = tokio::time::timeout(SOON, s.read_to_end(&mut answer)).await;
    if !matches!(read, Ok(Ok(_))) {
        return (0, String::new());
    }
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    (status, body)
}

/// Half a request head from `127.0.0.<host>`, never finished.
async fn half_open(host: u8, addr: SocketAddr) -> TcpStream {
    let mut s = connect_from(host, addr).await;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
        .await
        .expect("write");
    s
}

#[tokio::test]
async fn probes_answer_while_every_general_slot_is_held() {
    let b = start_default().await;
    let addr = b.running.http_addr;
    let sources = MAX_CONNECTIONS / MAX_CONNECTIONS_PER_SOURCE;
    let mut held = Vec::new();
    for i in 0..MAX_CONNECTIONS {
        held.push(half_open(2 + (i % sources) as u8, addr).await);
    }
    // The listener accepts in arrival order: every general slot is taken before these arrive.
    // The kubelet's probes, from its own address, are answered.
    for path in ["/livez", "/healthz", "/readyz"] {
        let (status, body) = get_from(100, addr, path).await;
        assert_eq!(
            status, 200,
            "{path} while the general slots are held: {body:?}"
        );
    }
    // Nothing else is served on a probe slot.
    let (status, body) = get_from(100, addr, "/metrics").await;
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("only /livez"), "{body}");
    // Released, the general slots serve every endpoint again.
    drop(held);
    let deadline = tokio::time::Instant::now() + SOON;
    while get_from(100, addr, "/metrics").await.0 != 200 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "/metrics never answered again"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    b.running.shutdown().await;
}

#[tokio::test]
async fn one_address_holds_no_more_than_its_share() {
    let b = start_default().await;
    let addr = b.running.http_addr;
    // Its general share, its probe share, and one more.
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS_PER_SOURCE + PROBE_SLOTS_PER_SOURCE + 1 {
        held.push(half_open(2, addr).await);
    }
    // The last was refused at once: a read sees the connection end.
    let last = held.last_mut().expect("held");
    let mut buf = [0u8; 64];
    let closed = tokio::time::timeout(PROBE_HEADER_TIMEOUT / 2, last.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "the connection past the address's share was not closed at once: {closed:?}"
    );
    // Another address is served every endpoint.
    let (status, body) = get_from(3, addr, "/config").await;
    assert_eq!(status, 200, "{body}");
    let m = wait_metrics(&b, "the refusal counted", |m| {
        m.get("starling_http_refused_total{reason=per_source_cap}") >= 1.0
    })
    .await;
    assert_eq!(
        m.get("starling_http_refused_total{reason=connection_cap}"),
        0.0
    );
    drop(held);
    b.running.shutdown().await;
}
