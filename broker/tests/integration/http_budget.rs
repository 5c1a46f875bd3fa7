//! The HTTP listener's budgets against a slowloris client: connections that never finish a
//! request head are closed after the header timeout, connections past the cap are closed at
//! once, both are counted, and the endpoints answer again once the slots are released.

use std::time::{Duration, Instant};

use starling_broker::http::{HEADER_READ_TIMEOUT, MAX_CONNECTIONS};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::{SOON, start_default};

#[tokio::test]
async fn a_slowloris_client_is_cut_off_and_the_endpoints_recover() {
    let b = start_default().await;
    let addr = b.running.http_addr;
    let extra = 16;
    let mut held = Vec::new();
    for _ in 0..MAX_CONNECTIONS + extra {
        let mut s = TcpStream::connect(addr).await.expect("tcp connect");
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
