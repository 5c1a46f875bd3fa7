//! [`ClientError`]: every way an SDK call can fail, plus the mapping from
//! quinn and wire-level errors onto it.

use starling_proto::{DecodeError, ErrorCode, ReadError};

use crate::credentials::CredentialsError;

/// The error type of every fallible SDK call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The client configuration is unusable (bad address, unreadable CA file, bad fingerprint…).
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The server could not be reached or the QUIC connection could not be set up.
    #[error("cannot connect: {0}")]
    Connect(String),
    /// TLS could not be configured or the server's certificate was rejected.
    #[error("tls: {0}")]
    Tls(String),
    /// An established connection failed or was closed by the server.
    #[error("connection lost: {0}")]
    Connection(quinn::ConnectionError),
    /// A local I/O failure (socket, file).
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    /// The server sent something that breaks the protocol.
    #[error("protocol error: {0}")]
    Protocol(#[from] ProtocolError),
    /// The server answered the request with an `Error` frame.
    #[error("server error {code}: {message}")]
    Server {
        /// Machine-readable reason.
        code: ErrorCode,
        /// Human-readable detail from the server.
        message: String,
    },
    /// No answer within the configured timeout.
    #[error("timed out")]
    Timeout,
    /// The client was closed, or the stream carrying the request ended.
    #[error("closed")]
    Closed,
    /// The topic is not valid (empty, too long, whitespace or control characters).
    #[error("invalid topic: {0}")]
    InvalidTopic(String),
    /// The cache key is not valid (empty or longer than the protocol allows).
    #[error("invalid cache key: {0}")]
    InvalidKey(String),
    /// A header name is not valid (empty, longer than 255 bytes, whitespace, a control
    /// character or `:`).
    #[error("invalid header: {0}")]
    InvalidHeader(String),
    /// A queue-group name is not valid (empty, longer than 64 bytes, or a character other than
    /// `A-Z a-z 0-9 - _ .`).
    #[error("invalid queue group: {0}")]
    InvalidGroup(String),
    /// A credentials directory or certificate/key file could not be used.
    #[error(transparent)]
    Credentials(#[from] CredentialsError),
    /// The broker refused the handshake: no credentials, or credentials it does not know
    /// (`ErrorCode::Unauthorized`). Retrying with the same credentials fails the same way.
    #[error("unauthorized: {0}")]
    Unauthorized(String),
    /// The broker refused one operation because the user's permissions do not allow it
    /// (`ErrorCode::Forbidden`). The connection and the client's other requests and
    /// subscriptions are unaffected.
    #[error("forbidden: {message}")]
    Forbidden {
        /// The operation refused: `publish`, `subscribe`, `cache_read` or `cache_write`.
        op: String,
        /// The topic or cache key (a key that is not UTF-8 is shown lossily).
        name: String,
        /// The broker's explanation, naming the user, the operation and the name.
        message: String,
    },
    /// The broker does not offer what the request needs (it is older than this client and did
    /// not grant the feature in the handshake); the request was not sent. Retrying at the same
    /// broker fails the same way.
    #[error("not supported by the broker: {0}")]
    Unsupported(String),
    /// A request ([`Client::request`](crate::Client::request)) found no subscriber on its
    /// topic (`ErrorCode::NoResponders`): nobody could answer it.
    #[error("no responders on topic {0:?}")]
    NoResponders(String),
    /// [`Client::reply`](crate::Client::reply) was given an event that is not a request (it
    /// has no `reply-to` header).
    #[error("the event is not a request: it has no reply-to header")]
    NotARequest,
    /// The request would exceed the server's `max_frame_bytes`.
    #[error("request of {len} bytes exceeds the server's frame limit of {max} bytes")]
    FrameTooLarge {
        /// Payload size of the frame that would have been sent.
        len: usize,
        /// The limit announced by the server in its handshake.
        max: u32,
    },
}

/// The operations a user's permissions govern, as [`ClientError::Forbidden`] names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Operation {
    Publish,
    Subscribe,
    CacheRead,
    CacheWrite,
}

impl Operation {
    /// The name used in [`ClientError::Forbidden::op`] (and in the users document).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Operation::Publish => "publish",
            Operation::Subscribe => "subscribe",
            Operation::CacheRead => "cache_read",
            Operation::CacheWrite => "cache_write",
        }
    }
}

/// A protocol violation by the server.
#[derive(Debug, thiserror::Error)]
pub enum ProtocolError {
    /// Bytes that do not decode as a frame.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The stream ended in the middle of a frame.
    #[error("stream ended in the middle of a frame")]
    TruncatedFrame,
    /// A well-formed frame that has no business on this stream at this point.
    #[error("unexpected {got} frame, expected {expected}")]
    UnexpectedFrame {
        /// What the client was waiting for.
        expected: &'static str,
        /// The frame type that arrived.
        got: &'static str,
    },
    /// The stream ended before the expected answer arrived.
    #[error("stream ended before {0}")]
    EndedEarly(&'static str),
    /// The server does not speak protocol version 1.
    #[error("server chose unsupported protocol version {0}")]
    Version(u8),
}

impl ClientError {
    /// Builds a [`ClientError::Server`] from an `Error` frame (a refused handshake,
    /// `Unauthorized`, is [`ClientError::Unauthorized`]).
    pub(crate) fn server(frame: starling_proto::ErrorFrame) -> Self {
        match frame.code {
            // The broker's reason may already say "unauthorized: "; the variant's message does.
            ErrorCode::Unauthorized => ClientError::Unauthorized(
                frame
                    .message
                    .strip_prefix("unauthorized: ")
                    .map_or(frame.message.clone(), str::to_string),
            ),
            code => ClientError::Server {
                code,
                message: frame.message,
            },
        }
    }

    /// Names the refused operation in a `Forbidden` answer: the layers below only see an
    /// `Error` frame, the public call knows which operation on which name it made. Any other
    /// error is returned as it is.
    pub(crate) fn in_operation(self, op: Operation, name: &[u8]) -> Self {
        match self {
            ClientError::Server {
                code: ErrorCode::Forbidden,
                message,
            } => ClientError::Forbidden {
                op: op.as_str().to_string(),
                name: String::from_utf8_lossy(name).into_owned(),
                message,
            },
            other => other,
        }
    }

    /// Builds a [`ClientError::Server`] with code `Moved` from a `Moved` frame.
    pub(crate) fn moved(frame: starling_proto::Moved) -> Self {
        ClientError::Server {
            code: ErrorCode::Moved,
            message: format!(
                "owned by the member at {} (membership epoch {:#x})",
                frame.owner, frame.epoch
            ),
        }
    }

    /// Whether the error means the link to the server is broken, as opposed to one request
    /// being refused: the connection could not be made, was lost or closed, timed out, failed
    /// locally or failed TLS. A new connection may help; resending on this one will not.
    pub fn is_link_failure(&self) -> bool {
        matches!(
            self,
            ClientError::Connect(_)
                | ClientError::Connection(_)
                | ClientError::Closed
                | ClientError::Timeout
                | ClientError::Io(_)
                | ClientError::Tls(_)
        )
    }

    /// Whether the broker lacks a feature the request needs ([`ClientError::Unsupported`]).
    pub fn is_unsupported(&self) -> bool {
        matches!(self, ClientError::Unsupported(_))
    }

    /// Whether the same request can succeed if made again later: a broken link (except a TLS
    /// refusal, which repeats) or a refusal by the server (a member that is draining, a topic
    /// that moved). Configuration, validation and protocol errors repeat and are not transient.
    pub fn is_transient(&self) -> bool {
        matches!(self, ClientError::Server { .. })
            || (self.is_link_failure() && !matches!(self, ClientError::Tls(_)))
    }
}

impl From<quinn::ConnectionError> for ClientError {
    fn from(e: quinn::ConnectionError) -> Self {
        match e {
            quinn::ConnectionError::LocallyClosed => ClientError::Closed,
            other => ClientError::Connection(other),
        }
    }
}

impl From<quinn::WriteError> for ClientError {
    fn from(e: quinn::WriteError) -> Self {
        match e {
            quinn::WriteError::ConnectionLost(c) => c.into(),
            _ => ClientError::Closed,
        }
    }
}

impl From<quinn::ClosedStream> for ClientError {
    fn from(_: quinn::ClosedStream) -> Self {
        ClientError::Closed
    }
}

impl From<ReadError> for ClientError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Io(io) => from_stream_io(io),
            ReadError::Decode(d) => ClientError::Protocol(ProtocolError::Decode(d)),
            ReadError::UnexpectedEof => ClientError::Protocol(ProtocolError::TruncatedFrame),
        }
    }
}

/// Recovers the quinn error hidden inside an `io::Error` from a stream read.
fn from_stream_io(io: std::io::Error) -> ClientError {
    let inner = io
        .get_ref()
        .and_then(|e| e.downcast_ref::<quinn::ReadError>())
        .cloned();
    match inner {
        Some(quinn::ReadError::ConnectionLost(c)) => c.into(),
        Some(_) => ClientError::Closed,
        None => ClientError::Io(io),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_failures_and_transient_errors_are_told_apart() {
        let server = ClientError::Server {
            code: ErrorCode::Moved,
            message: "elsewhere".into(),
        };
        let tls = ClientError::Tls("bad certificate".into());
        let topic = ClientError::InvalidTopic("".into());
        assert!(ClientError::Closed.is_link_failure() && ClientError::Closed.is_transient());
        assert!(ClientError::Timeout.is_link_failure() && ClientError::Timeout.is_transient());
        // A TLS refusal breaks the link but repeats on every attempt.
        assert!(tls.is_link_failure() && !tls.is_transient());
        // A server refusal leaves the link up, and may succeed later.
        assert!(!server.is_link_failure() && server.is_transient());
        assert!(!topic.is_link_failure() && !topic.is_transient());
    }

    #[test]
    fn refusals_by_permission_and_handshake_are_typed() {
        let frame = |code| starling_proto::ErrorFrame {
            request_id: 3,
            code,
            message: "user \"bob\" may not publish topic \"orders.eu\"".into(),
        };
        let forbidden = ClientError::server(frame(ErrorCode::Forbidden))
            .in_operation(Operation::Publish, b"orders.eu");
        match &forbidden {
            ClientError::Forbidden { op, name, message } => {
                assert_eq!((op.as_str(), name.as_str()), ("publish", "orders.eu"));
                assert!(message.contains("bob"), "{message}");
            }
            other => panic!("not forbidden: {other:?}"),
        }
        assert_eq!(
            forbidden.to_string(),
            "forbidden: user \"bob\" may not publish topic \"orders.eu\""
        );
        // A refusal repeats: neither is retried, and neither breaks the link.
        assert!(!forbidden.is_transient() && !forbidden.is_link_failure());
        let unauthorized = ClientError::server(frame(ErrorCode::Unauthorized));
        assert!(matches!(unauthorized, ClientError::Unauthorized(_)));
        let said_twice = ClientError::server(starling_proto::ErrorFrame {
            request_id: 0,
            code: ErrorCode::Unauthorized,
            message: "unauthorized: no credentials".into(),
        });
        assert_eq!(said_twice.to_string(), "unauthorized: no credentials");
        assert!(!unauthorized.is_transient());
        // Other codes stay server errors, whatever the operation.
        let moved = ClientError::server(frame(ErrorCode::Unavailable))
            .in_operation(Operation::CacheRead, b"k");
        assert!(matches!(
            moved,
            ClientError::Server {
                code: ErrorCode::Unavailable,
                ..
            }
        ));
        let names = [
            Operation::Publish,
            Operation::Subscribe,
            Operation::CacheRead,
            Operation::CacheWrite,
        ]
        .map(Operation::as_str);
        assert_eq!(names, ["publish", "subscribe", "cache_read", "cache_write"]);
    }

    #[test]
    fn read_errors_map_to_typed_variants() {
        let lost = quinn::ReadError::ConnectionLost(quinn::ConnectionError::TimedOut);
        let e: ClientError = ReadError::Io(std::io::Error::from(lost)).into();
        assert!(matches!(
            e,
            ClientError::Connection(quinn::ConnectionError::TimedOut)
        ));
        let e: ClientError = ReadError::UnexpectedEof.into();
        assert!(matches!(
            e,
            ClientError::Protocol(ProtocolError::TruncatedFrame)
        ));
        let e: ClientError = ReadError::Io(std::io::Error::other("x")).into();
        assert!(matches!(e, ClientError::Io(_)));
        let e: ClientError = quinn::ConnectionError::LocallyClosed.into();
        assert!(matches!(e, ClientError::Closed));
    }
}
