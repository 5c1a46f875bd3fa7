//! The channel between a [`Subscription`](crate::Subscription) and the task that feeds it (the
//! pump of one subscription stream, or the relay that follows a topic's owner): what travels on
//! it, how many batches it buffers and how an unsubscribe is asked for.

use starling_proto::EventBatch;
use tokio::sync::oneshot;

use crate::ClientError;

/// Batches buffered between the task and the application.
pub(crate) const BATCH_BUFFER: usize = 16;

/// What the feeding task hands over: a batch, or the error that ended the stream.
pub(crate) type BatchItem = Result<EventBatch, ClientError>;

/// A request to unsubscribe; the task answers on the inner sender when done.
pub(crate) type StopRequest = oneshot::Sender<()>;
