// Package wire is the Starling wire protocol (docs/protocol.md): the 8-byte
// frame header, one struct per frame type with its encoder and decoder, and
// an allocation-bounded streaming [Decoder].
//
// Every length and count read from the network is checked against the bytes
// actually remaining before anything is allocated for it, so no input makes
// the decoder allocate more than a small constant factor of the bytes it was
// given, and no input makes it panic. Decode errors carry the same kind,
// frame name and reason as the reference implementation (the Rust
// starling-proto crate); proto/vectors/frames.json pins both.
package wire

// ProtocolVersion is the only protocol version this package speaks; it fixes
// the payload layouts and is negotiated with Hello/HelloOk.
const ProtocolVersion uint8 = 2

// FramingVersion is the version byte of every frame header. It covers only
// the header and has been 1 since protocol version 1.
const FramingVersion uint8 = 1

// HeaderLen is the size of the fixed frame header.
const HeaderLen = 8

// MaxTopicLen is the longest topic in bytes (topics are also non-empty).
const MaxTopicLen = 255

// MaxKeyLen is the longest cache key in bytes (keys are also non-empty).
const MaxKeyLen = 1024

// MaxGroupLen is the longest queue-group name in bytes (names are also
// non-empty, see ValidateGroup).
const MaxGroupLen = 64

// MaxConsumerLen is the longest durable consumer name in bytes (names are
// also non-empty, see ValidateConsumer).
const MaxConsumerLen = 64

// MaxBackoffSteps is the most entries of a consumer's backoff schedule
// (ConsumerOpen.BackoffMs).
const MaxBackoffSteps = 16

// BackoffDelay is the ConsumerAck.DelayMs of a nak that waits the
// consumer's backoff schedule (all bits set).
const BackoffDelay = ^uint64(0)

// MsgIDHeader is the reserved header holding a message's publisher-chosen
// id for publish de-duplication (FeatureDedup); names compare exactly.
const MsgIDHeader = "Starling-Msg-Id"

// MaxMsgIDLen is the most bytes a message id may have on any broker (a
// broker's max_msg_id_bytes, 128 by default, may be lower).
const MaxMsgIDLen = 1024

// NoStartTime is the start_time_ms of a queue-group Subscribe without a start
// time (all bits set).
const NoStartTime = ^uint64(0)

// ALPN names a connection offers in its TLS handshake.
const (
	// ALPNEvents is offered by publish and subscribe connections.
	ALPNEvents = "starling/1"
	// ALPNCache is offered by cache connections.
	ALPNCache = "starling-cache/1"
)

// Feature bits requested in Hello.Features and granted in HelloOk.Features.
const (
	// FeatureBatchPublish: PublishBatch is accepted.
	FeatureBatchPublish uint64 = 1
	// FeatureCache: the cache frames are served.
	FeatureCache uint64 = 2
	// FeatureCluster: the client routes by owner and is answered Moved.
	FeatureCluster uint64 = 4
	// FeatureAuthToken: the client authenticates with Hello.AuthToken.
	FeatureAuthToken uint64 = 8
	// FeaturePeer: the connection is another cluster member.
	FeaturePeer uint64 = 16
	// FeatureSubscribeFromTime: Subscribe may carry StartTimeMs.
	FeatureSubscribeFromTime uint64 = 32
	// FeatureWildcards: a Subscribe topic may be a pattern (orders.*,
	// orders.>), its EventBatches each preceded by a BatchTopic.
	FeatureWildcards uint64 = 64
	// FeatureHeaders: messages may carry headers (Publish and PublishBatch
	// end with their header lists, and EventHeaders precedes a batch with
	// headers).
	FeatureHeaders uint64 = 128
	// FeatureRequest: a Publish whose headers hold reply-to is a request,
	// answered with CodeNoResponders when its topic has no subscriber.
	FeatureRequest uint64 = 256
	// FeatureQueueGroups: a Subscribe may end with a queue-group name
	// (Subscribe.Group), which is then preceded by start_time_ms.
	FeatureQueueGroups uint64 = 512
	// FeatureConsumers: a client-opened stream may start with ConsumerOpen
	// to join a durable consumer of a durable topic, and then carries its
	// ConsumerMessage deliveries and the member's ConsumerAcks
	// (docs/protocol.md, section 5.8).
	FeatureConsumers uint64 = 1024
	// FeatureDedup: a message whose headers hold MsgIDHeader carries a
	// publisher-chosen id, and its topic drops a repeat of an id it saw
	// within its window, answering the repeat with the original's ack
	// (docs/protocol.md, section 5.2, De-duplication). Needs FeatureHeaders.
	FeatureDedup uint64 = 2048
	// FeaturesBase is what every client connection asks for.
	FeaturesBase = FeatureBatchPublish | FeatureCache | FeatureSubscribeFromTime
	// FeaturesClient is what the client's plain and routing connections ask
	// for: the base set, wildcard subscriptions, headers, request/reply,
	// queue groups, durable consumers and publish de-duplication (as the
	// Rust SDK does; a peer's connection asks for none of these).
	FeaturesClient = FeaturesBase | FeatureWildcards | FeatureHeaders | FeatureRequest |
		FeatureQueueGroups | FeatureConsumers | FeatureDedup
)
