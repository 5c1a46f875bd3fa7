//! The autoscaler's one HTTP client: `GET` a URL and read the status and body, with a deadline,
//! a body cap and an optional bearer token. Both signal sources use it: the direct scrape of
//! every broker pod's `/metrics` (plain HTTP to pod IPs) and the Prometheus query API (HTTP or
//! HTTPS, possibly behind a token, as OpenShift's Thanos querier is).
//!
//! It is hyper-util's pooled client over hyper-rustls (TLS 1.2/1.3, the ring provider, HTTP/1.1
//! with keep-alive); HTTPS servers are verified against the system's roots plus an optional CA
//! bundle (`--prometheus-ca`). Nothing here parses HTTP by hand.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// The CA bundle could not be read.
    #[error("CA file {path}: {source}")]
    CaFile {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
    /// The CA bundle holds no usable certificate.
    #[error("CA file {0}: no PEM certificate in it")]
    NoCertificate(PathBuf),
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Why one `GET` gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// The URL cannot be requested (not `http`/`https`, no host).
    #[error("cannot request `{0}`")]
    Url(String),
    /// Connecting, the TLS handshake, sending or receiving failed.
    #[error("{0}")]
    Transport(String),
    /// No complete answer within the deadline.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The body is larger than the cap.
    #[error("answer larger than {0} bytes")]
    TooLarge(usize),
    /// The bearer token file could not be read.
    #[error("bearer token file {path}: {source}")]
    Token {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

/// An answer: the status code and the whole body (at most the cap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The HTTP status code.
    pub status: u16,
    /// The body.
    pub body: Bytes,
}

/// A `GET` client. Cheap to clone (the connection pool is shared).
#[derive(Clone)]
pub struct Fetcher {
    client: Client<HttpsConnector<HttpConnector>, Empty<Bytes>>,
}

impl std::fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Fetcher")
    }
}

impl Fetcher {
    /// A client that trusts the system's roots and, when given, the certificates in `ca_file`.
    pub fn new(ca_file: Option<&Path>) -> Result<Fetcher, TlsSetupError> {
        let mut roots = rustls::RootCertStore::empty();
        // Unreadable system certificates are skipped: a CA file may be all that is needed.
        let native = rustls_native_certs::load_native_certs();
        roots.add_parsable_certificates(native.certs);
        if let Some(path) = ca_file {
            let pem = std::fs::read(path).map_err(|source| TlsSetupError::CaFile {
                path: path.to_path_buf(),
                source,
            })?;
            let certs: Vec<_> = rustls_pemfile::certs(&mut pem.as_slice())
                .filter_map(Result::ok)
                .collect();
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(TlsSetupError::NoCertificate(path.to_path_buf()));
            }
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .build(connector);
        Ok(Fetcher { client })
    }

    /// `GET url` with `accept` as the `Accept` header and, when given, `Authorization: Bearer
    /// <token>`; the whole answer within `timeout`, its body at most `max_body` bytes.
    pub async fn get(
        &self,
        url: &str,
        accept: &str,
        bearer: Option<&str>,
        timeout: Duration,
        max_body: usize,
    ) -> Result<Answer, FetchError> {
        let uri: http::Uri = url.parse().map_err(|_| FetchError::Url(url.to_string()))?;
        if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
            return Err(FetchError::Url(url.to_string()));
        }
        let mut request = http::Request::get(uri).header(http::header::ACCEPT, accept);
        if let Some(token) = bearer {
            request = request.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request
            .body(Empty::new())
            .map_err(|_| FetchError::Url(url.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| FetchError::Transport(error_chain(&e)))?;
            let status = response.status().as_u16();
            let body = Limited::new(response.into_body(), max_body)
                .collect()
                .await
                .map_err(|e| {
                    if e.is::<http_body_util::LengthLimitError>() {
                        FetchError::TooLarge(max_body)
                    } else {
                        FetchError::Transport(e.to_string())
                    }
                })?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| FetchError::Timeout(timeout))?
    }
}

/// Reads a bearer token file (a projected service-account token rotates, so it is read for every
/// round), trimmed of surrounding whitespace.
pub fn read_token(path: &Path) -> Result<String, FetchError> {
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_string())
        .map_err(|source| FetchError::Token {
            path: path.to_path_buf(),
            source,
        })
}

/// An error and its causes on one line: hyper-util's errors say only "client error (Connect)"
/// at the top and the reason underneath.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-shot HTTP/1.1 server that answers `answer` and hands back the request head.
    async fn serve_once(
        answer: &'static str,
    ) -> std::io::Result<(String, tokio::task::JoinHandle<String>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/metrics", listener.local_addr()?);
        let task = tokio::spawn(async move {
            let Ok((mut s, _)) = listener.accept().await else {
                return String::new();
            };
            let mut buf = vec![0u8; 8192];
            let n = s.read(&mut buf).await.unwrap_or(0);
            let _ = s.write_all(answer.as_bytes()).await;
            String::from_utf8_lossy(buf.get(..n).unwrap_or_default()).into_owned()
        });
        Ok((url, task))
    }

    #[tokio::test]
    async fn gets_status_and_body_and_sends_the_token() -> Result<(), Box<dyn std::error::Error>> {
        let (url, server) =
            serve_once("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 8\r\n\r\ndraining")
                .await?;
        let f = Fetcher::new(None)?;
        let a = f
            .get(
                &url,
                "text/plain",
                Some("s3cret"),
                Duration::from_secs(5),
                1024,
            )
            .await?;
        assert_eq!((a.status, &a.body[..]), (503, &b"draining"[..]));
        let head = server.await?.to_ascii_lowercase();
        assert!(head.starts_with("get /metrics http/1.1\r\n"), "{head}");
        assert!(
            head.contains("\r\nauthorization: bearer s3cret\r\n"),
            "{head}"
        );
        assert!(head.contains("\r\naccept: text/plain\r\n"), "{head}");
        Ok(())
    }

    #[tokio::test]
    async fn a_chunked_body_is_read_and_a_large_one_refused()
    -> Result<(), Box<dyn std::error::Error>> {
        let chunked =
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
        let (url, _server) = serve_once(chunked).await?;
        let f = Fetcher::new(None)?;
        let a = f
            .get(&url, "*/*", None, Duration::from_secs(5), 1024)
            .await?;
        assert_eq!((a.status, &a.body[..]), (200, &b"abcde"[..]));
        let (url, _server) = serve_once(chunked).await?;
        let e = f.get(&url, "*/*", None, Duration::from_secs(5), 4).await;
        assert!(matches!(e, Err(FetchError::TooLarge(4))), "{e:?}");
        Ok(())
    }

    #[tokio::test]
    async fn silence_times_out_and_nothing_listening_is_a_transport_error()
    -> Result<(), Box<dyn std::error::Error>> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/", listener.local_addr()?);
        let f = Fetcher::new(None)?;
        let e = f
            .get(&url, "*/*", None, Duration::from_millis(200), 1024)
            .await;
        assert!(matches!(e, Err(FetchError::Timeout(_))), "{e:?}");
        drop(listener);
        let e = f.get(&url, "*/*", None, Duration::from_secs(5), 1024).await;
        assert!(matches!(e, Err(FetchError::Transport(_))), "{e:?}");
        for bad in ["ftp://x/", "/relative", "http:///nohost"] {
            let e = f.get(bad, "*/*", None, Duration::from_secs(1), 1024).await;
            assert!(matches!(e, Err(FetchError::Url(_))), "{bad}: {e:?}");
        }
        Ok(())
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() -> std::io::Result<()> {
        let dir = std::env::temp_dir().join(format!("starling-fetch-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n")?;
        assert!(matches!(
            Fetcher::new(Some(&empty)),
            Err(TlsSetupError::NoCertificate(_))
        ));
        assert!(matches!(
            Fetcher::new(Some(&dir.join("absent.pem"))),
            Err(TlsSetupError::CaFile { .. })
        ));
        let token = dir.join("token");
        std::fs::write(&token, "  abc.def \n")?;
        assert_eq!(read_token(&token).ok().as_deref(), Some("abc.def"));
        std::fs::remove_dir_all(&dir)
    }
}
