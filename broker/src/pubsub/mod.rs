//! Publish/subscribe core: topics (their registry and task), acks, the budget of `persisted`
//! acks waiting for an fsync and the queue groups' budgets, with the engine's
//! network-free parts from `starling-pubsub` (batching, subscriber queues and sinks, writer
//! lanes, the queue budget, the retained tail, counters, batch deadlines).

pub mod ack;
pub mod groups;
pub mod inboxes;
pub mod pending_acks;
pub mod topic;

// The engine's network-free parts live in `starling-pubsub`; the broker's modules name them
// here as before.
pub use starling_pubsub::{
    batcher, counters, dedup, group, lanes, queue_budget, retained, sink, subscriber, timer,
};

#[cfg(test)]
mod tests;
