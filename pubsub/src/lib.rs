//! `starling-pubsub`: the broker's publish/subscribe engine, without a network. What a
//! subscription is and how it is served: its bounded queue and slow-subscriber policy
//! ([`subscriber`]), the sink it is written to ([`sink`], one writer at a time; the broker's
//! sink is a QUIC stream), the writer lanes ([`lanes`]), the broker-wide queue budget
//! ([`queue_budget`]), queue groups' choice of a member ([`group`]), durable consumers' state
//! machine ([`consumer`]), batching ([`batcher`]), publish de-duplication's window of message ids
//! ([`dedup`]), the retained tail a resuming subscriber is
//! replayed from ([`retained`]), the engine's own counts ([`counters`], which the broker exports
//! to Prometheus) and sub-millisecond batch deadlines ([`timer`]).
//!
//! Nothing here knows quinn, tokio's networking or Prometheus: the broker supplies the sink
//! and reads the counters.

pub mod batcher;
pub mod consumer;
pub mod counters;
pub mod dedup;
pub mod group;
pub mod lanes;
pub mod queue_budget;
pub mod retained;
pub mod sink;
pub mod subscriber;
pub mod timer;
