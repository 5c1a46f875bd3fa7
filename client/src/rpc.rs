//! [`RpcStream`]: one bidirectional request/response stream (a publish stream
//! or a cache stream). Callers hand encoded frames to a writer task through a
//! bounded queue, so a cancelled caller can never leave half a frame on the
//! wire and a slow server pushes back on callers. A reader task matches each
//! answer to its waiter by request id. A publish stream may also carry a
//! [`PublishWindow`], which bounds its fire-and-forget bytes the broker has not
//! acknowledged.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use starling_proto::{AckMode, Frame, FrameDecoder, read_frame};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::ClientError;
use crate::connector::Conn;
use crate::error::ProtocolError;
use crate::handshake::ServerInfo;
use crate::pending::{Pending, Reply};
use crate::slot::Alive;
use crate::window::{Mark, PublishWindow};

/// Frames queued per stream before callers wait.
const QUEUE_DEPTH: usize = 1024;
/// The writer coalesces queued frames into writes of up to this many bytes.
const COALESCE_BYTES: usize = 256 * 1024;
/// Coalesced frames averaging less than this are copied into one buffer before writing.
const JOIN_BELOW_AVG_FRAME: usize = 4096;
/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

enum Command {
    Write(Bytes),
    Finish(oneshot::Sender<()>),
}

/// A request/response stream with its writer and reader tasks.
pub(crate) struct RpcStream {
    commands: mpsc::Sender<Command>,
    pending: Arc<Pending>,
    next_id: AtomicU64,
    dead: Arc<AtomicBool>,
    conn: quinn::Connection,
    info: Arc<ServerInfo>,
    reader: parking_lot::Mutex<Option<JoinHandle<()>>>,
    window: Option<PublishWindow>,
}

impl Alive for Arc<RpcStream> {
    fn is_alive(&self) -> bool {
        !self.dead.load(Ordering::Acquire) && self.conn.close_reason().is_none()
    }
}

impl RpcStream {
    /// Opens a stream on `conn` and starts its tasks.
    pub(crate) async fn open(conn: &Conn) -> Result<Arc<Self>, ClientError> {
        Self::open_windowed(conn, None).await
    }

    /// Opens a stream on `conn` whose [`RpcStream::send`] keeps at most about
    /// `window` bytes unacknowledged (`None`: unbounded).
    pub(crate) async fn open_windowed(
        conn: &Conn,
        window: Option<u64>,
    ) -> Result<Arc<Self>, ClientError> {
        let (send, recv) = conn.quic.open_bi().await?;
        let pending = Arc::new(Pending::new());
        let dead = Arc::new(AtomicBool::new(false));
        let (commands, queue) = mpsc::channel(QUEUE_DEPTH);
        tokio::spawn(write_loop(send, queue, pending.clone(), dead.clone()));
        let reader = tokio::spawn(read_loop(
            recv,
            conn.info.decoder(),
            Shared {
                pending: pending.clone(),
                dead: dead.clone(),
                // Weak, so the reader alone never keeps the stream open.
                replies: commands.downgrade(),
            },
        ));
        Ok(Arc::new(RpcStream {
            commands,
            pending,
            next_id: AtomicU64::new(1),
            dead,
            conn: conn.quic.clone(),
            info: conn.info.clone(),
            reader: parking_lot::Mutex::new(Some(reader)),
            window: window.map(PublishWindow::new),
        }))
    }

    /// Sends a fire-and-forget request of about `len` bytes without waiting for its answer.
    /// On a stream with a window it first waits for credit, and builds the frame with
    /// [`AckMode::Ack`] when it is the window's mark (its answer gives the credit back); every
    /// other frame is built with [`AckMode::None`]. Returns once the frame is queued for
    /// writing.
    pub(crate) async fn send(
        &self,
        len: usize,
        build: impl FnOnce(u64, AckMode) -> Frame,
        timeout: Duration,
    ) -> Result<(), ClientError> {
        tokio::time::timeout(timeout, async {
            let mark = match &self.window {
                Some(window) => window.reserve(len).await,
                None => None,
            };
            let id = self.next_id();
            let Some(mark) = mark else {
                let bytes = self.encode(build(id, AckMode::None))?;
                return self.enqueue(bytes).await;
            };
            let bytes = self.encode(build(id, AckMode::Ack))?;
            let answer = self.pending.register(id)?;
            let forget = OwnedForget {
                pending: Arc::clone(&self.pending),
                id,
            };
            self.enqueue(bytes).await?;
            tokio::spawn(release_on_answer(answer, mark, forget));
            Ok(())
        })
        .await
        .map_err(|_| ClientError::Timeout)?
    }

    /// Sends the frame built for a fresh request id and waits for its answer.
    /// An `Error` frame for the request comes back as [`ClientError::Server`].
    pub(crate) async fn call(
        &self,
        build: impl FnOnce(u64) -> Frame,
        timeout: Duration,
    ) -> Result<Frame, ClientError> {
        let id = self.next_id();
        let bytes = self.encode(build(id))?;
        let answer = self.pending.register(id)?;
        let forget = ForgetOnDrop {
            pending: &self.pending,
            id,
        };
        let result = tokio::time::timeout(timeout, async {
            self.enqueue(bytes).await?;
            answer.await.map_err(|_| ClientError::Closed)?
        })
        .await
        .map_err(|_| ClientError::Timeout)
        .and_then(|r| r);
        drop(forget);
        result
    }

    /// Queues the frame built for a fresh request id and returns a future for its answer, so a
    /// caller can issue requests in order without waiting for each answer in turn.
    pub(crate) async fn call_deferred(
        &self,
        build: impl FnOnce(u64) -> Frame,
        timeout: Duration,
    ) -> Result<impl Future<Output = Result<Frame, ClientError>> + Send + 'static, ClientError>
    {
        let id = self.next_id();
        let bytes = self.encode(build(id))?;
        let answer = self.pending.register(id)?;
        let forget = OwnedForget {
            pending: Arc::clone(&self.pending),
            id,
        };
        tokio::time::timeout(timeout, self.enqueue(bytes))
            .await
            .map_err(|_| ClientError::Timeout)??;
        Ok(async move {
            let _forget = forget;
            tokio::time::timeout(timeout, answer)
                .await
                .map_err(|_| ClientError::Timeout)?
                .map_err(|_| ClientError::Closed)?
        })
    }

    /// Writes everything queued, finishes the stream and waits (up to
    /// `timeout`) until the server has read it all and ended its side.
    pub(crate) async fn finish(&self, timeout: Duration) {
        let (done, finished) = oneshot::channel();
        let reader = self.reader.lock().take();
        let _ = tokio::time::timeout(timeout, async {
            if self.commands.send(Command::Finish(done)).await.is_ok() {
                let _ = finished.await;
            }
            if let Some(reader) = reader {
                let _ = reader.await;
            }
        })
        .await;
        self.dead.store(true, Ordering::Release);
    }

    /// What the server announced on this stream's connection.
    pub(crate) fn info(&self) -> &ServerInfo {
        &self.info
    }

    fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn encode(&self, frame: Frame) -> Result<Bytes, ClientError> {
        let len = frame.payload_len();
        let max = self.info.max_frame_bytes;
        if u64::try_from(len).map_or(true, |l| l > u64::from(max)) {
            return Err(ClientError::FrameTooLarge { len, max });
        }
        Ok(frame.to_bytes())
    }

    async fn enqueue(&self, bytes: Bytes) -> Result<(), ClientError> {
        self.commands
            .send(Command::Write(bytes))
            .await
            .map_err(|_| ClientError::Closed)
    }
}

/// Unregisters a waiter whose caller timed out or was cancelled.
struct ForgetOnDrop<'a> {
    pending: &'a Pending,
    id: u64,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.pending.remove(self.id);
    }
}

/// [`ForgetOnDrop`] for a future that outlives the borrow of its stream.
struct OwnedForget {
    pending: Arc<Pending>,
    id: u64,
}

impl Drop for OwnedForget {
    fn drop(&mut self) {
        self.pending.remove(self.id);
    }
}

/// Waits for the answer to a window's mark, then gives its credit back (also when the stream
/// ends first). A refusal is logged as a refused fire-and-forget request is.
async fn release_on_answer(answer: oneshot::Receiver<Reply>, mark: Mark, forget: OwnedForget) {
    match answer.await {
        Ok(Ok(_)) | Err(_) => {}
        Ok(Err(e @ (ClientError::Server { .. } | ClientError::Forbidden { .. }))) => {
            tracing::warn!(request_id = forget.id, "server refused request: {e}");
        }
        Ok(Err(e)) => tracing::debug!(error = %e, "publish stream ended before a window ack"),
    }
    drop(forget);
    drop(mark);
}

async fn write_loop(
    mut send: quinn::SendStream,
    mut queue: mpsc::Receiver<Command>,
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
) {
    let mut chunks: Vec<Bytes> = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut finish = None;
        let mut size = 0;
        match first {
            Command::Write(b) => {
                size += b.len();
                chunks.push(b);
            }
            Command::Finish(done) => finish = Some(done),
        }
        while finish.is_none() && size < COALESCE_BYTES {
            match queue.try_recv() {
                Ok(Command::Write(b)) => {
                    size += b.len();
                    chunks.push(b);
                }
                Ok(Command::Finish(done)) => finish = Some(done),
                Err(_) => break,
            }
        }
        if chunks.len() > 1 && size / chunks.len() < JOIN_BELOW_AVG_FRAME {
            // Small frames go out as one contiguous buffer: quinn locates a packet's data in its
            // send buffer by scanning the chunks it was given, so many small frames cost more in
            // that scan than the copy does (measured in docs/benchmarks.md). Large frames are
            // passed as they are, where the copy would cost more than it saves.
            let mut joined = BytesMut::with_capacity(size);
            for c in chunks.drain(..) {
                joined.extend_from_slice(&c);
            }
            chunks.push(joined.freeze());
        }
        if !chunks.is_empty() {
            if let Err(e) = send.write_all_chunks(&mut chunks).await {
                dead.store(true, Ordering::Release);
                pending.fail_all(&e.into());
                return;
            }
            chunks.clear();
        }
        if let Some(done) = finish {
            dead.store(true, Ordering::Release);
            let _ = send.finish();
            let _ = done.send(());
            return;
        }
    }
    // Every handle to the stream is gone: end it cleanly.
    let _ = send.finish();
}

/// What the reader task shares with the stream handle.
struct Shared {
    pending: Arc<Pending>,
    dead: Arc<AtomicBool>,
    replies: mpsc::WeakSender<Command>,
}

async fn read_loop(mut recv: quinn::RecvStream, decoder: FrameDecoder, shared: Shared) {
    let mut buf = BytesMut::new();
    let cause = loop {
        match read_frame(&mut recv, &mut buf, &decoder, READ_CHUNK).await {
            Ok(Some(frame)) => match dispatch(&shared.pending, frame) {
                Ok(None) => {}
                Ok(Some(reply)) => {
                    if let Some(tx) = shared.replies.upgrade() {
                        let _ = tx.send(Command::Write(reply.to_bytes())).await;
                    }
                }
                Err(e) => break e,
            },
            Ok(None) => break ClientError::Closed,
            Err(e) => break e.into(),
        }
    };
    match &cause {
        ClientError::Closed => tracing::debug!("request stream ended"),
        other => tracing::debug!(error = %other, "request stream failed"),
    }
    shared.dead.store(true, Ordering::Release);
    shared.pending.fail_all(&cause);
}

/// Hands one answer to its waiter; returns a frame to send back (a `Pong`)
/// when one is due. Errors end the stream.
fn dispatch(pending: &Pending, frame: Frame) -> Result<Option<Frame>, ClientError> {
    let (id, reply): (u64, Reply) = match frame {
        Frame::Ping(p) => return Ok(Some(Frame::Pong(p))),
        Frame::Pong(_) => return Ok(None),
        Frame::Error(e) if e.request_id == 0 => return Err(ClientError::server(e)),
        Frame::Error(e) => (e.request_id, Err(ClientError::server(e))),
        Frame::Moved(m) => (m.request_id, Err(ClientError::moved(m))),
        Frame::PublishAck(a) => (a.request_id, Ok(frame)),
        Frame::CacheOk(a) => (a.request_id, Ok(frame)),
        Frame::CacheValue(ref v) => (v.request_id, Ok(frame)),
        other => {
            return Err(ProtocolError::UnexpectedFrame {
                expected: "a response",
                got: other.name(),
            }
            .into());
        }
    };
    let warning = match &reply {
        Err(e) => Some(e.to_string()),
        Ok(_) => None,
    };
    if !pending.resolve(id, reply)
        && let Some(warning) = warning
    {
        // A fire-and-forget request (or one whose caller gave up) was refused.
        tracing::warn!(request_id = id, "server refused request: {warning}");
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use starling_proto::{CacheValue, ErrorCode, ErrorFrame, Ping, PublishAck};

    #[tokio::test]
    async fn dispatch_routes_answers_and_errors() {
        let p = Pending::new();
        let ack = p.register(4).ok();
        let err = p.register(5).ok();
        let ack_frame = Frame::PublishAck(PublishAck {
            request_id: 4,
            count: 2,
        });
        assert!(matches!(dispatch(&p, ack_frame.clone()), Ok(None)));
        let refused = Frame::Error(ErrorFrame {
            request_id: 5,
            code: ErrorCode::InvalidRequest,
            message: "nope".into(),
        });
        assert!(dispatch(&p, refused).is_ok());
        assert!(matches!(ack.map(|mut rx| rx.try_recv()), Some(Ok(Ok(f))) if f == ack_frame));
        assert!(matches!(
            err.map(|mut rx| rx.try_recv()),
            Some(Ok(Err(ClientError::Server {
                code: ErrorCode::InvalidRequest,
                ..
            })))
        ));
        // Answers nobody waits for are tolerated.
        let orphan = Frame::CacheValue(CacheValue {
            request_id: 99,
            value: None,
        });
        assert!(dispatch(&p, orphan).is_ok());
    }

    #[test]
    fn dispatch_ends_the_stream_on_stream_errors() {
        let p = Pending::new();
        let fatal = Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::Unavailable,
            message: "draining".into(),
        });
        assert!(matches!(
            dispatch(&p, fatal),
            Err(ClientError::Server {
                code: ErrorCode::Unavailable,
                ..
            })
        ));
        let stray = Frame::SubscribeOk(starling_proto::SubscribeOk {
            request_id: 1,
            subscription_id: 1,
        });
        assert!(matches!(
            dispatch(&p, stray),
            Err(ClientError::Protocol(ProtocolError::UnexpectedFrame {
                got: "subscribe_ok",
                ..
            }))
        ));
    }

    #[test]
    fn pings_are_answered_and_pongs_ignored() {
        let p = Pending::new();
        assert!(matches!(
            dispatch(&p, Frame::Ping(Ping { nonce: 1 })),
            Ok(Some(Frame::Pong(Ping { nonce: 1 })))
        ));
        assert!(matches!(
            dispatch(&p, Frame::Pong(Ping { nonce: 1 })),
            Ok(None)
        ));
    }
}
