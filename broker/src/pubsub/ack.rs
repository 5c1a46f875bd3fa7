//! Publish acknowledgements: a token that travels with an acked publish and, when completed,
//! queues a `PublishAck` (or an `Error`) for the publisher's stream.
//!
//! Every token holds what bounds it ([`Held`]) until its frame is written: a permit of its
//! stream's ack semaphore (the request window, `pub_queue_depth`), which bounds the acks a
//! publisher that never reads them can make the broker hold, and, for a `persisted` ack on a
//! durable topic, a charge of the pending-ack budget ([`PendingCharge`]). A charged token gives
//! its window permit back once it is handed to its durable log ([`AckToken::handed_to_log`]):
//! from then on it waits only for an fsync, bounded by the budget instead of the window.

use std::mem::size_of;

use starling_proto::{ErrorCode, ErrorFrame, Frame, Position, PublishAck};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::durable::Waiter;
use crate::pubsub::pending_acks::PendingCharge;

/// What an ack holds until its frame is written: its place in its stream's request window
/// (given back early by a `persisted` ack handed to its log) and its charge of the pending-ack
/// budget, if it has one.
#[derive(Debug)]
pub struct Held {
    window: Option<OwnedSemaphorePermit>,
    pending: Option<PendingCharge>,
}

/// An ack frame with what it releases once written.
pub type AckItem = (Frame, Held);

/// The most bytes a `PublishAck` frame takes encoded: the 8-byte frame header, the request id
/// and the count, with room to spare.
const ACK_FRAME_BYTES: usize = 32;

/// What one `persisted` ack holds in memory from its handing to the log until its frame is
/// written, which is what it is charged of `max_pending_persisted_ack_bytes`: the token in its
/// log's wait list, with the whole entry of its batch there (at worst one ack per batch), then
/// its entry in its stream's reply channel, its place in the writer's list of what it holds,
/// and its encoded frame in the writer's buffer. The count the acks wait in is the
/// configuration's (docs/configuration.md), which `a_pending_ack_is_charged_what_it_holds`
/// keeps equal to this.
pub const PENDING_ACK_BYTES: usize = size_of::<AckToken>()
    + size_of::<(Position, Vec<AckToken>)>()
    + size_of::<AckItem>()
    + size_of::<Held>()
    + ACK_FRAME_BYTES;

/// A pending acknowledgement.
#[derive(Debug)]
pub struct AckToken {
    /// The publish request being acknowledged.
    pub request_id: u64,
    /// Messages covered.
    pub count: u32,
    tx: mpsc::UnboundedSender<AckItem>,
    held: Held,
    /// `ack_level: persisted`: on a durable topic, complete once the batch is durable.
    pub persisted: bool,
    /// Only a refusal is answered (see [`AckToken::refusals_only`]).
    quiet: bool,
}

impl AckToken {
    /// A token that writes to `tx`, holding `permit` of its stream's window.
    pub fn new(
        request_id: u64,
        count: u32,
        tx: mpsc::UnboundedSender<AckItem>,
        permit: OwnedSemaphorePermit,
    ) -> Self {
        AckToken {
            request_id,
            count,
            tx,
            held: Held {
                window: Some(permit),
                pending: None,
            },
            persisted: false,
            quiet: false,
        }
    }

    /// The same token, answering only a refusal: for a publish the client did not ask to be
    /// acked whose refusal it must still learn (a request forwarded to its topic's owner,
    /// which may answer `NoResponders`). Its ack writes nothing and frees its permit.
    pub fn refusals_only(self) -> Self {
        AckToken {
            quiet: true,
            ..self
        }
    }

    /// The token of a `persisted` publish, holding `charge` of the pending-ack budget too.
    pub fn charged(mut self, charge: PendingCharge) -> Self {
        self.persisted = true;
        self.held.pending = Some(charge);
        self
    }

    /// The token was handed to its durable log, where it waits only for the fsync covering
    /// its batch: a token charged to the pending-ack budget gives its stream's window permit
    /// back, so the stream reads on; an uncharged one keeps it.
    pub fn handed_to_log(&mut self) {
        if self.held.pending.is_some() {
            self.held.window = None;
        }
    }

    /// Whether the token still holds its place in its stream's window.
    pub fn holds_window(&self) -> bool {
        self.held.window.is_some()
    }

    /// Acknowledges the publish.
    pub fn ack(self) {
        if self.quiet {
            return;
        }
        let frame = Frame::PublishAck(PublishAck {
            request_id: self.request_id,
            count: self.count,
        });
        let _ = self.tx.send((frame, self.held));
    }

    /// Refuses the publish with a typed error.
    pub fn refuse(self, code: ErrorCode, message: impl Into<String>) {
        let frame = Frame::Error(ErrorFrame {
            request_id: self.request_id,
            code,
            message: message.into(),
        });
        let _ = self.tx.send((frame, self.held));
    }
}

impl Held {
    /// What a reply that is not an ack holds (a pong, an error): its window permit.
    pub fn window(permit: OwnedSemaphorePermit) -> Held {
        Held {
            window: Some(permit),
            pending: None,
        }
    }
}

impl Waiter for AckToken {
    fn handed_over(&mut self) {
        self.handed_to_log();
    }

    fn durable(self) {
        self.ack();
    }

    fn failed(self, code: ErrorCode, message: String) {
        self.refuse(code, message);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::*;
    use crate::pubsub::pending_acks::{ConnShare, PendingAcks, Shown};

    #[test]
    fn a_pending_ack_is_charged_what_it_holds() {
        // The figure the knob docs give (`max_pending_persisted_ack_bytes`).
        assert_eq!(
            PENDING_ACK_BYTES, 408,
            "update the knob docs with the new size"
        );
    }

    #[tokio::test]
    async fn a_charged_token_gives_its_window_back_at_the_log_and_its_charge_when_written() {
        let held = prometheus::IntGauge::new("held", "held").unwrap();
        let shown = Shown {
            held: held.clone(),
            waits_broker: prometheus::IntCounter::new("b", "b").unwrap(),
            waits_connection: prometheus::IntCounter::new("c", "c").unwrap(),
        };
        let budget = PendingAcks::new(1 << 20, PENDING_ACK_BYTES, shown);
        let share = ConnShare::new(1 << 16, PENDING_ACK_BYTES);
        let window = Arc::new(Semaphore::new(2));
        let (tx, mut rx) = mpsc::unbounded_channel();
        let permit = Arc::clone(&window).try_acquire_owned().unwrap();
        let charge = budget.take(Some(&share)).await.unwrap();
        let mut token = AckToken::new(1, 1, tx.clone(), permit).charged(charge);
        assert_eq!(window.available_permits(), 1);
        token.handed_to_log();
        assert!(!token.holds_window());
        assert_eq!(window.available_permits(), 2, "the window place is free");
        assert_eq!(budget.held(), PENDING_ACK_BYTES);
        token.ack();
        let (frame, written) = rx.recv().await.unwrap();
        assert!(matches!(frame, Frame::PublishAck(_)));
        assert_eq!(budget.held(), PENDING_ACK_BYTES, "held until written");
        drop(written);
        assert_eq!(budget.held(), 0);
        assert_eq!(held.get(), 0);

        // Uncharged (a replicated topic's, a forwarded one's): keeps its window place.
        let permit = Arc::clone(&window).try_acquire_owned().unwrap();
        let mut plain = AckToken::new(2, 1, tx, permit);
        plain.handed_to_log();
        assert!(plain.holds_window());
        assert_eq!(window.available_permits(), 1);
    }
}
