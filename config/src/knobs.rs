//! The knob list: every broker setting, declared once.
//!
//! The `knobs!` invocation below generates three types from one list so they can never drift:
//! [`BrokerConfig`] (every knob resolved), [`ConfigOverrides`] (every knob optional, used for
//! tier-independent explicit overrides and for the operator's `spec.config`) and [`ConfigFile`]
//! (the YAML file schema: an optional profile and tier plus optional knobs). It also generates
//! [`KNOBS`], the name and doc string of every knob, from which the configuration reference is
//! rendered.

use std::net::SocketAddr;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::enums::{
    AckLevel, AuthMode, CongestionController, LaneShard, LogFormat, Profile, SlowSubscriberPolicy,
    StorageFsync, Tier,
};

/// The name and description of one knob, for generated documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnobDoc {
    /// Knob name as written in YAML (and, upper-cased with a `STARLING_` prefix, as an env var).
    pub name: &'static str,
    /// The knob's doc comment.
    pub doc: &'static str,
    /// Group heading in the reference.
    pub group: &'static str,
}

macro_rules! knobs {
    ($( [$group:literal] $( $(#[doc = $doc:literal])+ $name:ident : $ty:ty, )+ )+) => {
        /// The broker's fully resolved configuration: every knob has a value.
        ///
        /// Serialised as YAML this is the file the operator writes into a BrokerCluster's
        /// ConfigMap and what `starling-broker print-config` prints.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct BrokerConfig {
            /// The performance profile the values started from.
            pub profile: Profile,
            /// The deployment tier whose sizing was applied, if any.
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub tier: Option<Tier>,
            $($( $(#[doc = $doc])+ pub $name: $ty, )+)+
        }

        /// Explicit overrides: any subset of knobs. Set fields replace the profile and tier values.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct ConfigOverrides {
            $($(
                $(#[doc = $doc])+
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<$ty>,
            )+)+
        }

        /// The config file schema: an optional profile and tier, and any subset of knobs.
        /// A serialised [`BrokerConfig`] is also a valid `ConfigFile`.
        #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
        #[serde(deny_unknown_fields)]
        pub struct ConfigFile {
            /// Performance profile to start from (default `balanced`).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub profile: Option<Profile>,
            /// Deployment tier whose sizing to apply (default: none, the profile's own sizing).
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub tier: Option<Tier>,
            $($(
                $(#[doc = $doc])+
                #[serde(default, skip_serializing_if = "Option::is_none")]
                pub $name: Option<$ty>,
            )+)+
            /// Deprecated, read for old files only: replaced by `ack_level` (`true` reads as
            /// `committed`, `false` as `received`; `ack_level` wins when both are set). Not a
            /// knob: it never reaches [`BrokerConfig`] or [`ConfigOverrides`].
            #[serde(default, skip_serializing_if = "Option::is_none")]
            #[schemars(skip)]
            pub ack_on_commit: Option<bool>,
        }

        /// Every knob's name, group and description, in declaration order.
        pub const KNOBS: &[KnobDoc] = &[
            $($( KnobDoc { name: stringify!($name), doc: concat!($($doc, "\n"),+), group: $group }, )+)+
        ];

        impl ConfigOverrides {
            /// Writes every set field into `cfg`.
            pub fn apply_to(&self, cfg: &mut BrokerConfig) {
                $($( if let Some(v) = &self.$name { cfg.$name = v.clone(); } )+)+
            }

            /// Layers `other` on top of `self`: fields set in `other` win.
            pub fn merge(&mut self, other: &ConfigOverrides) {
                $($( if other.$name.is_some() { self.$name = other.$name.clone(); } )+)+
            }

            /// Names of the fields that are set.
            pub fn set_fields(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $($( if self.$name.is_some() { out.push(stringify!($name)); } )+)+
                out
            }
        }

        impl ConfigFile {
            /// Splits the file into its profile, tier and knob overrides.
            pub fn into_parts(self) -> (Option<Profile>, Option<Tier>, ConfigOverrides) {
                let mut overrides = ConfigOverrides { $($( $name: self.$name, )+)+ };
                if overrides.ack_level.is_none() {
                    overrides.ack_level = self.ack_on_commit.map(AckLevel::from_ack_on_commit);
                }
                (self.profile, self.tier, overrides)
            }

            /// Warnings for deprecated keys the file uses, for the broker to log.
            pub fn deprecations(&self) -> Vec<String> {
                let mut out = Vec::new();
                if let Some(on) = self.ack_on_commit {
                    out.push(format!(
                        "`ack_on_commit` is deprecated: use `ack_level: {}`{}",
                        AckLevel::from_ack_on_commit(on),
                        if self.ack_level.is_some() { " (ignored: `ack_level` is set)" } else { "" }
                    ));
                }
                out
            }
        }

        impl BrokerConfig {
            /// Every knob as a JSON value, keyed by name, in declaration order.
            pub fn knob_values(&self) -> Vec<(&'static str, serde_json::Value)> {
                vec![$($(
                    (stringify!($name), serde_json::to_value(&self.$name).unwrap_or(serde_json::Value::Null)),
                )+)+]
            }
        }
    };
}

knobs! {
    ["Listeners, TLS and logs"]
    /// UDP address of the QUIC listener.
    quic_listen: SocketAddr,
    /// TCP address of the HTTP listener serving `/metrics`, `/healthz`, `/readyz` and `/config`.
    http_listen: SocketAddr,
    /// PEM certificate chain for QUIC TLS. Unset: the broker generates a self-signed certificate
    /// at start and logs its SHA-256 fingerprint. Must be set together with `tls_key_file`.
    tls_cert_file: Option<PathBuf>,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) matching `tls_cert_file`.
    tls_key_file: Option<PathBuf>,
    /// Log line format: `text` or `json`.
    log_format: LogFormat,
    /// `tracing` filter directive, e.g. `info` or `starling_broker=debug,info`.
    log_level: String,

    ["Authentication and access control"]
    /// `required`: every client authenticates with a client certificate signed by
    /// `auth_client_ca_file` or a token from the users document, and every operation is checked
    /// against that user's permissions. `none`: no authentication and no checks (development
    /// only). A broker with `required` needs a users document (`auth_users_file` or
    /// `auth_users_secret`).
    auth_mode: AuthMode,
    /// Users document (YAML, see `docs/security.md`): names, token hashes and permissions,
    /// re-read every `auth_reload_interval_ms`. Exclusive with `auth_users_secret`.
    auth_users_file: Option<PathBuf>,
    /// Name of a Secret in the pod's namespace whose `users.yaml` key holds the users document,
    /// read through the Kubernetes API every `auth_reload_interval_ms`. The operator sets it.
    auth_users_secret: Option<String>,
    /// PEM bundle of the CA that signs client certificates (users and peers). Unset: clients
    /// may authenticate only with tokens, and peers cannot authenticate.
    auth_client_ca_file: Option<PathBuf>,
    /// How often (ms) the users document, the client CA and the certificate files are re-read.
    /// A removed user's new connections are refused from the next read; its live connections
    /// are closed then too.
    auth_reload_interval_ms: u64,

    ["QUIC transport"]
    /// Connection-level receive window (bytes) of publish/subscribe connections: how much a
    /// publisher may have in flight towards the broker. SDK subscribers use it for their side.
    event_conn_recv_window: u64,
    /// Per-stream receive window (bytes) of publish/subscribe streams.
    event_stream_recv_window: u64,
    /// Connection-level send buffer (bytes) for event delivery to subscribers.
    event_send_window: u64,
    /// Connection-level receive window (bytes) applied to cache connections
    /// (ALPN `starling-cache/1`) once they are established.
    cache_conn_recv_window: u64,
    /// Per-stream receive window (bytes) that SDKs use on cache connections.
    cache_stream_recv_window: u64,
    /// Maximum concurrently open bidirectional streams a client may have per connection.
    max_concurrent_streams: u32,
    /// A connection with no traffic for this long (ms) is closed.
    idle_timeout_ms: u64,
    /// Interval (ms) of QUIC keep-alive pings from the broker; 0 disables them.
    keep_alive_interval_ms: u64,
    /// Largest frame payload (bytes, excluding the 8-byte header) the broker accepts or sends.
    max_frame_bytes: u32,
    /// Receive buffer (bytes) asked of the kernel for each QUIC UDP socket (`SO_RCVBUF`): the
    /// broker's listener, its peer links' endpoints and SDK endpoints. 0 leaves the OS default.
    /// Datagrams arriving while it is full are dropped by the kernel (QUIC resends them after
    /// detecting the loss), so a larger buffer absorbs bursts, at the cost of kernel memory,
    /// which the memory-fit formula counts. Linux grants at most `net.core.rmem_max`; the
    /// broker logs a warning when it got less than asked and exports what it got as
    /// `starling_udp_recv_buffer_bytes`.
    udp_recv_buffer_bytes: u64,
    /// Send buffer (bytes) asked of the kernel for each QUIC UDP socket (`SO_SNDBUF`), like
    /// `udp_recv_buffer_bytes`; 0 leaves the OS default. A full send buffer makes the endpoint
    /// wait before it sends more. Linux grants at most `net.core.wmem_max`; the effective size
    /// is exported as `starling_udp_send_buffer_bytes`.
    udp_send_buffer_bytes: u64,
    /// UDP payload size (bytes) every QUIC connection starts with, before path MTU discovery
    /// raises it (quinn's `initial_mtu`). 1200, QUIC's minimum and quinn's default, is safe on
    /// any path; a larger value saves the discovery on a path known to carry it, and on a path
    /// that does not, packets are lost until black-hole detection falls back to 1200. At most
    /// `quic_max_mtu_discovery`.
    quic_initial_mtu: u16,
    /// Largest UDP payload size (bytes) path MTU discovery probes for (quinn's
    /// `MtuDiscoveryConfig::upper_bound`), before `quic_max_mtu_from_route` lowers it to what
    /// the route to each peer carries. The default, 6550, is the most a batch of datagrams
    /// allows, also on a 9000-byte network: quinn sends up to 10 datagrams per system call, and
    /// Linux refuses (and quinn silently loses) a batch over 64 KiB. Larger datagrams carry the
    /// same bytes in fewer packets. Discovery stops at what the path carries and falls back on
    /// black holes, so a bound above it costs only a few lost probes. Above 1472 the endpoint
    /// also accepts datagrams that large (quinn's `max_udp_payload_size`), without which the
    /// other side's discovery stops at 1472, and quinn's receive buffer grows with it (the
    /// memory-fit formula counts it). 1452, quinn's own default, fits a 1500-byte Ethernet MTU
    /// over IPv4 and IPv6 whatever the route says.
    quic_max_mtu_discovery: u16,
    /// Whether each connection's discovery bound follows the route to its peer: the MTU of the
    /// route the kernel uses towards the peer's address (`IP_MTU`/`IPV6_MTU` of a UDP socket
    /// connected to it, Linux) minus the IP and UDP headers (28 bytes for IPv4, 48 for IPv6),
    /// capped at `quic_max_mtu_discovery`. Loopback and jumbo-frame networks then get large
    /// datagrams and a 1500-byte network stays at 1472 (IPv4) or 1452 (IPv6), without
    /// configuration. Where the route's MTU cannot be read (another OS), the bound is 1452. `false`:
    /// every connection probes up to `quic_max_mtu_discovery` as it is.
    quic_max_mtu_from_route: bool,
    /// Congestion controller of every QUIC connection: `cubic` (quinn's default), `new_reno`
    /// or `bbr` (quinn's BBR is experimental).
    quic_congestion_controller: CongestionController,
    /// ACK frequency (the QUIC extension, draft-ietf-quic-ack-frequency): how many
    /// ack-eliciting packets the other side may leave unacknowledged; it sends an ACK once
    /// more have arrived, or after its ACK delay. Unset (the default): the extension is not
    /// asked for and the other side acknowledges every second packet (as with 1), as plain
    /// QUIC does. Larger values mean fewer ACKs (less CPU and fewer
    /// packets on the return path) and slower loss detection and window growth; 0 asks for an
    /// ACK per packet. At most 64. Honoured by peers that support the extension (quinn does).
    quic_ack_eliciting_threshold: Option<u32>,
    /// ACK frequency: the longest (µs) the other side may delay an ACK. Unset (the default):
    /// its own `max_ack_delay` (25 ms for quinn); when `quic_ack_eliciting_threshold` is unset
    /// too, the extension is not asked for. Lower values detect loss sooner at the cost of more
    /// ACKs. Between 1000 (quinn's `min_ack_delay`, below which it would not go) and 25000.
    quic_max_ack_delay_us: Option<u64>,

    ["Admission"]
    /// Most QUIC connections (clients and peer brokers) open at once. A connection attempt past
    /// it is refused at once (QUIC `CONNECTION_REFUSED`) and counted in
    /// `starling_quic_refused_total{reason="max_connections"}`.
    max_connections: u32,
    /// QUIC handshakes in progress from which on a new connection attempt must first prove its
    /// address with a QUIC Retry (one extra round trip; spoofed source addresses never get
    /// further). 0 makes every client prove its address.
    handshake_retry_threshold: u32,
    /// How long (ms) a new connection has for its QUIC/TLS handshake and its `Hello` together.
    /// A connection that has not been answered `HelloOk` by then is closed and counted in
    /// `starling_quic_refused_total{reason="handshake_timeout"}`, which frees its pending slot.
    handshake_timeout_ms: u64,
    /// Most connections whose handshake (TLS and `Hello`) is in progress. Each holds a small
    /// fixed grant (8 KiB windows and one `Hello` of at most 4 KiB, about 20 KiB) until its
    /// `Hello` succeeds; only then does it reserve its windows from
    /// `connection_buffer_budget_bytes`. An eighth of these slots (at least one) is kept for
    /// the addresses of peers (members' addresses that are IP literals, and addresses a
    /// connection with the peer certificate came from before), so strangers that never finish
    /// their handshake cannot keep a member's peer link out. An attempt past it is refused
    /// (QUIC `CONNECTION_REFUSED`) and counted in
    /// `starling_quic_refused_total{reason="pending_handshakes"}`. Once half of it is pending,
    /// new addresses must prove themselves with a QUIC Retry (as past
    /// `handshake_retry_threshold`, whichever is lower), so attempts from spoofed addresses
    /// cannot fill it.
    max_pending_handshakes: u32,
    /// Most pending handshakes from one source address (a peer's address is exempt). An
    /// attempt past it is refused and counted in
    /// `starling_quic_refused_total{reason="pending_handshakes_per_source"}`. At most
    /// `max_pending_handshakes`.
    max_pending_handshakes_per_source: u32,
    /// How long (ms) a new stream may take to deliver its complete first frame. A stream that
    /// has not is answered with an `Error` and closed, and counted in
    /// `starling_streams_timed_out_total`.
    stream_first_frame_timeout_ms: u64,
    /// How long (ms) a publish or cache stream may go without delivering a complete frame
    /// after its first one. A stream that has not is answered with an `Error` (request id 0)
    /// and closed, which releases its partial frame, and counted in
    /// `starling_streams_idle_closed_total{stream}`; the SDKs open a new stream for their next
    /// request. Subscription streams are exempt: waiting for events is their job, and the
    /// connection's idle timeout and keep-alive tell a live subscriber from a dead one.
    stream_idle_timeout_ms: u64,
    /// Most topics alive at once (a topic is alive while it has subscribers or traffic, and for
    /// a minute after). A publish or subscription that would create one more is
    /// refused with `Error` code `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_topics"}`; existing topics are unaffected. A
    /// live topic costs about 10 KiB besides what it retains for replay (measured with one
    /// message each), so the default bounds topic state near 160 MiB.
    max_topics: u32,
    /// Most subscriptions open at once on this broker, over all connections. A `Subscribe` past
    /// it is refused with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_subscriptions"}`. (Per connection, the stream
    /// limit `max_concurrent_streams` bounds them too.)
    max_subscriptions: u32,
    /// Most subscriptions open at once on one client connection. A `Subscribe` past it is
    /// refused with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_subscriptions_per_connection"}`; the
    /// connection's other subscriptions are unaffected. Connections from other members are
    /// exempt: one peer link carries the relayed subscriptions of every topic its member's
    /// clients follow here, and `max_subscriptions` still bounds them.
    max_subscriptions_per_connection: u32,
    /// Most wildcard subscriptions (a `Subscribe` whose topic is a pattern such as `orders.*`
    /// or `orders.>`, see `docs/subjects.md`) open at once on one client connection; they count
    /// against `max_subscriptions_per_connection` too. Each one is offered every batch of every
    /// topic it matches and is checked against every topic this broker creates, so they cost
    /// more than a subscription to one topic. A wildcard `Subscribe` past it is refused with
    /// `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_wildcard_subscriptions_per_connection"}`. A
    /// cluster member's peer connection is not bound by it: each of its pattern subscriptions
    /// feeds one client subscription at that member, counted there.
    max_wildcard_subscriptions_per_connection: u32,
    /// Most queue groups (see `docs/queue-groups.md`) one subject (a topic, or a wildcard
    /// pattern) may have at once. A group `Subscribe` that would create one more is refused
    /// with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_groups_per_subject"}`; joining an existing
    /// group is unaffected.
    max_groups_per_subject: u32,
    /// Most members one queue group may have at once (on this broker). A group `Subscribe`
    /// past it is refused with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_group_members"}`.
    max_group_members: u32,
    /// Most durable consumers (see `docs/consumers.md`) one durable topic may have on this
    /// broker. A `ConsumerOpen` that would create one more is refused with `LimitExceeded` and
    /// counted in `starling_limit_refusals_total{limit="max_consumers_per_topic"}`; joining an
    /// existing consumer is unaffected. A consumer, once created, stays loaded (its state and
    /// task) until the broker restarts.
    max_consumers_per_topic: u32,
    /// Most members (open `ConsumerOpen` streams) one durable consumer may have at once. A
    /// `ConsumerOpen` past it is refused with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_consumer_members"}`.
    max_consumer_members: u32,
    /// The largest `max_ack_pending` a durable consumer may ask for: the most messages it holds
    /// from its ack floor on (pending ones, whose payloads the broker keeps in memory, and
    /// those resolved out of order above the floor). A `ConsumerOpen` asking for more is
    /// refused with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_consumer_ack_pending"}`.
    max_consumer_ack_pending: u32,
    /// Most bytes of pending messages all durable consumers of this broker hold in memory
    /// together (each charged its payload plus 96 bytes of bookkeeping). A consumer at the
    /// budget stops reading its topic's log until acks free room (nothing is refused or lost:
    /// the messages stay in the log), counted in `starling_consumer_budget_waits_total`.
    /// Held bytes: `starling_consumer_pending_bytes`.
    consumer_pending_max_bytes: u64,
    /// Most reply inboxes one user may answer at once (request/reply, see `docs/subjects.md`):
    /// each request (a message with a `reply-to` header) delivered to a connection lets that
    /// connection's user publish a reply to the request's inbox, from any of its connections,
    /// whatever its `publish` rules. A user's grants hold this many, the most recent; a new one
    /// past it evicts the oldest, counted in `starling_reply_grants_evicted_total`, and a reply
    /// to an evicted inbox is refused with `Forbidden` unless the `publish` rules allow it.
    max_reply_inboxes_per_user: u32,
    /// Most headers one message may carry (the `HEADERS` feature, see `docs/protocol.md`). A
    /// `Publish` or `PublishBatch` with a message past it is refused whole with `LimitExceeded`
    /// and counted in `starling_limit_refusals_total{limit="max_headers_per_message"}`.
    max_headers_per_message: u32,
    /// Most bytes of headers one message may carry, as encoded (each name and value with its
    /// 2-byte length prefix, plus 4 for the list's count). A `Publish` or `PublishBatch` with a
    /// message past it is refused whole with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_header_bytes_per_message"}`. A message's
    /// headers are charged at this size to `max_inflight_publish_bytes` and, in the
    /// `EventHeaders` frame that precedes its batch, to each subscriber's queue, and count
    /// toward `event_batch_max_bytes`.
    max_header_bytes_per_message: u32,
    /// Most bytes of publish requests read from clients and not yet in a batch their topic has
    /// sealed and offered to its subscribers (or forwarded to the topic's owner), over all
    /// connections: the publish workers' queues, the topic channels and the open batches. A
    /// request is charged what it holds in memory, not what it carried on the wire: its payload
    /// bytes plus 68 bytes per payload (each payload's handle in the decoded request and again
    /// in its topic's open batch, and its length prefix), so a batch of empty payloads is
    /// charged like the memory it takes. A request larger than the whole budget is charged the
    /// whole budget. A publish stream that would pass it waits
    /// before it reads its next frame, so QUIC flow control slows that client down; nothing is
    /// refused or lost. Waits are counted in `starling_publish_budget_waits_total`, the bytes
    /// held in `starling_publish_inflight_bytes`. Streams from other members are not counted
    /// (their origin counted them), so two brokers forwarding to each other cannot wait on
    /// each other.
    max_inflight_publish_bytes: u64,
    /// Most bytes of `persisted` acks waiting for their durable topic's log to be fsynced, over
    /// all connections. Once a `persisted` publish's batch is in its topic's log, its ack
    /// waits only for the fsync that covers it (under `storage_fsync: interval`, the next
    /// periodic one), and it gives back its stream's place in `pub_queue_depth`: so one
    /// publish stream can keep more acks waiting for an fsync than its request window holds.
    /// Each waiting ack is charged what it holds in memory until its frame is written, 408
    /// bytes (the ack in its log's wait list with its share of the batch's entry, then its
    /// entry in its stream's reply channel, its place in the writer's list and its encoded
    /// frame), from when its request is read until its ack or refusal is written. A publish
    /// stream whose next `persisted` request would pass it waits before it hands that request
    /// on (its next frame is not read meanwhile, so QUIC flow control slows that client down);
    /// nothing is refused, lost or acked early. Waits are counted in
    /// `starling_persisted_ack_budget_waits_total{scope="broker"}`, the bytes held in
    /// `starling_persisted_acks_pending_bytes`. Replicated topics' acks (which wait for their
    /// Raft commit) and forwarded publishes keep their request-window place and are not
    /// charged.
    max_pending_persisted_ack_bytes: u64,
    /// Most of `max_pending_persisted_ack_bytes` one client connection may hold, so one
    /// publisher cannot take it all: a stream of a connection at its share waits as at the
    /// whole budget, counted in `starling_persisted_ack_budget_waits_total{scope="connection"}`.
    /// Connections from other members are held to the whole budget only (one peer link carries
    /// the forwarded publishes of every client of its member). At most
    /// `max_pending_persisted_ack_bytes`.
    max_pending_persisted_ack_bytes_per_connection: u64,
    /// Most payloads one `PublishBatch` may carry. The broker's decoder reads the batch's
    /// count first and refuses a larger one before it allocates anything for the payloads:
    /// the stream is answered with an `Error` (code `LimitExceeded`) and closed. Each payload
    /// costs about 68 bytes of memory besides its bytes (see `max_inflight_publish_bytes`), so
    /// the cap bounds what one decoded frame of tiny payloads holds before it is charged to
    /// the publish budget. Forwarded batches keep their client's count, so every member of a
    /// cluster needs the same value.
    max_publish_batch_items: u32,
    /// Most bytes of connection buffers granted to all open connections together. Each
    /// connection counts its connection receive window, its send window and its frame
    /// allowance (the bytes of partial frames its streams may hold once read: as much as the
    /// receive window, at least one `max_frame_bytes` frame; a stream past it stops being read,
    /// so QUIC flow control stops the client). A connection reserves its grant once its `Hello`
    /// succeeded (before that it holds the small pending grant of `max_pending_handshakes`, not
    /// counted here), and is granted the
    /// configured windows (`event_conn_recv_window`, `event_send_window`) while they fit in
    /// what is left of the budget's upper half; otherwise each window is at most an eighth of
    /// that rest (rounded down to a power of two) and at least 1 MiB (or the configured window,
    /// if smaller). The lower half only goes to such floor grants, which cost 2 MiB plus
    /// `max_frame_bytes` each (6 MiB by default): a budget of B admits at least
    /// B / 2 / (2 MiB + `max_frame_bytes`) connections, so many-client deployments raise it
    /// or lower `max_frame_bytes`. An attempt for which even the floor does not fit is refused
    /// (QUIC `CONNECTION_REFUSED`), and one that finds no room any more after its `Hello` is
    /// answered `Error` `Unavailable` and closed with code 3; both are counted in
    /// `starling_quic_refused_total{reason="connection_buffer_budget"}`. The grant is released
    /// when the connection ends. Granted bytes are exported as
    /// `starling_connection_buffer_bytes`. Cache connections never widen their receive window
    /// past their grant. Connections from other members are granted like clients: the shares
    /// keep part of the budget free while it fills, an open peer link keeps its grant, and a
    /// refused peer link is retried by its member.
    connection_buffer_budget_bytes: u64,

    ["Batching"]
    /// A topic flushes its pending EventBatch once it holds this many events.
    event_batch_max_events: u32,
    /// A topic flushes its pending EventBatch once its payloads reach this many bytes.
    event_batch_max_bytes: u32,
    /// A topic flushes its pending EventBatch this long (µs) after the first event entered it.
    event_batch_max_delay_us: u64,
    /// Most queued EventBatches a writer lane hands to one subscriber stream in a single write.
    fanout_batch_size: u32,
    /// Size (bytes) of each read from a publish stream; the unit in which publish bytes are
    /// pulled off the QUIC stream and decoded.
    publish_chunk_bytes: u32,

    ["Queues"]
    /// Per-connection publish pipeline queue (frames). When full, the broker stops reading the
    /// publisher's streams and QUIC flow control pushes back.
    pub_queue_depth: u32,
    /// Publish workers per connection. Topics are hashed onto workers, which keeps per-topic
    /// order per connection.
    pub_workers_per_conn: u32,
    /// Per-subscriber queue (EventBatches) where the slow-subscriber policy applies.
    subscriber_queue_capacity: u32,
    /// Most bytes of EventBatches queued for subscribers, over all subscriptions (a batch
    /// queued for n subscribers counts n times, although it is in memory once). A batch that
    /// would pass it is treated as if the subscriber's queue were full: `slow_subscriber_policy`
    /// applies (`block` waits for room, the others drop and count in
    /// `starling_dropped_events_total{reason="queue_budget"}`). The bytes held are
    /// `starling_subscriber_queued_bytes`.
    subscriber_queue_budget_bytes: u64,
    /// Per-lane queue of ready subscribers waiting for their writer lane.
    subscriber_lane_queue_depth: u32,

    ["Writer lanes and delivery"]
    /// Number of writer lanes that write EventBatches to subscriber streams.
    subscriber_writer_lanes: u32,
    /// Upper bound for `subscriber_writer_lanes`.
    max_subscriber_writer_lanes: u32,
    /// How subscribers are pinned to lanes: `auto`, `subscriber_id_hash`, `connection_id_hash`
    /// or `round_robin_pin`.
    subscriber_lane_shard: LaneShard,
    /// What a full subscriber queue does: `drop_new`, `drop_old` or `block`.
    slow_subscriber_policy: SlowSubscriberPolicy,
    /// When an acked publish is acknowledged: `received` as soon as the broker has accepted
    /// it; `committed` once its batch has been enqueued to every subscriber of its topic;
    /// `persisted` once its batch is in the topic's durable log on disk under
    /// `storage_fsync` (on a topic that `durable_topics` does not name, `persisted` means
    /// `committed`). Replaces the deprecated boolean `ack_on_commit`, which old files may
    /// still set (`true` = `committed`, `false` = `received`; the broker logs a warning).
    ack_level: AckLevel,
    /// How long (ms) each topic keeps its recent EventBatches so a subscriber that resumes
    /// from the position it reached (after a broker restart, an owner change or a lost
    /// connection) first receives what it missed. 0 keeps nothing.
    replay_window_ms: u64,
    /// Most bytes of encoded EventBatches each topic retains for resuming subscribers; the
    /// oldest go first. 0 keeps nothing.
    replay_max_bytes: u64,
    /// Most bytes of encoded EventBatches all topics of one broker retain together; a topic
    /// whose batch would pass it drops its own oldest batches first. 0 keeps nothing.
    replay_max_total_bytes: u64,
    /// How long (ms) a topic remembers the message id of a publish (the `Starling-Msg-Id`
    /// header, the `DEDUP` feature): a later message with the same id on the topic within it
    /// is dropped, counted in `starling_publish_duplicates_total`, and answered with the
    /// original's ack once the original reached the ack level. 0 remembers nothing. A topic
    /// holding ids is not retired before they expire.
    dedup_window_ms: u64,
    /// Most message ids one topic remembers at once; a new id past it evicts the oldest, whose
    /// repeat is then delivered again. 0 remembers nothing.
    dedup_max_ids: u32,
    /// Most bytes of a message id. A `Publish` or `PublishBatch` with a longer id is refused
    /// whole with `LimitExceeded` and counted in
    /// `starling_limit_refusals_total{limit="max_msg_id_bytes"}`; an empty id is refused with
    /// `InvalidRequest`.
    max_msg_id_bytes: u32,
    /// Most bytes the de-duplication windows of all topics hold together, each id charged its
    /// bytes plus 192 (its map and order slots). A publish whose new ids do not fit is refused
    /// whole with `LimitExceeded` (nothing of it delivered) and counted in
    /// `starling_limit_refusals_total{limit="dedup_max_total_bytes"}`; room comes back as ids
    /// expire. Held bytes: `starling_dedup_window_bytes`.
    dedup_max_total_bytes: u64,

    ["Durability"]
    /// Topics whose batches are appended to a log on disk under `storage_dir` before they are
    /// offered to subscribers, so they survive a restart or a crash of the broker and a
    /// subscriber can resume from any position the log still holds. Patterns in the access
    /// pattern language (`.`-separated tokens, `*` one token, a trailing `>` one or more
    /// tokens, else an exact name). Empty (the default): no durable topic. One copy, on this
    /// broker's volume: a lost volume loses the topics' logs.
    durable_topics: Vec<String>,
    /// Directory holding one log directory per durable topic (the topic name escaped into a
    /// file name). Required when `durable_topics` is not empty; the operator mounts the
    /// broker's volume at `/var/lib/starling`.
    storage_dir: Option<PathBuf>,
    /// Copies of each durable topic's log on distinct cluster members: 1 (one copy, on the
    /// topic's owner), 3 or 5 (a Raft group of that many replicas, `docs/replication.md`: a
    /// `persisted` ack means a majority of them fsynced the batch, and subscribers see only
    /// committed batches). The replicas are the first members of the topic's placement
    /// order. With fewer members than this, the topic refuses persisted publishes with
    /// `Unavailable` until there are enough; it never runs with fewer copies. Ignored outside
    /// a cluster. Every member must set the same value.
    durable_replicas: u32,
    /// When durable logs are fsynced: `always` (before a `persisted` ack; appends made while
    /// one fsync runs share the next one), `interval` (every `storage_fsync_interval_ms`;
    /// `persisted` acks wait for it) or `never` (left to the OS: survives a broker crash,
    /// not a machine crash; `persisted` acks once written).
    storage_fsync: StorageFsync,
    /// The period (ms) of the background fsync under `storage_fsync: interval`.
    storage_fsync_interval_ms: u64,
    /// Most bytes each durable topic's log keeps on disk; the oldest whole segments are
    /// deleted beyond it (the segment being written is kept). 0: no size limit.
    storage_retention_max_bytes: u64,
    /// How long (ms) a durable topic's log keeps a segment after its last record; older
    /// whole segments are deleted. 0: no age limit.
    storage_retention_max_age_ms: u64,
    /// The topics document: per-topic durability policies (JSON, `config/src/topics.rs`; the
    /// operator renders it from the cluster's `BrokerTopic` objects into a ConfigMap mounted
    /// in every broker pod). A topic matching a policy is durable with the policy's replicas,
    /// fsync, retention and largest message payload, each unset setting taking the knob
    /// above; the most specific policy wins, and `durable_topics` still makes the topics it
    /// names durable with the knobs' values. Read at start (a missing or invalid file stops
    /// the broker) and re-read by path every `auth_reload_interval_ms`: a changed valid
    /// document is put in force, an unreadable or invalid one is logged and counted and the
    /// one in force stays (`docs/durability.md`, "Per-topic policies"). Needs `storage_dir`.
    topics_file: Option<PathBuf>,

    ["Cache"]
    /// Upper bound (bytes) of cache keys, values and per-entry overhead; beyond it the least
    /// recently used entries are evicted.
    cache_max_bytes: u64,
    /// Number of independently locked cache shards (rounded up to a power of two).
    cache_shards: u32,
    /// Largest single cache value (bytes).
    cache_max_value_bytes: u32,

    ["Lifecycle"]
    /// On SIGTERM, how long (ms) the broker keeps flushing queued deliveries before it closes
    /// connections.
    drain_timeout_ms: u64,

    ["Cluster"]
    /// File listing the cluster's members, one `<id> <host:port>` line each (`#` starts a
    /// comment), re-read every `cluster_poll_interval_ms`. The member whose id equals this
    /// broker's id (`POD_NAME`, else `HOSTNAME`) is this broker. Unset, together with
    /// `cluster_members_configmap`: a single-node broker.
    cluster_members_file: Option<PathBuf>,
    /// Name of a ConfigMap in the pod's namespace (`POD_NAMESPACE`) whose `members` key has the
    /// same format as `cluster_members_file`, read through the Kubernetes API with the pod's
    /// service account. The operator sets it and keeps the ConfigMap current.
    cluster_members_configmap: Option<String>,
    /// How often (ms) the member list is re-read.
    cluster_poll_interval_ms: u64,
    /// PEM certificate chain this broker presents to its peers: common name `starling:peer`,
    /// signed by the CA in `auth_client_ca_file`. Must be set together with
    /// `cluster_peer_key_file`. Required for a cluster whose `auth_mode` is `required`.
    cluster_peer_cert_file: Option<PathBuf>,
    /// PEM private key matching `cluster_peer_cert_file`.
    cluster_peer_key_file: Option<PathBuf>,
    /// URI a peer's certificate must carry as a subject alternative name, besides the common
    /// name `starling:peer`, for a connection to be a peer: it names the cluster, so a peer
    /// certificate of the same CA for another cluster is refused. The operator sets
    /// `urn:starling:peer:<namespace>/<cluster>` and issues the peer certificate with it.
    /// Unset: the common name alone (a hand-run cluster).
    cluster_peer_uri: Option<String>,
    /// Receive and send window (bytes) of each connection this broker opens to another member
    /// (its peer links: relayed subscriptions, forwarded publishes and cache requests; a link
    /// has the profile's and tier's client pools of connections). Small, because members are
    /// close: 2 MiB carries about 4 GB/s at a 0.5 ms round trip. The memory-fit formula counts
    /// members − 1 links of this size.
    cluster_peer_window_bytes: u64,
    /// Limit (ms) on connecting to a peer broker; a peer that fails is reported `Unavailable`
    /// without a new attempt for the same time.
    cluster_peer_timeout_ms: u64,
    /// After a membership change, for this long (ms) a cache miss at a key's new owner asks the
    /// key's previous owner before answering "absent".
    cluster_handoff_window_ms: u64,
    /// Longest (ms) one Raft RPC of a replicated topic (`docs/replication.md`) may take over a
    /// peer link, from opening its stream to reading the reply. A call past it fails with a
    /// timeout and the topic's Raft retries on its own schedule.
    replica_rpc_timeout_ms: u64,
    /// Interval (ms) at which a replicated topic's Raft leader sends heartbeats (and retries
    /// replication) to its followers. It is also how long the leader waits for one append to
    /// be answered before it drops the call (`starling_replica_rpc_calls_total{outcome=
    /// "abandoned"}`). Must be below `replica_election_timeout_ms`.
    replica_heartbeat_ms: u64,
    /// Shortest time (ms) a follower of a replicated topic waits without hearing from its
    /// leader before it starts an election; each wait is drawn between this and twice it, and
    /// the leader's lease (a vote for another refused) lasts twice it. The fail-over gap after
    /// a lost leader is about this plus an election round. Raise it on slow disks or networks
    /// where a healthy leader's heartbeats can be late, at the cost of a longer fail-over
    /// (`docs/replication.md`, "Configuration").
    replica_election_timeout_ms: u64,
    /// Most Raft RPC streams (`ReplicaRpc`) one peer connection may have open at once here. A
    /// stream past it is refused with `Error` code `LimitExceeded` (the sending replica retries
    /// on its next heartbeat) and counted in
    /// `starling_limit_refusals_total{limit="max_replica_rpcs_per_connection"}`.
    max_replica_rpcs_per_connection: u32,
    /// Most replica-set moves of replicated topics (`docs/replication.md`, "Replica sets
    /// follow the membership") this broker leads at once: after a membership change every
    /// topic whose Raft leader is here moves its replicas to its new placement, each move
    /// catching new replicas up (possibly with a snapshot). A move past it waits for one to
    /// finish, counted in `starling_replica_moves_total{outcome="deferred"}`.
    max_concurrent_replica_moves: u32,
}
