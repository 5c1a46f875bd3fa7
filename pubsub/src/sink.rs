//! Where a subscriber's bytes go: the [`SubscriberSink`] seam between the engine and the
//! transport (a QUIC send stream in the broker, memory in tests).
//!
//! A sink has exactly one writer at a time: it lives in its subscriber while nobody writes, and
//! whoever writes takes it out and gives it back (the subscriber's lane, or the task finishing a
//! write the lane parked). Everything for the subscriber goes through its queue, the
//! subscription handler's replies (`SubscribeOk`, `Pong`, errors) included, so no lock is ever
//! held on the sink and nothing can overtake what was queued before it.

use std::future::Future;
use std::pin::Pin;

use bytes::Bytes;

/// A boxed future a sink returns.
pub type SinkFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What became of a write that must not wait ([`SubscriberSink::write_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteNow {
    /// Everything was written.
    Done,
    /// The sink has no room now (flow control); what was written is cut off the front of the
    /// buffers, and the rest must be written with [`SubscriberSink::write_all`].
    Blocked,
    /// The sink is broken (the peer went away): the subscriber ends.
    Failed,
}

/// The sink broke (the peer went away).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the subscriber's sink is closed")]
pub struct SinkClosed;

/// A subscriber's transport, written by one writer at a time.
pub trait SubscriberSink: Send + 'static {
    /// Writes as much of `bufs`, in order, as fits without waiting; a partly written buffer is
    /// advanced past what was written.
    fn write_now(&mut self, bufs: &mut [Bytes]) -> WriteNow;

    /// Writes all of `bufs`, in order, waiting for room.
    fn write_all<'a>(&'a mut self, bufs: &'a mut [Bytes])
    -> SinkFuture<'a, Result<(), SinkClosed>>;

    /// Ends the stream after what was written. The returned future completes once the far end
    /// has everything, or can be given up on (the drain waits for it; others drop it).
    fn finish(self: Box<Self>) -> SinkFuture<'static, ()>;
}
