//! [`Connector`]: opens one QUIC connection of a given kind and runs the
//! handshake on it, all within the connect timeout.

use std::sync::Arc;
use std::time::Duration;

use crate::ClientError;
use crate::addr::{resolve, server_name, split_host_port};
use crate::config::ClientConfig;
use crate::handshake::{Role, ServerInfo, handshake};
use crate::transport::{ConnKind, QuicConfigs, endpoint_for};

/// An open, handshaken connection.
#[derive(Clone)]
pub(crate) struct Conn {
    /// The QUIC connection.
    pub(crate) quic: quinn::Connection,
    /// What the server said in its handshake on this connection.
    pub(crate) info: Arc<ServerInfo>,
}

impl Conn {
    /// Whether the connection is still usable.
    pub(crate) fn is_alive(&self) -> bool {
        self.quic.close_reason().is_none()
    }
}

/// Opens connections to one server.
pub(crate) struct Connector {
    endpoint: quinn::Endpoint,
    configs: QuicConfigs,
    host: String,
    port: u16,
    server_name: String,
    client_name: String,
    connect_timeout: Duration,
    role: Role,
    /// A token user's token, sent in every `Hello` (never logged).
    token: Option<Arc<str>>,
}

impl Connector {
    /// Validates the address, builds TLS configs and binds the local endpoint.
    pub(crate) async fn new(cfg: &ClientConfig, role: Role) -> Result<Self, ClientError> {
        let (host, port) = split_host_port(&cfg.server)?;
        let configs = QuicConfigs::new(cfg)?;
        // Once per client: member nodes of a routing client share the bootstrap's settings.
        if cfg.trust == crate::Trust::Insecure && role != Role::Routed {
            tracing::warn!("TLS certificate verification is disabled (insecure mode)");
        }
        let first = tokio::time::timeout(cfg.connect_timeout, resolve(&host, port, None))
            .await
            .map_err(|_| ClientError::Timeout)??;
        Ok(Connector {
            endpoint: endpoint_for(first, &cfg.transport)?,
            configs,
            server_name: server_name(cfg.server_name.as_deref(), &host),
            host,
            port,
            client_name: cfg.client_name.clone(),
            connect_timeout: cfg.connect_timeout,
            role,
            token: cfg.credentials.auth_token().map(Arc::from),
        })
    }

    /// The local endpoint all connections share.
    pub(crate) fn endpoint(&self) -> &quinn::Endpoint {
        &self.endpoint
    }

    /// Runs `fut` (typically opening a stream) within the connect timeout.
    pub(crate) async fn bounded<T>(
        &self,
        fut: impl std::future::Future<Output = Result<T, ClientError>>,
    ) -> Result<T, ClientError> {
        tokio::time::timeout(self.connect_timeout, fut)
            .await
            .map_err(|_| ClientError::Timeout)?
    }

    /// Opens and handshakes a connection of `kind`.
    /// Running out of time is a [`ClientError::Connect`] naming the server.
    pub(crate) async fn connect(&self, kind: ConnKind) -> Result<Conn, ClientError> {
        tokio::time::timeout(self.connect_timeout, self.connect_inner(kind))
            .await
            .map_err(|_| {
                ClientError::Connect(format!(
                    "no answer from {}:{} within {:?}",
                    self.host, self.port, self.connect_timeout
                ))
            })?
    }

    async fn connect_inner(&self, kind: ConnKind) -> Result<Conn, ClientError> {
        let want_v6 = self.endpoint.local_addr().ok().map(|a| a.is_ipv6());
        let addr = resolve(&self.host, self.port, want_v6).await?;
        let connecting = self
            .endpoint
            .connect_with(self.configs.for_kind(kind, addr)?, addr, &self.server_name)
            .map_err(|e| ClientError::Connect(format!("{addr}: {e}")))?;
        let quic = connecting.await.map_err(setup_error)?;
        let info = match handshake(&quic, &self.client_name, self.role, self.token.as_deref()).await
        {
            Ok(info) => info,
            Err(e) => {
                quic.close(0u32.into(), b"handshake failed");
                return Err(e);
            }
        };
        tracing::debug!(kind = kind.name(), %addr, server = %info.server_id, "connected");
        Ok(Conn {
            quic,
            info: Arc::new(info),
        })
    }
}

/// Classifies a failure to establish a connection: TLS problems (crypto error
/// codes 0x100..=0x1ff, local or from the peer) become [`ClientError::Tls`].
fn setup_error(e: quinn::ConnectionError) -> ClientError {
    let crypto = |code: quinn::TransportErrorCode| (0x100..=0x1ff).contains(&u64::from(code));
    match &e {
        quinn::ConnectionError::TransportError(t) if crypto(t.code) => {
            ClientError::Tls(t.to_string())
        }
        quinn::ConnectionError::ConnectionClosed(c) if crypto(c.error_code) => {
            ClientError::Tls(c.to_string())
        }
        quinn::ConnectionError::TimedOut => {
            ClientError::Connect("no answer from the server".to_string())
        }
        _ => ClientError::Connect(e.to_string()),
    }
}
