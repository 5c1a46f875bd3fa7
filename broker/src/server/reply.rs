//! Writing frames, and typed errors, back to a client stream.

use starling_proto::{DecodeError, ErrorCode, ErrorFrame, Frame, ReadError, write_frame};

use crate::metrics::{Limit, Metrics};

/// Writes an `Error` frame and counts it. Write failures are ignored: the peer is gone.
pub async fn error(
    send: &mut quinn::SendStream,
    metrics: &Metrics,
    request_id: u64,
    code: ErrorCode,
    message: impl Into<String>,
) {
    metrics
        .protocol_errors
        .with_label_values(&[code.name()])
        .inc();
    let frame = Frame::Error(ErrorFrame {
        request_id,
        code,
        message: message.into(),
    });
    let _ = write_frame(send, &frame).await;
}

/// The typed error to send for a failed read, if the peer can still be told.
pub fn read_error_reply(e: &ReadError) -> Option<(ErrorCode, String)> {
    match e {
        ReadError::Decode(d) => Some((d.code(), d.to_string())),
        ReadError::UnexpectedEof => Some((
            ErrorCode::BadFrame,
            "stream ended in the middle of a frame".into(),
        )),
        ReadError::Io(_) => None,
    }
}

/// Counts a read the decoder refused at a budget (a batch of more than
/// `max_publish_batch_items` payloads) in `starling_limit_refusals_total`.
pub fn count_limit(metrics: &Metrics, e: &ReadError) {
    if matches!(e, ReadError::Decode(DecodeError::TooManyItems { .. })) {
        metrics.limit_refused(Limit::PublishBatchItems);
    }
}

/// Reports a failed read on `send` (when it is a protocol error) and finishes the stream.
pub async fn read_failed(send: &mut quinn::SendStream, metrics: &Metrics, e: &ReadError) {
    count_limit(metrics, e);
    if let Some((code, message)) = read_error_reply(e) {
        tracing::debug!(%message, "protocol error on stream");
        error(send, metrics, 0, code, message).await;
    }
    let _ = send.finish();
}

/// The error that closes a publish or cache stream that sent no frame for `after`
/// (`stream_idle_timeout_ms`).
pub fn idle(after: std::time::Duration) -> (ErrorCode, String) {
    (
        ErrorCode::InvalidRequest,
        format!(
            "no frame within {} ms (stream_idle_timeout_ms); open a new stream",
            after.as_millis()
        ),
    )
}

/// The code a stream's receive side is stopped with after an `Error` of `code`.
pub fn stop_code(code: ErrorCode) -> quinn::VarInt {
    quinn::VarInt::from_u32(u32::from(code.as_u16()))
}

/// The message for a frame a client must not send on this kind of stream.
pub fn unexpected(frame: &Frame, stream: &str) -> (ErrorCode, String) {
    (
        ErrorCode::InvalidRequest,
        format!("unexpected {} frame on a {stream} stream", frame.name()),
    )
}

/// Request id of a client frame, or 0.
pub fn request_id(frame: &Frame) -> u64 {
    match frame {
        Frame::Publish(f) => f.request_id,
        Frame::PublishBatch(f) => f.request_id,
        Frame::Subscribe(f) => f.request_id,
        Frame::Unsubscribe(f) => f.request_id,
        Frame::CachePut(f) => f.request_id,
        Frame::CacheGet(f) => f.request_id,
        Frame::CacheDelete(f) => f.request_id,
        Frame::ClusterInfoRequest(f) => f.request_id,
        Frame::LogRead(f) => f.request_id,
        Frame::LogClaim(f) => f.request_id,
        Frame::ConsumerOpen(f) => f.request_id,
        _ => 0,
    }
}

/// A typed error frame answering `request_id`, counted in `starling_protocol_errors_total`
/// by its code: the one way the subscription and cache handlers build their error replies.
pub fn counted_error(
    metrics: &Metrics,
    request_id: u64,
    code: ErrorCode,
    message: impl Into<String>,
) -> Frame {
    metrics
        .protocol_errors
        .with_label_values(&[code.name()])
        .inc();
    Frame::Error(ErrorFrame {
        request_id,
        code,
        message: message.into(),
    })
}
