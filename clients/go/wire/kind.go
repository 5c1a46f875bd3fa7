package wire

// Frame type numbers (the header's frame_type byte) and their names.

// Kind is a frame type number, the header's frame_type byte.
type Kind uint8

// The frame types of protocol version 2.
const (
	KindHello              Kind = 0x01
	KindHelloOk            Kind = 0x02
	KindPublish            Kind = 0x10
	KindPublishBatch       Kind = 0x11
	KindPublishAck         Kind = 0x12
	KindSubscribe          Kind = 0x20
	KindSubscribeOk        Kind = 0x21
	KindUnsubscribe        Kind = 0x22
	KindEventBatch         Kind = 0x23
	KindBatchTopic         Kind = 0x24
	KindEventHeaders       Kind = 0x25
	KindCachePut           Kind = 0x30
	KindCacheGet           Kind = 0x31
	KindCacheDelete        Kind = 0x32
	KindCacheValue         Kind = 0x33
	KindCacheOk            Kind = 0x34
	KindError              Kind = 0x40
	KindMoved              Kind = 0x50
	KindClusterInfoRequest Kind = 0x51
	KindClusterInfo        Kind = 0x52
	KindLogRead            Kind = 0x53
	KindLogChunk           Kind = 0x54
	KindLogClaim           Kind = 0x55
	KindLogClaimed         Kind = 0x56
	KindReplicaRpc         Kind = 0x58
	KindPing               Kind = 0x60
	KindPong               Kind = 0x61
	KindConsumerOpen       Kind = 0x70
	KindConsumerOk         Kind = 0x71
	KindConsumerMessage    Kind = 0x72
	KindConsumerAck        Kind = 0x73
)

var kindNames = map[Kind]string{
	KindHello:              "hello",
	KindHelloOk:            "hello_ok",
	KindPublish:            "publish",
	KindPublishBatch:       "publish_batch",
	KindPublishAck:         "publish_ack",
	KindSubscribe:          "subscribe",
	KindSubscribeOk:        "subscribe_ok",
	KindUnsubscribe:        "unsubscribe",
	KindEventBatch:         "event_batch",
	KindBatchTopic:         "batch_topic",
	KindEventHeaders:       "event_headers",
	KindCachePut:           "cache_put",
	KindCacheGet:           "cache_get",
	KindCacheDelete:        "cache_delete",
	KindCacheValue:         "cache_value",
	KindCacheOk:            "cache_ok",
	KindError:              "error",
	KindMoved:              "moved",
	KindClusterInfoRequest: "cluster_info_request",
	KindClusterInfo:        "cluster_info",
	KindLogRead:            "log_read",
	KindLogChunk:           "log_chunk",
	KindLogClaim:           "log_claim",
	KindLogClaimed:         "log_claimed",
	KindReplicaRpc:         "replica_rpc",
	KindPing:               "ping",
	KindPong:               "pong",
	KindConsumerOpen:       "consumer_open",
	KindConsumerOk:         "consumer_ok",
	KindConsumerMessage:    "consumer_message",
	KindConsumerAck:        "consumer_ack",
}

// Known reports whether k is an assigned frame type.
func (k Kind) Known() bool {
	_, ok := kindNames[k]
	return ok
}

// String is the frame type's stable snake_case name ("publish_batch"), or
// "0xNN" for an unassigned number.
func (k Kind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	const hex = "0123456789abcdef"
	return "0x" + string([]byte{hex[k>>4], hex[k&0xf]})
}
