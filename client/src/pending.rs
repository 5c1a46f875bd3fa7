//! [`Pending`]: requests waiting for their answer on one stream, keyed by
//! request id. The stream's reader task resolves them; when the stream dies
//! every waiter gets the cause.

use std::collections::HashMap;

use starling_proto::Frame;
use tokio::sync::oneshot;

use crate::ClientError;
use crate::error::ProtocolError;

/// What a waiter receives: the answering frame, or why there is none.
pub(crate) type Reply = Result<Frame, ClientError>;

/// The waiters of one stream. `None` inside means the stream is dead.
#[derive(Default)]
pub(crate) struct Pending {
    waiters: parking_lot::Mutex<Option<HashMap<u64, oneshot::Sender<Reply>>>>,
}

impl Pending {
    /// An empty, live table.
    pub(crate) fn new() -> Self {
        Pending {
            waiters: parking_lot::Mutex::new(Some(HashMap::new())),
        }
    }

    /// Registers a waiter for `id`; fails with `Closed` once the stream is dead.
    pub(crate) fn register(&self, id: u64) -> Result<oneshot::Receiver<Reply>, ClientError> {
        let (tx, rx) = oneshot::channel();
        match self.waiters.lock().as_mut() {
            Some(map) => {
                map.insert(id, tx);
                Ok(rx)
            }
            None => Err(ClientError::Closed),
        }
    }

    /// Forgets the waiter for `id` (its caller gave up).
    pub(crate) fn remove(&self, id: u64) {
        if let Some(map) = self.waiters.lock().as_mut() {
            map.remove(&id);
        }
    }

    /// Hands `reply` to the waiter for `id`; `false` when nobody waits for it.
    pub(crate) fn resolve(&self, id: u64, reply: Reply) -> bool {
        let waiter = self.waiters.lock().as_mut().and_then(|m| m.remove(&id));
        match waiter {
            Some(tx) => {
                // The waiter may have been cancelled meanwhile; nothing to do then.
                let _ = tx.send(reply);
                true
            }
            None => false,
        }
    }

    /// Marks the stream dead and fails every waiter with a copy of `cause`.
    pub(crate) fn fail_all(&self, cause: &ClientError) {
        let waiters = self.waiters.lock().take();
        for (_, tx) in waiters.into_iter().flatten() {
            let _ = tx.send(Err(copy_error(cause)));
        }
    }

    /// Number of requests still waiting.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.waiters.lock().as_ref().map_or(0, HashMap::len)
    }
}

/// A copy of `e` for one more waiter (`ClientError` is not `Clone` because of `io::Error`).
pub(crate) fn copy_error(e: &ClientError) -> ClientError {
    match e {
        ClientError::Config(s) => ClientError::Config(s.clone()),
        ClientError::Connect(s) => ClientError::Connect(s.clone()),
        ClientError::Tls(s) => ClientError::Tls(s.clone()),
        ClientError::Connection(c) => ClientError::Connection(c.clone()),
        ClientError::Io(io) => ClientError::Io(std::io::Error::new(io.kind(), io.to_string())),
        ClientError::Protocol(p) => ClientError::Protocol(match p {
            ProtocolError::Decode(d) => ProtocolError::Decode(d.clone()),
            ProtocolError::TruncatedFrame => ProtocolError::TruncatedFrame,
            ProtocolError::UnexpectedFrame { expected, got } => {
                ProtocolError::UnexpectedFrame { expected, got }
            }
            ProtocolError::EndedEarly(what) => ProtocolError::EndedEarly(what),
            ProtocolError::Version(v) => ProtocolError::Version(*v),
        }),
        ClientError::Server { code, message } => ClientError::Server {
            code: *code,
            message: message.clone(),
        },
        ClientError::Credentials(c) => ClientError::Credentials(c.clone()),
        ClientError::Unauthorized(m) => ClientError::Unauthorized(m.clone()),
        ClientError::Forbidden { op, name, message } => ClientError::Forbidden {
            op: op.clone(),
            name: name.clone(),
            message: message.clone(),
        },
        ClientError::Timeout => ClientError::Timeout,
        ClientError::Closed => ClientError::Closed,
        ClientError::InvalidTopic(s) => ClientError::InvalidTopic(s.clone()),
        ClientError::InvalidKey(s) => ClientError::InvalidKey(s.clone()),
        ClientError::InvalidHeader(s) => ClientError::InvalidHeader(s.clone()),
        ClientError::InvalidGroup(s) => ClientError::InvalidGroup(s.clone()),
        ClientError::Unsupported(s) => ClientError::Unsupported(s.clone()),
        ClientError::NoResponders(s) => ClientError::NoResponders(s.clone()),
        ClientError::NotARequest => ClientError::NotARequest,
        ClientError::FrameTooLarge { len, max } => ClientError::FrameTooLarge {
            len: *len,
            max: *max,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::PublishAck;

    #[tokio::test]
    async fn resolves_by_id_and_fails_the_rest() {
        let p = Pending::new();
        let a = p.register(1).ok();
        let b = p.register(2).ok();
        let ack = Frame::PublishAck(PublishAck {
            request_id: 1,
            count: 1,
        });
        assert!(p.resolve(1, Ok(ack.clone())));
        assert!(!p.resolve(1, Ok(ack.clone())));
        assert_eq!(p.len(), 1);
        p.fail_all(&ClientError::Connection(quinn::ConnectionError::Reset));
        let a = match a {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        assert!(matches!(a, Some(Ok(f)) if f == ack));
        let b = match b {
            Some(rx) => rx.await.ok(),
            None => None,
        };
        assert!(matches!(
            b,
            Some(Err(ClientError::Connection(quinn::ConnectionError::Reset)))
        ));
        assert!(matches!(p.register(3), Err(ClientError::Closed)));
    }

    #[test]
    fn removed_waiters_are_not_resolved() {
        let p = Pending::new();
        let _rx = p.register(9);
        p.remove(9);
        assert!(!p.resolve(9, Err(ClientError::Timeout)));
    }

    #[test]
    fn copies_keep_the_variant() {
        let io = ClientError::Io(std::io::Error::new(std::io::ErrorKind::NotFound, "x"));
        assert!(
            matches!(copy_error(&io), ClientError::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
        );
        let big = ClientError::FrameTooLarge { len: 5, max: 4 };
        assert_eq!(copy_error(&big).to_string(), big.to_string());
    }
}
