//! `starling-config`: the one place where Starling's broker configuration is defined.
//!
//! Module map:
//! - [`enums`]: the small value types used by knobs (shard policy, slow-subscriber policy, log
//!   format, ack level, fsync policy, congestion controller) and the profile and tier names.
//! - [`knobs`]: the knob list. One macro invocation generates [`BrokerConfig`] (every knob resolved),
//!   [`ConfigOverrides`] (every knob optional) and [`ConfigFile`] (the YAML file schema).
//! - [`profile`]: the three performance profiles and the values each one sets.
//! - [`tier`]: the three deployment tiers (replicas, resources, capacity, queue and lane sizing).
//! - [`tier_overrides`]: an operator's admin overrides of the tier table (replicas, CPU, memory,
//!   capacity).
//! - [`metric_names`]: the broker metric names that other components (the autoscaler) read.
//! - [`duration`]: the one duration grammar (`30s`, `500ms`, `1m30s`) of the CLI, the operator's
//!   flags and the CRD.
//! - [`memory`]: the memory-fit formula: the worst case a config lets a broker hold, checked
//!   against a pod's memory limit by the broker at start and by the operator before it renders;
//!   and the memory knobs a tier derives from its memory limit.
//! - [`quantity`]: Kubernetes quantities (`4Gi`, `500m`) as numbers.
//! - [`client`]: the client-side pool sizing that SDKs take from the same tables.
//! - [`resolve`]: `profile ⊕ tier ⊕ overrides`, plus loading from a file and `STARLING_*` variables.
//! - [`topics`]: the topics document (`topics_file`): per-topic durability policies the operator
//!   writes from `BrokerTopic` objects and the broker applies.
//! - [`validate`]: rejects impossible combinations with messages that name the field.
//! - [`reference`]: renders the configuration reference (docs/configuration.md) from the tables.
//! - [`error`]: the crate's error type.
//!
//! Precedence, lowest to highest: profile values → tier sizing (when a tier is given) → explicit
//! overrides (config file, then `STARLING_*` environment variables).

pub mod client;
pub mod duration;
pub mod enums;
pub mod error;
pub mod knobs;
pub mod memory;
pub mod metric_names;
pub mod profile;
pub mod quantity;
pub mod reference;
pub mod resolve;
pub mod tier;
pub mod tier_overrides;
pub mod topics;
pub mod validate;

pub use client::ClientTuning;
pub use enums::{
    AckLevel, AuthMode, CongestionController, LaneShard, LogFormat, Profile, SlowSubscriberPolicy,
    StorageFsync, Tier,
};
pub use error::{ConfigError, FieldError};
pub use knobs::{BrokerConfig, ConfigFile, ConfigOverrides, KNOBS, KnobDoc};
pub use resolve::{ENV_PREFIX, Layer, Sources, compose, resolve};
pub use tier::{MAX_REPLICAS, Resources, TierSizing};
pub use tier_overrides::{TierOverride, TierTable};

/// Default UDP port of the QUIC listener (the protocol's, `starling_proto::quic`).
pub const DEFAULT_QUIC_PORT: u16 = starling_proto::DEFAULT_QUIC_PORT;
/// Default TCP port of the HTTP listener (`/metrics`, `/healthz`, `/readyz`, `/config`).
pub const DEFAULT_HTTP_PORT: u16 = 9400;
