//! Publish acknowledgements: a token that travels with an acked publish and, when completed,
//! queues a `PublishAck` (or an `Error`) for the publisher's stream.
//!
//! Every token holds a permit of the stream's ack semaphore until its frame is written, which
//! bounds the acks a publisher that never reads them can make the broker hold.

use starling_proto::{ErrorCode, ErrorFrame, Frame, PublishAck};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

use crate::durable::Waiter;

/// An ack frame with the permit it releases once written.
pub type AckItem = (Frame, OwnedSemaphorePermit);

/// A pending acknowledgement.
#[derive(Debug)]
pub struct AckToken {
    /// The publish request being acknowledged.
    pub request_id: u64,
    /// Messages covered.
    pub count: u32,
    tx: mpsc::UnboundedSender<AckItem>,
    permit: OwnedSemaphorePermit,
    /// `ack_level: persisted`: on a durable topic, complete once the batch is durable.
    pub persisted: bool,
    /// Only a refusal is answered (see [`AckToken::refusals_only`]).
    quiet: bool,
}

impl AckToken {
    /// A token that writes to `tx`.
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
            permit,
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

    /// Acknowledges the publish.
    pub fn ack(self) {
        if self.quiet {
            return;
        }
        let frame = Frame::PublishAck(PublishAck {
            request_id: self.request_id,
            count: self.count,
        });
        let _ = self.tx.send((frame, self.permit));
    }

    /// Refuses the publish with a typed error.
    pub fn refuse(self, code: ErrorCode, message: impl Into<String>) {
        let frame = Frame::Error(ErrorFrame {
            request_id: self.request_id,
            code,
            message: message.into(),
        });
        let _ = self.tx.send((frame, self.permit));
    }
}

impl Waiter for AckToken {
    fn durable(self) {
        self.ack();
    }

    fn failed(self, code: ErrorCode, message: String) {
        self.refuse(code, message);
    }
}
