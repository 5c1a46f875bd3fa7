//! Publish/subscribe core: topics and their batching, subscriber queues, writer lanes, acks.

pub mod ack;
pub mod batcher;
pub mod counters;
pub mod lanes;
pub mod queue_budget;
pub mod retained;
pub mod sink;
pub mod subscriber;
pub mod topic;

#[cfg(test)]
mod tests;
