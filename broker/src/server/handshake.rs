//! The Starling handshake on a connection's first stream: `Hello` in; the connection's identity
//! (its verified client certificate, or the token in `Hello`, see `auth::decide`); `HelloOk`
//! with the granted features, or a typed `Error` (`Unauthorized` naming why, never echoing the
//! token) and the reason, out.

use starling_proto::{
    ErrorCode, Frame, FrameDecoder, HelloOk, PROTOCOL_VERSION, ReadError, features, write_frame,
};

use crate::auth::decide::{Presented, Unauthorized, decide};
use crate::auth::{Auth, Principal, identity};
use crate::cluster::Cluster;
use crate::metrics::Metrics;
use crate::server::frames::{Allowance, FrameBuf, read_frame_within};
use crate::server::reply;

/// Features this broker offers. `AUTH_TOKEN` is granted only to a token user, `PEER` only to
/// a peer (see `auth::decide`); `CLUSTER` marks a routing client; `SUBSCRIBE_FROM_TIME` lets a
/// `Subscribe` carry a start time; `WILDCARDS` pattern subscriptions; `HEADERS` message
/// headers; `REQUEST` request/reply (`NoResponders`); `CONSUMERS` durable consumers;
/// `QUEUE_GROUPS` queue-group subscriptions; `DEDUP` publish de-duplication by message id.
pub const OFFERED_FEATURES: u64 = features::BATCH_PUBLISH
    | features::CACHE
    | features::CLUSTER
    | features::AUTH_TOKEN
    | features::PEER
    | features::SUBSCRIBE_FROM_TIME
    | features::WILDCARDS
    | features::HEADERS
    | features::REQUEST
    | features::QUEUE_GROUPS
    | features::CONSUMERS
    | features::DEDUP;

/// Why a handshake failed (also the reason the connection is closed with).
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// The first stream was never opened.
    #[error("{0}")]
    Accept(#[from] quinn::ConnectionError),
    /// The first frame was not `Hello`.
    #[error("expected Hello, got {0}")]
    NotHello(&'static str),
    /// The stream ended before `Hello`.
    #[error("stream closed before Hello")]
    Closed,
    /// `Hello` could not be read.
    #[error("{0}")]
    Read(ReadError),
    /// No protocol version in common.
    #[error("client speaks protocol versions {min}..={max}, broker speaks {PROTOCOL_VERSION}")]
    Version {
        /// The client's lowest version.
        min: u8,
        /// The client's highest version.
        max: u8,
    },
    /// No valid identity.
    #[error("unauthorized: {0}")]
    Unauthorized(#[from] Unauthorized),
    /// The client is authenticated but its connection's windows did not fit the connection
    /// buffer budget.
    #[error("connection buffer budget full: try again later")]
    Busy,
    /// `HelloOk` could not be written.
    #[error("{0}")]
    Write(std::io::Error),
}

/// What the handshake uses of the broker.
pub struct Context<'a> {
    /// Frame decoder bounded by `max_frame_bytes`.
    pub decoder: &'a FrameDecoder,
    /// Metrics.
    pub metrics: &'a Metrics,
    /// The epoch sent in `HelloOk`.
    pub cluster: &'a Cluster,
    /// The users table and the authentication mode.
    pub auth: &'a Auth,
    /// Name sent in `HelloOk`.
    pub server_id: &'a str,
    /// `max_frame_bytes`, sent in `HelloOk`.
    pub max_frame_bytes: u32,
}

/// Reads `Hello` on the first stream and answers `HelloOk` (returning the granted features,
/// who the connection is and what `admit` gave it), or an `Error` and the reason. `admit` runs
/// once the client is authenticated and before `HelloOk` is sent, so whatever it applies to
/// the connection (its full windows and stream limit) is in place when the client starts
/// using it; `None` refuses the connection as [`HandshakeError::Busy`].
pub async fn handshake<G>(
    conn: &quinn::Connection,
    cx: &Context<'_>,
    allowance: &Allowance,
    admit: impl FnOnce() -> Option<G>,
) -> Result<(u64, Principal, G), HandshakeError> {
    let Context {
        decoder,
        metrics,
        cluster,
        auth,
        server_id,
        max_frame_bytes,
    } = *cx;
    let (mut send, mut recv) = conn.accept_bi().await?;
    let mut buf = FrameBuf::new();
    let frame = read_frame_within(&mut recv, &mut buf, decoder, 4096, allowance).await;
    let hello = match frame {
        Ok(Some(Frame::Hello(hello))) => hello,
        Ok(Some(other)) => {
            let err = HandshakeError::NotHello(other.name());
            let code = ErrorCode::InvalidRequest;
            reply::error(&mut send, metrics, 0, code, err.to_string()).await;
            return Err(err);
        }
        Ok(None) => return Err(HandshakeError::Closed),
        Err(e) => {
            reply::read_failed(&mut send, metrics, &e).await;
            return Err(HandshakeError::Read(e));
        }
    };
    let Some(version) = hello.negotiate_version() else {
        let err = HandshakeError::Version {
            min: hello.min_version,
            max: hello.max_version,
        };
        let code = ErrorCode::UnsupportedVersion;
        reply::error(&mut send, metrics, 0, code, err.to_string()).await;
        let _ = send.finish();
        return Err(err);
    };
    let leaf = identity::client_leaf(conn);
    let common_name = leaf.as_ref().and_then(|l| identity::common_name(l));
    let uris = leaf
        .as_ref()
        .map(|l| identity::uri_sans(l))
        .unwrap_or_default();
    let presented = Presented {
        common_name: common_name.as_deref(),
        uris: &uris,
        requested: hello.features,
        token: hello.auth_token.as_deref(),
    };
    let users = auth.users();
    let (principal, identity_bits) = match decide(
        auth.mode(),
        auth.has_client_ca(),
        auth.peer_uri(),
        &users,
        &presented,
    ) {
        Ok(decided) => decided,
        Err(why) => {
            metrics
                .auth_failures
                .with_label_values(&[why.label()])
                .inc();
            let err = HandshakeError::Unauthorized(why);
            let code = ErrorCode::Unauthorized;
            reply::error(&mut send, metrics, 0, code, err.to_string()).await;
            let _ = send.finish();
            return Err(err);
        }
    };
    let identity_mask = !(features::PEER | features::AUTH_TOKEN) | identity_bits;
    let mut granted = hello.features & OFFERED_FEATURES & identity_mask;
    if matches!(principal, Principal::Peer) {
        // A peer is served as itself, never routed.
        granted &= !features::CLUSTER;
    }
    let Some(admitted) = admit() else {
        let err = HandshakeError::Busy;
        let code = ErrorCode::Unavailable;
        reply::error(&mut send, metrics, 0, code, err.to_string()).await;
        let _ = send.finish();
        return Err(err);
    };
    let ok = Frame::HelloOk(HelloOk {
        version,
        features: granted,
        server_id: server_id.to_string(),
        max_frame_bytes,
        epoch: cluster.epoch(),
    });
    write_frame(&mut send, &ok)
        .await
        .map_err(HandshakeError::Write)?;
    let _ = send.finish();
    let user = match &principal {
        Principal::User(u, _) => u.name().to_string(),
        Principal::Peer => "<peer>".to_string(),
        Principal::Anonymous => "<anonymous>".to_string(),
    };
    tracing::debug!(client = %loggable_name(&hello.client_name), %user, version, granted, "handshake complete");
    Ok((granted, principal, admitted))
}

/// Longest prefix of a client's self-chosen name (in characters) that reaches the logs.
const LOGGED_NAME_CHARS: usize = 64;

/// A client's self-chosen `Hello.client_name` as it may appear in a log line: at most
/// [`LOGGED_NAME_CHARS`] characters, with newlines, other control characters and quotes escaped,
/// so that a name can neither forge a log line nor flood the log.
fn loggable_name(name: &str) -> String {
    let mut out: String = name
        .chars()
        .take(LOGGED_NAME_CHARS)
        .flat_map(char::escape_debug)
        .collect();
    if name.chars().nth(LOGGED_NAME_CHARS).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::loggable_name;

    #[test]
    fn a_client_name_cannot_forge_or_flood_log_lines() {
        assert_eq!(loggable_name("starling-cli/0.1"), "starling-cli/0.1");
        let forged = "x\n2026-11-24T00:00:00Z  INFO admin logged in\r\u{1b}[2J";
        let logged = loggable_name(forged);
        assert!(!logged.contains('\n') && !logged.contains('\r') && !logged.contains('\u{1b}'));
        assert!(logged.starts_with("x\\n2026"), "{logged}");
        let long = "a".repeat(10_000);
        assert_eq!(loggable_name(&long), format!("{}…", "a".repeat(64)));
    }
}
