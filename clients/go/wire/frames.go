package wire

// One struct per frame type, fields in wire order (docs/protocol.md, section 5).

import "strconv"

// Frame is one protocol frame. Each frame type is a struct in this file;
// [Append] encodes any of them and [Decoder] decodes them.
type Frame interface {
	// Kind is the frame's type number.
	Kind() Kind
	bodyLen() int
	appendBody(dst []byte) []byte
}

// Position is a place in a topic's event streams: event Seq of stream
// Stream. The zero Position means "none" where a position is optional.
type Position struct {
	// Stream is the stream id; never 0 for a real position.
	Stream uint64
	// Seq is the sequence number within the stream.
	Seq uint64
}

// IsZero reports whether p is the "none" position.
func (p Position) IsZero() bool { return p.Stream == 0 && p.Seq == 0 }

// Hello is the client's handshake (0x01).
type Hello struct {
	MinVersion uint8
	MaxVersion uint8
	Features   uint64
	ClientName string
	// HasAuthToken says whether the optional AuthToken is present.
	HasAuthToken bool
	AuthToken    []byte
}

// HelloOk is the broker's handshake acceptance (0x02).
type HelloOk struct {
	Version       uint8
	Features      uint64
	ServerID      string
	MaxFrameBytes uint32
	Epoch         uint64
}

// AckMode says whether a publish wants a PublishAck.
type AckMode uint8

const (
	// AckNone is fire and forget (errors are still reported).
	AckNone AckMode = 0
	// Ack asks for one PublishAck (or Error) per request.
	Ack AckMode = 1
)

// Header is one name/value header of a message (FeatureHeaders).
type Header struct {
	Name  string
	Value string
}

// IndexedHeaders are the headers of the message at Index in its batch.
type IndexedHeaders struct {
	Index   uint32
	Headers []Header
}

// Publish is one message for one topic (0x10). Headers, when not empty, are
// encoded after the payload; send them only to a broker that granted
// FeatureHeaders.
type Publish struct {
	RequestID uint64
	Ack       AckMode
	Topic     string
	Payload   []byte
	Headers   []Header
}

// PublishBatch is several messages for one topic (0x11). Headers lists the
// messages that have headers by strictly increasing index into Payloads;
// when not empty it is encoded after the payloads (FeatureHeaders only).
type PublishBatch struct {
	RequestID uint64
	Ack       AckMode
	Topic     string
	Payloads  [][]byte
	Headers   []IndexedHeaders
}

// PublishAck acknowledges a Publish (Count 1) or a PublishBatch (0x12).
type PublishAck struct {
	RequestID uint64
	Count     uint32
}

// StartKind is where a subscription starts.
type StartKind uint8

const (
	// StartLive takes live events only.
	StartLive StartKind = iota
	// StartPosition resumes at StartAt.Position (the next event wanted).
	StartPosition
	// StartTime starts at the first event stamped at or after StartAt.TimeMs.
	StartTime
)

// StartAt is where a subscription starts: live, a resume position or a time.
type StartAt struct {
	Kind     StartKind
	Position Position
	TimeMs   uint64
}

// Subscribe opens a subscription (0x20).
//
// A non-empty Group joins that queue group (feature QueueGroups): the frame
// then always carries start_time_ms, NoStartTime when Start is not a time,
// and the group name after it (docs/protocol.md, section 5.3).
type Subscribe struct {
	RequestID uint64
	Topic     string
	Start     StartAt
	Group     string
}

// SubscribeOk accepts a subscription (0x21).
type SubscribeOk struct {
	RequestID      uint64
	SubscriptionID uint64
}

// Unsubscribe ends a subscription (0x22).
type Unsubscribe struct {
	RequestID      uint64
	SubscriptionID uint64
}

// EventBatch carries consecutive events of one stream (0x23): event i has
// position (Stream, FirstSeq+i).
type EventBatch struct {
	Stream   uint64
	FirstSeq uint64
	Events   [][]byte
}

// BatchTopic names the topic of the next EventBatch on a wildcard
// subscription (0x24); sent only to a connection granted FeatureWildcards.
type BatchTopic struct {
	Topic string
}

// EventHeaders carries the headers of the next EventBatch's messages (0x25),
// by strictly increasing index into its events; sent only to a connection
// granted FeatureHeaders, and only before a batch with headers.
type EventHeaders struct {
	Entries []IndexedHeaders
}

// CachePut stores a value (0x30); TTLMs 0 means no expiry.
type CachePut struct {
	RequestID uint64
	Key       []byte
	Value     []byte
	TTLMs     uint64
}

// CacheGet reads a value (0x31).
type CacheGet struct {
	RequestID uint64
	Key       []byte
}

// CacheDelete removes a value (0x32).
type CacheDelete struct {
	RequestID uint64
	Key       []byte
}

// CacheValue answers CacheGet (0x33); Found is false for a missing key.
type CacheValue struct {
	RequestID uint64
	Found     bool
	Value     []byte
}

// CacheOk answers CachePut and CacheDelete (0x34).
type CacheOk struct {
	RequestID uint64
	Existed   bool
}

// Error reports a failure (0x40); RequestID 0 is not tied to a request.
type Error struct {
	RequestID uint64
	Code      ErrorCode
	Message   string
}

// Moved redirects a routing client to the owner (0x50).
type Moved struct {
	RequestID uint64
	Epoch     uint64
	Owner     string
}

// ClusterInfoRequest asks for the membership (0x51).
type ClusterInfoRequest struct {
	RequestID uint64
}

// Member is one cluster member: its server id and client-facing host:port.
type Member struct {
	ID   string
	Addr string
}

// ClusterInfo is the membership (0x52).
type ClusterInfo struct {
	RequestID uint64
	Epoch     uint64
	Members   []Member
}

// LogRead asks a member for a durable topic's log records (0x53, peers only).
type LogRead struct {
	RequestID uint64
	Topic     string
	From      Position
	MaxBytes  uint32
}

// LogChunk is one page of log records (0x54, peers only).
type LogChunk struct {
	RequestID uint64
	Next      Position
	More      bool
	Owner     bool
	Records   []byte
}

// LogClaim tells a topic's owner that the sender holds a log of it (0x55).
type LogClaim struct {
	RequestID uint64
	Topic     string
	FromID    string
	FromAddr  string
}

// LogClaimed answers a LogClaim (0x56).
type LogClaimed struct {
	RequestID uint64
	Records   uint64
}

// ReplicaRpc carries one Raft request or reply of a replicated topic between
// brokers (0x58, peers only); Rpc is opaque to the protocol.
type ReplicaRpc struct {
	RequestID uint64
	Topic     string
	Rpc       []byte
}

// Ping is a liveness probe (0x60).
type Ping struct{ Nonce uint64 }

// Pong answers a Ping with its nonce (0x61).
type Pong struct{ Nonce uint64 }

// ConsumerStartKind is where a new durable consumer starts reading its
// topic's log (the start_kind byte of ConsumerOpen).
type ConsumerStartKind uint8

const (
	// ConsumerStartFirst starts at the oldest message the log holds.
	ConsumerStartFirst ConsumerStartKind = 0
	// ConsumerStartLast starts at the newest message the log holds (and
	// everything after it).
	ConsumerStartLast ConsumerStartKind = 1
	// ConsumerStartPosition starts at ConsumerStart.Position (its stream
	// nonzero).
	ConsumerStartPosition ConsumerStartKind = 2
	// ConsumerStartTime starts at the first message stamped at or after
	// ConsumerStart.TimeMs (Unix milliseconds).
	ConsumerStartTime ConsumerStartKind = 3
)

// ConsumerStart is where a new durable consumer starts; the zero value is
// ConsumerStartFirst. Only the field its Kind names is encoded.
type ConsumerStart struct {
	Kind     ConsumerStartKind
	Position Position
	TimeMs   uint64
}

// ConsumerOpen joins (creating it if needed) durable consumer Consumer of
// durable topic Topic as a new member (0x70, FeatureConsumers): the first
// frame of a client-opened stream, answered with ConsumerOk (then
// ConsumerMessages) or Error. An empty DeadLetter is none; MaxDeliver 0 is
// no limit; AckWaitMs and MaxAckPending are at least 1; BackoffMs has at
// most MaxBackoffSteps entries.
type ConsumerOpen struct {
	RequestID     uint64
	Topic         string
	Consumer      string
	AckWaitMs     uint64
	MaxDeliver    uint32
	MaxAckPending uint32
	Start         ConsumerStart
	DeadLetter    string
	BackoffMs     []uint64
}

// ConsumerOk accepts a consumer member (0x71); MemberID is the broker's
// number for it (in its logs and errors).
type ConsumerOk struct {
	RequestID uint64
	MemberID  uint64
}

// ConsumerMessage is one delivery of one message to a consumer member
// (0x72): Delivery counts from 1, TimestampMs is when the message was
// written to the topic's log (Unix ms). Headers are the message's headers
// as published, encoded after the payload only when not empty; the broker
// sends them only on a connection it granted FeatureHeaders. A frame that
// ends right after the payload is the delivery without headers.
type ConsumerMessage struct {
	Position    Position
	Delivery    uint32
	TimestampMs uint64
	Payload     []byte
	Headers     []Header
}

// ConsumerAckOp is what a member says of a delivery (the op byte of
// ConsumerAck).
type ConsumerAckOp uint8

const (
	// OpAck: processed, never delivered again.
	OpAck ConsumerAckOp = 0
	// OpNak: redeliver after ConsumerAck.DelayMs (BackoffDelay: the
	// consumer's backoff schedule).
	OpNak ConsumerAckOp = 1
	// OpInProgress: still working; the delivery's deadline is ack_wait from
	// now again.
	OpInProgress ConsumerAckOp = 2
	// OpTerm: never deliver it again, unprocessed.
	OpTerm ConsumerAckOp = 3
)

// String is the op's name as the broker's metrics label it ("ack", "nak",
// "in_progress", "term"), or "op(N)".
func (o ConsumerAckOp) String() string {
	switch o {
	case OpAck:
		return "ack"
	case OpNak:
		return "nak"
	case OpInProgress:
		return "in_progress"
	case OpTerm:
		return "term"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// ConsumerAck is a member's answer to one delivery (0x73); nothing is sent
// back. DelayMs is a nak's delay and is encoded as 0 for the other ops.
type ConsumerAck struct {
	Position Position
	Op       ConsumerAckOp
	DelayMs  uint64
}

// Each frame's Kind.

// Kind is KindHello.
func (*Hello) Kind() Kind { return KindHello }

// Kind is KindHelloOk.
func (*HelloOk) Kind() Kind { return KindHelloOk }

// Kind is KindPublish.
func (*Publish) Kind() Kind { return KindPublish }

// Kind is KindPublishBatch.
func (*PublishBatch) Kind() Kind { return KindPublishBatch }

// Kind is KindPublishAck.
func (*PublishAck) Kind() Kind { return KindPublishAck }

// Kind is KindSubscribe.
func (*Subscribe) Kind() Kind { return KindSubscribe }

// Kind is KindSubscribeOk.
func (*SubscribeOk) Kind() Kind { return KindSubscribeOk }

// Kind is KindUnsubscribe.
func (*Unsubscribe) Kind() Kind { return KindUnsubscribe }

// Kind is KindEventBatch.
func (*EventBatch) Kind() Kind { return KindEventBatch }

// Kind is KindBatchTopic.
func (*BatchTopic) Kind() Kind { return KindBatchTopic }

// Kind is KindEventHeaders.
func (*EventHeaders) Kind() Kind { return KindEventHeaders }

// Kind is KindCachePut.
func (*CachePut) Kind() Kind { return KindCachePut }

// Kind is KindCacheGet.
func (*CacheGet) Kind() Kind { return KindCacheGet }

// Kind is KindCacheDelete.
func (*CacheDelete) Kind() Kind { return KindCacheDelete }

// Kind is KindCacheValue.
func (*CacheValue) Kind() Kind { return KindCacheValue }

// Kind is KindCacheOk.
func (*CacheOk) Kind() Kind { return KindCacheOk }

// Kind is KindError.
func (*Error) Kind() Kind { return KindError }

// Kind is KindMoved.
func (*Moved) Kind() Kind { return KindMoved }

// Kind is KindClusterInfoRequest.
func (*ClusterInfoRequest) Kind() Kind { return KindClusterInfoRequest }

// Kind is KindClusterInfo.
func (*ClusterInfo) Kind() Kind { return KindClusterInfo }

// Kind is KindLogRead.
func (*LogRead) Kind() Kind { return KindLogRead }

// Kind is KindLogChunk.
func (*LogChunk) Kind() Kind { return KindLogChunk }

// Kind is KindLogClaim.
func (*LogClaim) Kind() Kind { return KindLogClaim }

// Kind is KindLogClaimed.
func (*LogClaimed) Kind() Kind { return KindLogClaimed }

// Kind is KindReplicaRpc.
func (*ReplicaRpc) Kind() Kind { return KindReplicaRpc }

// Kind is KindPing.
func (*Ping) Kind() Kind { return KindPing }

// Kind is KindPong.
func (*Pong) Kind() Kind { return KindPong }

// Kind is KindConsumerOpen.
func (*ConsumerOpen) Kind() Kind { return KindConsumerOpen }

// Kind is KindConsumerOk.
func (*ConsumerOk) Kind() Kind { return KindConsumerOk }

// Kind is KindConsumerMessage.
func (*ConsumerMessage) Kind() Kind { return KindConsumerMessage }

// Kind is KindConsumerAck.
func (*ConsumerAck) Kind() Kind { return KindConsumerAck }
