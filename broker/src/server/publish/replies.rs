//! What goes back on a publish stream: acks, pongs and typed errors, written by one writer
//! task per stream that coalesces whatever is ready into one write. Every item holds one of the
//! stream's `pub_queue_depth` permits (the request window) until written, so a publisher that
//! never reads its acks is eventually pushed back too; except a `persisted` ack, which gives
//! its permit back once handed to its durable log and holds its charge of the pending-ack
//! budget (`pubsub::pending_acks`) until written instead.

use std::sync::Arc;

use bytes::BytesMut;
use starling_proto::{ErrorCode, ErrorFrame, Frame, Ping};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::metrics::Metrics;
use crate::pubsub::ack::{AckItem, AckToken, Held};
use crate::pubsub::pending_acks::PendingCharge;

/// The sending side of a publish stream's writer.
pub struct Replies {
    tx: mpsc::UnboundedSender<AckItem>,
    permits: Arc<Semaphore>,
    metrics: Arc<Metrics>,
}

impl Replies {
    /// Starts the writer of `send`, with `depth` outstanding items at most.
    pub fn start(
        metrics: Arc<Metrics>,
        send: quinn::SendStream,
        depth: usize,
    ) -> (Replies, JoinHandle<()>) {
        let (tx, rx) = mpsc::unbounded_channel::<AckItem>();
        let writer = tokio::spawn(write_acks(Arc::clone(&metrics), send, rx));
        let replies = Replies {
            tx,
            permits: Arc::new(Semaphore::new(depth)),
            metrics,
        };
        (replies, writer)
    }

    /// Sends a typed error for `request_id`, and counts it.
    pub async fn error(&self, request_id: u64, code: ErrorCode, message: impl Into<String>) {
        self.metrics
            .protocol_errors
            .with_label_values(&[code.name()])
            .inc();
        if let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await {
            let frame = Frame::Error(ErrorFrame {
                request_id,
                code,
                message: message.into(),
            });
            let _ = self.tx.send((frame, Held::window(permit)));
        }
    }

    /// Answers a `Ping`.
    pub async fn pong(&self, p: Ping) {
        if let Ok(permit) = Arc::clone(&self.permits).acquire_owned().await {
            let _ = self.tx.send((Frame::Pong(p), Held::window(permit)));
        }
    }

    /// The ack of request `request_id` of `count` messages, holding a permit until written
    /// (or, with `pending`, a `persisted` ack's charge, until written, and the permit until it
    /// is handed to its durable log).
    pub async fn token(
        &self,
        request_id: u64,
        count: u32,
        pending: Option<PendingCharge>,
    ) -> Option<AckToken> {
        match Arc::clone(&self.permits).acquire_owned().await {
            Ok(permit) => {
                let token = AckToken::new(request_id, count, self.tx.clone(), permit);
                Some(match pending {
                    Some(charge) => token.charged(charge),
                    None => token,
                })
            }
            Err(_) => None,
        }
    }
}

/// Writes acks (and errors) to the stream, coalescing whatever is ready into one write.
async fn write_acks(
    metrics: Arc<Metrics>,
    mut send: quinn::SendStream,
    mut rx: mpsc::UnboundedReceiver<AckItem>,
) {
    let mut out = BytesMut::new();
    let mut held = Vec::new();
    while let Some((frame, permit)) = rx.recv().await {
        let mut acks = 0u64;
        let mut push = |frame: Frame, out: &mut BytesMut| {
            if matches!(frame, Frame::PublishAck(_)) {
                acks += 1;
            }
            frame.encode(out);
        };
        push(frame, &mut out);
        held.push(permit);
        while held.len() < 1024 {
            match rx.try_recv() {
                Ok((frame, permit)) => {
                    push(frame, &mut out);
                    held.push(permit);
                }
                Err(_) => break,
            }
        }
        if send.write_all(&out).await.is_err() {
            return;
        }
        metrics.publish_acks.inc_by(acks);
        out.clear();
        held.clear();
    }
    let _ = send.finish();
}
