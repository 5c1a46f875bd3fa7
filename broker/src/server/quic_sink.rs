//! A subscriber's sink on QUIC: the subscription stream's send side, written by the subscriber's
//! one writer (its lane, see `pubsub::lanes`), and how its end is waited for in the drain.

use std::time::Duration;

use bytes::Bytes;
use futures::FutureExt;

use crate::pubsub::sink::{SinkClosed, SinkFuture, SubscriberSink, WriteNow};

/// How long a peer may leave what the drain sent it unanswered before the end stops waiting
/// for it.
const SILENT: Duration = Duration::from_secs(2);

/// How often a finished stream's connection is looked at for answers.
const CHECK_EVERY: Duration = Duration::from_millis(100);

/// The send side of a subscription stream and its connection.
pub struct QuicSink {
    stream: quinn::SendStream,
    quic: quinn::Connection,
}

impl QuicSink {
    /// A sink writing to `stream`, a stream of `quic`.
    pub fn new(stream: quinn::SendStream, quic: quinn::Connection) -> QuicSink {
        QuicSink { stream, quic }
    }
}

impl SubscriberSink for QuicSink {
    fn write_now(&mut self, bufs: &mut [Bytes]) -> WriteNow {
        let mut start = 0;
        while start < bufs.len() {
            if bufs[start].is_empty() {
                start += 1;
                continue;
            }
            match self.stream.write_chunks(&mut bufs[start..]).now_or_never() {
                None => return WriteNow::Blocked,
                Some(Ok(written)) => start += written.chunks,
                Some(Err(_)) => return WriteNow::Failed,
            }
        }
        WriteNow::Done
    }

    fn write_all<'a>(
        &'a mut self,
        bufs: &'a mut [Bytes],
    ) -> SinkFuture<'a, Result<(), SinkClosed>> {
        Box::pin(async move {
            self.stream
                .write_all_chunks(bufs)
                .await
                .map_err(|_| SinkClosed)
        })
    }

    /// Finishes the stream; the future completes once the subscriber acknowledged everything
    /// on it, so closing the connection cannot discard delivered batches. A subscriber that
    /// vanished without closing (a crash, a killed process) is noticed only after the QUIC idle
    /// timeout and would hold the drain, and the broker's topics with it, to the whole
    /// `drain_timeout_ms`: the wait also ends once this broker has been sending on the
    /// connection (data, the stream's end, retransmissions, keep-alives) for [`SILENT`]
    /// without receiving anything. A live peer acknowledges within round trips, and one that
    /// only stopped reading still answers keep-alives, so neither is given up on.
    fn finish(self: Box<Self>) -> SinkFuture<'static, ()> {
        let QuicSink { mut stream, quic } = *self;
        if stream.finish().is_err() {
            return Box::pin(async {});
        }
        let stopped = stream.stopped();
        Box::pin(async move {
            let _stream = stream;
            tokio::pin!(stopped);
            let mut seen = quic.stats();
            let mut unanswered_since: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    () = tokio::time::sleep(CHECK_EVERY) => {}
                }
                let now = quic.stats();
                if now.udp_rx.datagrams != seen.udp_rx.datagrams {
                    unanswered_since = None;
                    seen = now;
                } else if now.udp_tx.datagrams != seen.udp_tx.datagrams {
                    let since = *unanswered_since.get_or_insert_with(tokio::time::Instant::now);
                    if since.elapsed() >= SILENT {
                        tracing::debug!(
                            "drain: the subscriber does not answer; not waiting for it"
                        );
                        return;
                    }
                }
            }
        })
    }
}
