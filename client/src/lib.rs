//! `starling-client`: the Rust SDK for the Starling QUIC pub/sub and cache
//! broker (the `starling` CLI is built on it).
//!
//! ```no_run
//! # async fn demo() -> Result<(), starling_client::ClientError> {
//! use starling_client::{Client, ClientConfig, Trust};
//! let client = Client::connect(ClientConfig::new("127.0.0.1:7400", Trust::Insecure)).await?;
//! let mut sub = client.subscribe("orders").await?;
//! client.publish_acked("orders", "hello").await?;
//! if let Some(event) = sub.next_event().await {
//!     let event = event?;
//!     println!("#{} {}", event.seq, String::from_utf8_lossy(&event.payload));
//! }
//! client.cache_put("k", "v", None).await?;
//! client.close().await;
//! # Ok(()) }
//! ```
//!
//! # Credentials
//! A broker with `auth_mode: required` (the default) admits only known users, and checks every
//! publish, subscribe, cache read and cache write against the user's permissions. A
//! [`ClientConfig`] carries one of the three [`Credentials`]: `None` (for `auth_mode: none`),
//! `Token` (sent in the handshake's `Hello.auth_token` with the `AUTH_TOKEN` feature bit) or
//! `Certificate` (presented for TLS client authentication; its common name is the user's name).
//! An application that mounts a `BrokerUser`'s credentials Secret reads it with
//! [`Credentials::load_dir`]:
//!
//! ```no_run
//! # async fn demo() -> Result<(), starling_client::ClientError> {
//! use starling_client::{Client, ClientError, Credentials};
//! // `token` (or `tls.crt` + `tls.key`), `ca.crt` and `address`, as the operator writes them.
//! let cfg = Credentials::load_dir("/etc/starling/user")?.into_config()?;
//! let client = Client::connect(cfg).await?;
//! match client.publish_acked("orders.eu", "hello").await {
//!     Err(ClientError::Forbidden { op, name, message }) => eprintln!("{op} {name}: {message}"),
//!     other => other?,
//! }
//! # Ok(()) }
//! ```
//!
//! A refused handshake (no, unknown or revoked credentials) is [`ClientError::Unauthorized`];
//! an operation the user's permissions do not allow is [`ClientError::Forbidden`], naming the
//! operation (`publish`, `subscribe`, `cache_read`, `cache_write`) and the topic or key. A
//! refusal affects that request only: the connection, the client's other requests and its
//! subscriptions go on. Neither refusal is retried, and a subscription whose user was revoked
//! ends with `Unauthorized` when it tries to resubscribe. The `Debug` output of
//! [`Credentials`] and [`ClientConfig`] never shows a token or a private key.
//!
//! A [`Direct`] link talks to one broker only: no routing, no resubscription, and any request
//! frame on a stream of its own ([`Direct::exchange`]). The broker's links to the other
//! members are built on it, asking for the `Peer` role, which a broker grants only to its
//! members' `starling:peer` certificate.
//!
//! # Wildcard subscriptions
//! [`Client::subscribe`] takes a pattern too: `orders.*` (`*` is one `.`-separated token) or
//! `orders.>` (`>`, last only, one or more), the language the permissions use
//! (`docs/subjects.md`). The subscription gets the live events of every matching topic, those
//! that exist and those created later, and each [`Event::topic`] names the topic it came from.
//! The broker allows it only when the user may subscribe to every topic it can match (else
//! [`ClientError::Forbidden`]). It needs a broker that grants the `WILDCARDS` feature (an
//! older one gives [`ClientError::Unsupported`]). In a cluster, the broker the subscription
//! is at gets the matching topics from every member (each serves the topics it owns).
//!
//! ```no_run
//! # async fn demo(client: starling_client::Client) -> Result<(), starling_client::ClientError> {
//! let mut sub = client.subscribe("orders.*").await?;
//! while let Some(event) = sub.next_event().await {
//!     let event = event?;
//!     println!("{}: {:?}", event.topic, event.payload);
//! }
//! # Ok(()) }
//! ```
//!
//! # Publish de-duplication
//! A publish retried after a lost ack can be delivered twice. Give the message an id with
//! [`Message::with_msg_id`] (the `Starling-Msg-Id` header) and publish it with
//! [`Client::publish_message`]: the topic drops a repeat of an id it saw within its window
//! (`dedup_window_ms`, 2 minutes by default) and answers the repeat with the original's ack,
//! once the original has it. It needs a broker that grants `DEDUP` (an older one gives
//! [`ClientError::Unsupported`] and nothing is sent); for now only ephemeral topics on a
//! single broker take it (a durable topic or a cluster member refuses it with
//! `InvalidRequest`, as it refuses every header).
//!
//! ```no_run
//! # async fn demo(client: starling_client::Client) -> Result<(), starling_client::ClientError> {
//! use starling_client::Message;
//! let order = Message::new("order 42").with_msg_id("order-42");
//! // A retry after a timeout is safe: delivered once, both calls acked.
//! if client.publish_message("orders", order.clone(), true).await.is_err() {
//!     client.publish_message("orders", order, true).await?;
//! }
//! # Ok(()) }
//! ```
//!
//! # Where a subscription starts
//! [`Client::subscribe`] takes live events only. [`Client::subscribe_from`] resumes at a
//! [`Position`] (a [`Subscription::resume_point`]): the broker first replays what it still
//! holds from there. [`Client::subscribe_from_time`] starts at a time: the first event the
//! topic's owner stamped at or after it (Unix milliseconds on the owner's clock: when the
//! batch was appended to a durable topic's log, else when it was fanned out), then continues
//! live with no gap and no duplicate. A durable topic reaches back as far as its log does; any
//! other topic as far as its retained tail (`replay_window_ms`), whose oldest event a time
//! older than the tail starts at; a time after the newest event, in the future included, is
//! live only. [`Client::subscribe_at`] takes any [`StartAt`]. Starting at a time needs a
//! broker that grants the `SUBSCRIBE_FROM_TIME` feature; an older one gives
//! [`ClientError::Unsupported`] and nothing is sent.
//!
//! ```no_run
//! # async fn demo(client: starling_client::Client) -> Result<(), starling_client::ClientError> {
//! use std::time::{Duration, SystemTime};
//! let since = SystemTime::now() - Duration::from_secs(15 * 60);
//! let mut sub = client.subscribe_from_time("orders", since).await?;
//! while let Some(event) = sub.next_event().await {
//!     let event = event?;
//!     println!("{:?} {}", event.position, String::from_utf8_lossy(&event.payload));
//! }
//! # Ok(()) }
//! ```
//!
//! # Pools and routing
//! A [`Client`] keeps three pools sized by its [`ClientTuning`] (a [`Profile`]'s
//! [`Profile::pools`] unless set), all opened lazily and reopened on the
//! next use after their connection died:
//! - publish: `pub_conn_pool` connections × `pub_streams_per_conn` streams; a
//!   topic always hashes (FNV-1a) to the same stream, so one client's
//!   publishes to one topic stay in order. Acks are matched by request id.
//! - events: `event_conn_pool` connections; each subscription is its own
//!   stream, placed round-robin.
//! - cache: up to `cache_conn_pool` connections × `cache_streams_per_conn` streams
//!   (ALPN `starling-cache/1`), pipelined per stream and filled in order: the next stream
//!   is used only once `cache_stream_depth` operations are in flight on each before it
//!   ([`ClientConfig::cache_stream_depth`]).
//!
//! # Module map
//! | module | job |
//! | --- | --- |
//! | `client` | [`Client`], the public entry point |
//! | `config` | [`ClientConfig`] |
//! | `tuning` | [`ClientTuning`] (pool sizes), [`TransportTuning`] (QUIC windows, timers, path) |
//! | `profile` | [`Profile`]: the SDK's presets of both |
//! | `trust` | [`Trust`] |
//! | `path` | [`PathTuning`], [`CongestionController`]: UDP socket buffers, MTU, congestion control, ACK frequency; the quinn endpoints (the broker's listener too) |
//! | `route_mtu` | the largest UDP payload the route towards a peer carries (`IP_MTU`/`IPV6_MTU`), which caps path MTU discovery |
//! | `credentials` | [`Credentials`], the credentials directory ([`CredentialsDir`]) |
//! | `error` | [`ClientError`], [`ProtocolError`] |
//! | `subscription` | [`Subscription`], [`Event`] |
//! | `feed` | the channel between a [`Subscription`] and the task feeding it |
//! | `handshake` | `Hello`/`HelloOk` and [`ServerInfo`] |
//! | `addr` | `host:port` parsing, resolution, TLS server name |
//! | `tls`, `verify`, `fingerprint` | rustls config per [`Trust`] |
//! | `transport` | quinn endpoint and transport configs |
//! | `connector` | one connection + handshake within the timeout |
//! | `slot` | lazily (re)opened pool entries |
//! | `routing` | topic → stream hashing, round-robin, fill-first |
//! | `rpc`, `pending` | request/response streams (publish, cache) |
//! | `checks` | what is checked before a request is sent (topic names) |
//! | `publisher`, `subscriber`, `pump`, `cache` | the three pools |
//! | `node` | the three pools to one broker, and one-request streams (`ClusterInfo`) |
//! | `direct` | [`Direct`]: one node on its own, unrouted, without resubscription |
//! | `cluster` | membership, owner of each topic/key, member nodes |
//! | `relay` | routed subscriptions that follow their topic's owner |
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::todo)
)]

mod addr;
mod cache;
mod checks;
mod client;
mod cluster;
mod config;
mod connector;
mod consumer;
mod credentials;
mod direct;
mod error;
mod feed;
mod fingerprint;
mod handshake;
mod message;
mod node;
mod path;
mod pending;
mod profile;
mod publisher;
mod pump;
mod relay;
mod request;
mod route_mtu;
mod routing;
mod rpc;
mod slot;
mod subscriber;
mod subscription;
mod tls;
mod trace;
mod transport;
mod trust;
mod tuning;
mod verify;
mod window;

pub use client::Client;
pub use config::{
    ClientConfig, DEFAULT_CACHE_STREAM_DEPTH, DEFAULT_PORT, DEFAULT_PUBLISH_WINDOW,
    MAX_CACHE_STREAM_DEPTH,
};
pub use consumer::{Consumer, ConsumerConfig, Delivery};
pub use credentials::{Credentials, CredentialsDir, CredentialsError};
pub use direct::Direct;
pub use error::{ClientError, ProtocolError};
pub use fingerprint::sha256 as certificate_fingerprint;
pub use handshake::ServerInfo;
pub use message::Message;
pub use path::{BufferGrant, CongestionController, PathTuning, UdpBuffers};
pub use profile::Profile;
pub use starling_proto::ConsumerStart;
pub use starling_proto::{Header, Position, Role, StartAt};
pub use subscription::{Event, Subscription};
pub use tls::{ALPN_CACHE, ALPN_PUBSUB};
pub use trust::Trust;
pub use tuning::{ClientTuning, TransportTuning};
pub use window::{MAX_PUBLISH_WINDOW, MIN_PUBLISH_WINDOW};
