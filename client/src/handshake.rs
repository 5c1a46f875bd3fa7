//! The per-connection handshake: `Hello` up, `HelloOk` (or `Error`) down on the
//! connection's first bidirectional stream, and [`ServerInfo`], what it tells us.

use bytes::BytesMut;
use starling_proto::{Frame, FrameDecoder, Hello, HelloOk, PROTOCOL_VERSION, features, read_frame};

use crate::ClientError;
use crate::error::ProtocolError;

/// Largest handshake answer accepted before the server's own limit is known.
const HANDSHAKE_MAX_FRAME: u32 = 64 * 1024;

// What a connection announces about itself in `Hello`: the protocol's roles, whose feature
// bits `Role::requested` gives. A `Client` connects as `Plain` and its member nodes as
// `Routed`; a `Direct` link as its caller says.
pub(crate) use starling_proto::Role;

/// What the server said about itself in `HelloOk`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// Negotiated protocol version (`starling_proto::PROTOCOL_VERSION`).
    pub version: u8,
    /// Feature bits granted (see `starling_proto::features`).
    pub features: u64,
    /// The broker instance's identifier.
    pub server_id: String,
    /// Largest frame payload the server accepts.
    pub max_frame_bytes: u32,
    /// The server's epoch (changes when the broker restarts).
    pub epoch: u64,
}

impl ServerInfo {
    /// Whether the server granted `feature` (a `starling_proto::features` bit).
    pub fn has_feature(&self, feature: u64) -> bool {
        self.features & feature == feature
    }

    /// A decoder for frames from this server. Frames from the server are never
    /// larger than what it accepts itself, plus some slack for batch framing.
    pub(crate) fn decoder(&self) -> FrameDecoder {
        FrameDecoder::new(self.max_frame_bytes.saturating_add(64 * 1024))
    }
}

impl From<HelloOk> for ServerInfo {
    fn from(ok: HelloOk) -> Self {
        ServerInfo {
            version: ok.version,
            features: ok.features,
            server_id: ok.server_id,
            max_frame_bytes: ok.max_frame_bytes,
            epoch: ok.epoch,
        }
    }
}

/// The `Hello` frame this client sends: the role's features, plus `AUTH_TOKEN` and the token
/// when the client authenticates as a token user.
pub(crate) fn hello(client_name: &str, role: Role, token: Option<&str>) -> Frame {
    let auth = if token.is_some() {
        features::AUTH_TOKEN
    } else {
        0
    };
    Frame::Hello(Hello {
        min_version: PROTOCOL_VERSION,
        max_version: PROTOCOL_VERSION,
        features: role.requested() | auth,
        client_name: client_name.to_string(),
        auth_token: token.map(|t| bytes::Bytes::copy_from_slice(t.as_bytes())),
    })
}

/// Interprets the server's answer to `Hello`.
pub(crate) fn answer(frame: Option<Frame>) -> Result<ServerInfo, ClientError> {
    match frame {
        Some(Frame::HelloOk(ok)) if ok.version == PROTOCOL_VERSION => Ok(ok.into()),
        Some(Frame::HelloOk(ok)) => Err(ProtocolError::Version(ok.version).into()),
        Some(Frame::Error(e)) => Err(ClientError::server(e)),
        Some(other) => Err(ProtocolError::UnexpectedFrame {
            expected: "hello_ok",
            got: other.name(),
        }
        .into()),
        None => Err(ProtocolError::EndedEarly("hello_ok").into()),
    }
}

/// Runs the handshake on a fresh connection.
pub(crate) async fn handshake(
    conn: &quinn::Connection,
    client_name: &str,
    role: Role,
    token: Option<&str>,
) -> Result<ServerInfo, ClientError> {
    let (mut send, mut recv) = conn.open_bi().await?;
    send.write_all(&hello(client_name, role, token).to_bytes())
        .await?;
    let mut buf = BytesMut::new();
    let frame = read_frame(
        &mut recv,
        &mut buf,
        &FrameDecoder::new(HANDSHAKE_MAX_FRAME),
        4096,
    )
    .await?;
    // The handshake stream has done its job; failure to finish it is harmless.
    let _ = send.finish();
    answer(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{ErrorCode, ErrorFrame, Ping};

    fn ok(version: u8) -> Frame {
        Frame::HelloOk(HelloOk {
            version,
            features: features::CACHE,
            server_id: "b-0".into(),
            max_frame_bytes: 1024,
            epoch: 7,
        })
    }

    fn hello_of(role: Role, token: Option<&str>) -> Hello {
        match hello("me", role, token) {
            Frame::Hello(h) => h,
            other => panic!("not a hello: {other:?}"),
        }
    }

    #[test]
    fn hello_offers_the_protocol_version_and_features() {
        let h = hello_of(Role::Plain, None);
        assert_eq!((h.min_version, h.max_version), (2, 2));
        assert_eq!(
            h.features,
            features::BATCH_PUBLISH
                | features::CACHE
                | features::SUBSCRIBE_FROM_TIME
                | features::WILDCARDS
                | features::HEADERS
                | features::REQUEST
                | features::QUEUE_GROUPS
                | features::CONSUMERS
                | features::DEDUP
        );
        assert_eq!(h.client_name, "me");
        assert_eq!(h.auth_token, None);
        let routed = hello_of(Role::Routed, None);
        assert!(routed.features & features::CLUSTER != 0);
        assert!(routed.features & features::WILDCARDS != 0);
        assert!(routed.features & features::HEADERS != 0);
        assert!(routed.features & features::QUEUE_GROUPS != 0);
        assert!(routed.features & features::DEDUP != 0);
        // A broker's peer link (`Direct` as `Peer`) subscribes to patterns and groups for the
        // member's own subscribers, and forwards requests.
        let peer = hello_of(Role::Peer, None);
        assert_eq!(
            peer.features,
            features::BASE
                | features::PEER
                | features::HEADERS
                | features::DEDUP
                | features::WILDCARDS
                | features::QUEUE_GROUPS
                | features::REQUEST
        );
        assert_eq!(peer.auth_token, None);
    }

    #[test]
    fn a_token_user_sends_the_token_and_the_auth_token_bit() {
        for role in [Role::Plain, Role::Routed] {
            let h = hello_of(role, Some("s3cret"));
            assert_eq!(h.features, role.requested() | features::AUTH_TOKEN);
            assert_eq!(h.auth_token.as_deref(), Some(&b"s3cret"[..]));
        }
        // No token, no bit: a certificate user is known by its certificate.
        assert_eq!(
            hello_of(Role::Plain, None).features & features::AUTH_TOKEN,
            0
        );
    }

    #[test]
    fn a_refused_handshake_is_unauthorized() {
        let refused = Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::Unauthorized,
            message: "unknown token".into(),
        });
        assert!(matches!(
            answer(Some(refused)),
            Err(ClientError::Unauthorized(m)) if m == "unknown token"
        ));
    }

    #[test]
    fn answers_are_interpreted() {
        let info = answer(Some(ok(2))).ok();
        assert_eq!(info.as_ref().map(|i| i.epoch), Some(7));
        assert!(
            info.as_ref()
                .is_some_and(|i| i.has_feature(features::CACHE))
        );
        assert!(info.is_some_and(|i| !i.has_feature(features::BATCH_PUBLISH)));
        assert!(matches!(
            answer(Some(ok(1))),
            Err(ClientError::Protocol(ProtocolError::Version(1)))
        ));
        let refused = Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::UnsupportedVersion,
            message: "no".into(),
        });
        assert!(matches!(
            answer(Some(refused)),
            Err(ClientError::Server {
                code: ErrorCode::UnsupportedVersion,
                ..
            })
        ));
        assert!(matches!(
            answer(Some(Frame::Ping(Ping { nonce: 1 }))),
            Err(ClientError::Protocol(ProtocolError::UnexpectedFrame {
                got: "ping",
                ..
            }))
        ));
        assert!(matches!(
            answer(None),
            Err(ClientError::Protocol(ProtocolError::EndedEarly(_)))
        ));
    }
}
