//! [`http_get`]: one plain HTTP/1.1 GET against a broker's HTTP listener (`/metrics`,
//! `/healthz`, `/readyz`, `/config`), without an HTTP client dependency.

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One HTTP/1.1 GET: the status and the body. Status 0 means no answer: the connection was
/// refused, or reset before a response (a listener closing with the connection still in its
/// accept queue resets it); the body then says why. Callers that expect an answer assert on
/// the status, so they still fail, with the reason.
pub async fn http_get(addr: SocketAddr, path: &str) -> (u16, String) {
    let mut s = match tokio::net::TcpStream::connect(addr).await {
        Ok(s) => s,
        Err(e) => return (0, format!("connect: {e}")),
    };
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    if let Err(e) = s.write_all(req.as_bytes()).await {
        return (0, format!("write: {e}"));
    }
    let mut raw = Vec::new();
    if let Err(e) = s.read_to_end(&mut raw).await {
        return (0, format!("read: {e}"));
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}
