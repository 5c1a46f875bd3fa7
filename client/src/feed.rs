//! The channel between a [`Subscription`](crate::Subscription) and the task that feeds it (the
//! pump of one subscription stream, or the relay that follows a topic's owner): what travels on
//! it, how many batches it buffers and how an unsubscribe is asked for.

use std::sync::Arc;

use starling_proto::{EventBatch, IndexedHeaders};
use tokio::sync::oneshot;

use crate::ClientError;

/// Batches buffered between the task and the application.
pub(crate) const BATCH_BUFFER: usize = 16;

/// One batch as received: on a wildcard subscription with the topic its `BatchTopic` named
/// (`None` on a subscription to one topic, whose topic is the subscription's), and with the
/// headers its `EventHeaders` carried.
#[derive(Debug)]
pub(crate) struct Delivery {
    /// The batch's topic, on a wildcard subscription.
    pub(crate) topic: Option<Arc<str>>,
    /// The batch.
    pub(crate) batch: EventBatch,
    /// The headers of its events that have any (the `EventHeaders` before it), by index.
    pub(crate) headers: Vec<IndexedHeaders>,
}

/// What the feeding task hands over: a batch, or the error that ended the stream.
pub(crate) type BatchItem = Result<Delivery, ClientError>;

/// A request to unsubscribe; the task answers on the inner sender when done.
pub(crate) type StopRequest = oneshot::Sender<()>;
