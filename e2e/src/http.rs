//! Minimal HTTP/1.1 GET over a TCP socket, for broker and operator endpoints reachable from the
//! node (pod IPs are routed on the node, and Service ClusterIPs through kube-proxy).

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::E2eError;

/// `GET path` on `addr`: status code and body.
pub async fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), E2eError> {
    let fut = async {
        let mut s = tokio::net::TcpStream::connect(addr)
            .await
            .map_err(|e| E2eError::Http(format!("{addr}: {e}")))?;
        let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes())
            .await
            .map_err(|e| E2eError::Http(e.to_string()))?;
        let mut raw = Vec::new();
        s.read_to_end(&mut raw)
            .await
            .map_err(|e| E2eError::Http(e.to_string()))?;
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
        Ok((status, body))
    };
    tokio::time::timeout(Duration::from_secs(10), fut)
        .await
        .map_err(|_| E2eError::Http(format!("{addr}{path}: no answer in 10s")))?
}
