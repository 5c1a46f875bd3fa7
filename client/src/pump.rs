//! The task behind a subscription: owns the stream, decodes `EventBatch`
//! frames (on a wildcard subscription, each with the topic the `BatchTopic`
//! before it named, and with the headers of the `EventHeaders` before it) and hands them to the [`Subscription`](crate::Subscription) through
//! a small bounded channel, answers `Ping`s, and sends `Unsubscribe` when
//! asked. While the application is slow the task stops reading, so QUIC flow
//! control pushes back on the broker, which then applies its slow-subscriber
//! policy.

use std::time::Duration;

use bytes::BytesMut;
use starling_proto::{Frame, FrameDecoder, Unsubscribe, read_frame};
use tokio::sync::{mpsc, oneshot};

use crate::ClientError;
use crate::error::ProtocolError;
use crate::feed::{BatchItem, Delivery, StopRequest};

/// Bytes asked for per read.
const READ_CHUNK: usize = 64 * 1024;

/// The stream of an accepted subscription, with bytes already read past `SubscribeOk`.
pub(crate) struct SubscriptionIo {
    pub(crate) send: quinn::SendStream,
    pub(crate) recv: quinn::RecvStream,
    pub(crate) buf: BytesMut,
    pub(crate) decoder: FrameDecoder,
    pub(crate) subscription_id: u64,
    pub(crate) write_timeout: Duration,
}

/// Runs until the stream ends or fails, the subscription is dropped, or an
/// unsubscribe request arrives on `stop`.
pub(crate) async fn pump(
    mut io: SubscriptionIo,
    out: mpsc::Sender<BatchItem>,
    mut stop: oneshot::Receiver<StopRequest>,
) {
    // The topic the last `BatchTopic` named and the headers the last `EventHeaders` carried,
    // for the `EventBatch` after them.
    let mut topic = None;
    let mut headers = Vec::new();
    loop {
        let next = tokio::select! {
            r = read_frame(&mut io.recv, &mut io.buf, &io.decoder, READ_CHUNK) => r,
            () = out.closed() => return,
            req = &mut stop => return unsubscribe(&mut io, req.ok()).await,
        };
        let item = match next {
            Ok(Some(Frame::Ping(p))) => {
                let pong = Frame::Pong(p).to_bytes();
                let _ = tokio::time::timeout(io.write_timeout, io.send.write_all(&pong)).await;
                continue;
            }
            Ok(Some(Frame::BatchTopic(t))) => {
                topic = Some(std::sync::Arc::from(t.topic));
                continue;
            }
            Ok(Some(Frame::EventHeaders(h))) => {
                headers = h.entries;
                continue;
            }
            Ok(Some(frame)) => match classify(frame) {
                Some(Ok(batch)) => {
                    let headers = std::mem::take(&mut headers);
                    if headers_fit(&headers, batch.events.len()) {
                        Ok(Delivery {
                            topic: topic.take(),
                            batch,
                            headers,
                        })
                    } else {
                        Err(ProtocolError::UnexpectedFrame {
                            expected: "event headers indexing the next batch's events",
                            got: "event_headers",
                        }
                        .into())
                    }
                }
                Some(Err(e)) => Err(e),
                None => continue,
            },
            // The server ended the subscription.
            Ok(None) => return,
            Err(e) => match ClientError::from(e) {
                // Stream reset or client closed: a quiet end.
                ClientError::Closed => return,
                other => Err(other),
            },
        };
        let fatal = item.is_err();
        tokio::select! {
            sent = out.send(item) => if sent.is_err() || fatal {
                return;
            },
            req = &mut stop => return unsubscribe(&mut io, req.ok()).await,
        }
    }
}

/// Sends `Unsubscribe`, finishes the stream and reports back to the waiter
/// (none when the subscription was simply dropped).
async fn unsubscribe(io: &mut SubscriptionIo, done: Option<StopRequest>) {
    if let Some(done) = done {
        let frame = Frame::Unsubscribe(Unsubscribe {
            request_id: 2,
            subscription_id: io.subscription_id,
        });
        let bytes = frame.to_bytes();
        let _ = tokio::time::timeout(io.write_timeout, io.send.write_all(&bytes)).await;
        let _ = io.send.finish();
        let _ = done.send(());
    }
}

/// Whether every index of an `EventHeaders` names an event of the batch after it (indices
/// increase strictly, so the last one decides).
fn headers_fit(headers: &[starling_proto::IndexedHeaders], events: usize) -> bool {
    headers
        .last()
        .is_none_or(|h| usize::try_from(h.index).is_ok_and(|i| i < events))
}

/// What one frame on a subscription stream means; `None` for frames to skip.
fn classify(frame: Frame) -> Option<Result<starling_proto::EventBatch, ClientError>> {
    match frame {
        Frame::EventBatch(batch) => Some(Ok(batch)),
        Frame::Error(e) => Some(Err(ClientError::server(e))),
        Frame::Pong(_) => None,
        other => Some(Err(ProtocolError::UnexpectedFrame {
            expected: "event_batch",
            got: other.name(),
        }
        .into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;
    use starling_proto::{ErrorCode, ErrorFrame, EventBatch, Ping, SubscribeOk};

    #[test]
    fn classifies_frames() {
        let batch = EventBatch {
            stream: 1,
            first_seq: 1,
            events: vec![Bytes::from_static(b"x")],
        };
        assert!(matches!(classify(Frame::EventBatch(batch)), Some(Ok(b)) if b.first_seq == 1));
        assert!(classify(Frame::Pong(Ping { nonce: 3 })).is_none());
        let err = Frame::Error(ErrorFrame {
            request_id: 0,
            code: ErrorCode::Unavailable,
            message: "bye".into(),
        });
        assert!(matches!(
            classify(err),
            Some(Err(ClientError::Server {
                code: ErrorCode::Unavailable,
                ..
            }))
        ));
        let stray = Frame::SubscribeOk(SubscribeOk {
            request_id: 1,
            subscription_id: 1,
        });
        assert!(matches!(
            classify(stray),
            Some(Err(ClientError::Protocol(_)))
        ));
    }
}
