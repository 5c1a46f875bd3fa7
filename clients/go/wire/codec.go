package wire

// Payload layouts: the size, encoder and decoder of every frame body, in
// wire order (docs/protocol.md, section 5).

func (f *Hello) bodyLen() int {
	n := 1 + 1 + 8 + strLen(f.ClientName) + 1
	if f.HasAuthToken {
		n += blobLen(f.AuthToken)
	}
	return n
}

func (f *Hello) appendBody(d []byte) []byte {
	d = putU8(d, f.MinVersion)
	d = putU8(d, f.MaxVersion)
	d = putU64(d, f.Features)
	d = putStr(d, f.ClientName)
	d = putBool(d, f.HasAuthToken)
	if f.HasAuthToken {
		d = putBlob(d, f.AuthToken)
	}
	return d
}

func decodeHello(b *body) Frame {
	f := &Hello{MinVersion: b.u8(), MaxVersion: b.u8(), Features: b.u64(), ClientName: b.str()}
	if f.HasAuthToken = b.present(); f.HasAuthToken {
		f.AuthToken = b.blob()
	}
	return f
}

func (f *HelloOk) bodyLen() int { return 1 + 8 + strLen(f.ServerID) + 4 + 8 }

func (f *HelloOk) appendBody(d []byte) []byte {
	d = putU8(d, f.Version)
	d = putU64(d, f.Features)
	d = putStr(d, f.ServerID)
	d = putU32(d, f.MaxFrameBytes)
	return putU64(d, f.Epoch)
}

func decodeHelloOk(b *body) Frame {
	return &HelloOk{Version: b.u8(), Features: b.u64(), ServerID: b.str(), MaxFrameBytes: b.u32(), Epoch: b.u64()}
}

func (b *body) ack() AckMode {
	v := b.u8()
	if b.err == nil && v > 1 {
		b.fail("ack mode is neither 0 nor 1")
	}
	return AckMode(v)
}

func (f *Publish) bodyLen() int {
	n := 8 + 1 + strLen(f.Topic) + blobLen(f.Payload)
	if len(f.Headers) > 0 {
		n += headersLen(f.Headers)
	}
	return n
}

func (f *Publish) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putU8(d, uint8(f.Ack))
	d = putStr(d, f.Topic)
	d = putBlob(d, f.Payload)
	if len(f.Headers) > 0 {
		d = putHeaders(d, f.Headers)
	}
	return d
}

func decodePublish(b *body) Frame {
	f := &Publish{RequestID: b.u64(), Ack: b.ack(), Topic: b.topic(), Payload: b.blob()}
	if b.err == nil && !b.atEnd() {
		f.Headers = b.headers()
	}
	return f
}

func (f *PublishBatch) bodyLen() int {
	n := 8 + 1 + strLen(f.Topic) + blobsLen(f.Payloads)
	if len(f.Headers) > 0 {
		n += indexedLen(f.Headers)
	}
	return n
}

func (f *PublishBatch) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putU8(d, uint8(f.Ack))
	d = putStr(d, f.Topic)
	d = putBlobs(d, f.Payloads)
	if len(f.Headers) > 0 {
		d = putIndexed(d, f.Headers)
	}
	return d
}

func decodePublishBatch(b *body) Frame {
	f := &PublishBatch{RequestID: b.u64(), Ack: b.ack(), Topic: b.topic(), Payloads: b.blobs()}
	if b.err == nil && !b.atEnd() {
		f.Headers = b.indexed()
		if b.err == nil && len(f.Headers) == 0 {
			b.fail(reasonHeadersEmpty)
		}
		if b.err == nil && uint64(f.Headers[len(f.Headers)-1].Index) >= uint64(len(f.Payloads)) {
			b.fail("header index past the last payload")
		}
	}
	return f
}

func (f *EventHeaders) bodyLen() int { return indexedLen(f.Entries) }

func (f *EventHeaders) appendBody(d []byte) []byte { return putIndexed(d, f.Entries) }

func decodeEventHeaders(b *body) Frame { return &EventHeaders{Entries: b.indexed()} }

func (f *PublishAck) bodyLen() int { return 12 }

func (f *PublishAck) appendBody(d []byte) []byte {
	return putU32(putU64(d, f.RequestID), f.Count)
}

func decodePublishAck(b *body) Frame { return &PublishAck{RequestID: b.u64(), Count: b.u32()} }

func (f *Subscribe) bodyLen() int {
	n := 8 + strLen(f.Topic) + 16
	if f.Start.Kind == StartTime || f.Group != "" {
		n += 8
	}
	if f.Group != "" {
		n += strLen(f.Group)
	}
	return n
}

func (f *Subscribe) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putStr(d, f.Topic)
	var p Position
	if f.Start.Kind == StartPosition {
		p = f.Start.Position
	}
	d = putPosition(d, p)
	switch {
	case f.Start.Kind == StartTime:
		d = putU64(d, f.Start.TimeMs)
	case f.Group != "":
		d = putU64(d, NoStartTime)
	}
	if f.Group != "" {
		d = putStr(d, f.Group)
	}
	return d
}

func decodeSubscribe(b *body) Frame {
	f := &Subscribe{RequestID: b.u64(), Topic: b.topic()}
	stream, seq := b.u64(), b.u64()
	if b.err != nil {
		return f
	}
	hasTime := !b.atEnd()
	var ms uint64
	if hasTime {
		ms = b.u64()
		if b.err != nil {
			return f
		}
	}
	// A group is at least 3 bytes (its length and one byte): fewer left after
	// the time are trailing bytes, as they were before groups existed.
	if len(b.buf) >= 3 {
		f.Group = b.str()
		if b.err != nil {
			return f
		}
		if reason := ValidateGroup(f.Group); reason != "" {
			b.fail(reason)
			return f
		}
		if ms == NoStartTime {
			hasTime = false
		}
	}
	switch {
	case stream == 0 && seq == 0 && !hasTime:
		f.Start = StartAt{Kind: StartLive}
	case stream == 0 && seq == 0:
		f.Start = StartAt{Kind: StartTime, TimeMs: ms}
	case stream == 0:
		b.fail("resume_seq set without a resume_stream")
	case hasTime:
		b.fail("start_time_ms set together with a resume position")
	default:
		f.Start = StartAt{Kind: StartPosition, Position: Position{Stream: stream, Seq: seq}}
	}
	return f
}

func (f *SubscribeOk) bodyLen() int { return 16 }

func (f *SubscribeOk) appendBody(d []byte) []byte {
	return putU64(putU64(d, f.RequestID), f.SubscriptionID)
}

func decodeSubscribeOk(b *body) Frame {
	return &SubscribeOk{RequestID: b.u64(), SubscriptionID: b.u64()}
}

func (f *Unsubscribe) bodyLen() int { return 16 }

func (f *Unsubscribe) appendBody(d []byte) []byte {
	return putU64(putU64(d, f.RequestID), f.SubscriptionID)
}

func decodeUnsubscribe(b *body) Frame {
	return &Unsubscribe{RequestID: b.u64(), SubscriptionID: b.u64()}
}

func (f *EventBatch) bodyLen() int { return 16 + blobsLen(f.Events) }

func (f *EventBatch) appendBody(d []byte) []byte {
	d = putU64(d, f.Stream)
	d = putU64(d, f.FirstSeq)
	return putBlobs(d, f.Events)
}

func decodeEventBatch(b *body) Frame {
	return &EventBatch{Stream: b.u64(), FirstSeq: b.u64(), Events: b.blobs()}
}

func (f *BatchTopic) bodyLen() int { return strLen(f.Topic) }

func (f *BatchTopic) appendBody(d []byte) []byte { return putStr(d, f.Topic) }

func decodeBatchTopic(b *body) Frame { return &BatchTopic{Topic: b.topic()} }

func (f *CachePut) bodyLen() int { return 8 + keyLen(f.Key) + blobLen(f.Value) + 8 }

func (f *CachePut) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putKey(d, f.Key)
	d = putBlob(d, f.Value)
	return putU64(d, f.TTLMs)
}

func decodeCachePut(b *body) Frame {
	return &CachePut{RequestID: b.u64(), Key: b.key(), Value: b.blob(), TTLMs: b.u64()}
}

func (f *CacheGet) bodyLen() int { return 8 + keyLen(f.Key) }

func (f *CacheGet) appendBody(d []byte) []byte { return putKey(putU64(d, f.RequestID), f.Key) }

func decodeCacheGet(b *body) Frame { return &CacheGet{RequestID: b.u64(), Key: b.key()} }

func (f *CacheDelete) bodyLen() int { return 8 + keyLen(f.Key) }

func (f *CacheDelete) appendBody(d []byte) []byte { return putKey(putU64(d, f.RequestID), f.Key) }

func decodeCacheDelete(b *body) Frame { return &CacheDelete{RequestID: b.u64(), Key: b.key()} }

func (f *CacheValue) bodyLen() int {
	if f.Found {
		return 9 + blobLen(f.Value)
	}
	return 9
}

func (f *CacheValue) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putBool(d, f.Found)
	if f.Found {
		d = putBlob(d, f.Value)
	}
	return d
}

func decodeCacheValue(b *body) Frame {
	f := &CacheValue{RequestID: b.u64()}
	if f.Found = b.present(); f.Found {
		f.Value = b.blob()
	}
	return f
}

func (f *CacheOk) bodyLen() int { return 9 }

func (f *CacheOk) appendBody(d []byte) []byte { return putBool(putU64(d, f.RequestID), f.Existed) }

func decodeCacheOk(b *body) Frame { return &CacheOk{RequestID: b.u64(), Existed: b.boolean()} }

func (f *Error) bodyLen() int { return 10 + strLen(f.Message) }

func (f *Error) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putU16(d, uint16(f.Code))
	return putStr(d, f.Message)
}

func decodeError(b *body) Frame {
	return &Error{RequestID: b.u64(), Code: ErrorCode(b.u16()), Message: b.str()}
}

func (f *Moved) bodyLen() int { return 16 + strLen(f.Owner) }

func (f *Moved) appendBody(d []byte) []byte {
	return putStr(putU64(putU64(d, f.RequestID), f.Epoch), f.Owner)
}

func decodeMoved(b *body) Frame { return &Moved{RequestID: b.u64(), Epoch: b.u64(), Owner: b.str()} }

func (f *ClusterInfoRequest) bodyLen() int { return 8 }

func (f *ClusterInfoRequest) appendBody(d []byte) []byte { return putU64(d, f.RequestID) }

func decodeClusterInfoRequest(b *body) Frame { return &ClusterInfoRequest{RequestID: b.u64()} }

func (f *ClusterInfo) bodyLen() int {
	n := 20
	for _, m := range f.Members {
		n += strLen(m.ID) + strLen(m.Addr)
	}
	return n
}

func (f *ClusterInfo) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putU64(d, f.Epoch)
	d = putU32(d, uint32(len(f.Members)))
	for _, m := range f.Members {
		d = putStr(putStr(d, m.ID), m.Addr)
	}
	return d
}

// minMemberLen is the smallest encoded member: two empty strings.
const minMemberLen = 4

func decodeClusterInfo(b *body) Frame {
	f := &ClusterInfo{RequestID: b.u64(), Epoch: b.u64()}
	n := b.count(minMemberLen)
	if b.err != nil {
		return f
	}
	f.Members = make([]Member, 0, n)
	for i := 0; i < n && b.err == nil; i++ {
		f.Members = append(f.Members, Member{ID: b.str(), Addr: b.str()})
	}
	return f
}

func (f *LogRead) bodyLen() int { return 8 + strLen(f.Topic) + 16 + 4 }

func (f *LogRead) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putStr(d, f.Topic)
	d = putPosition(d, f.From)
	return putU32(d, f.MaxBytes)
}

func decodeLogRead(b *body) Frame {
	return &LogRead{RequestID: b.u64(), Topic: b.topic(), From: b.position(), MaxBytes: b.u32()}
}

func (f *LogChunk) bodyLen() int { return 8 + 16 + 2 + blobLen(f.Records) }

func (f *LogChunk) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putPosition(d, f.Next)
	d = putBool(d, f.More)
	d = putBool(d, f.Owner)
	return putBlob(d, f.Records)
}

func decodeLogChunk(b *body) Frame {
	return &LogChunk{RequestID: b.u64(), Next: b.position(), More: b.boolean(), Owner: b.boolean(), Records: b.blob()}
}

func (f *LogClaim) bodyLen() int {
	return 8 + strLen(f.Topic) + strLen(f.FromID) + strLen(f.FromAddr)
}

func (f *LogClaim) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putStr(d, f.Topic)
	d = putStr(d, f.FromID)
	return putStr(d, f.FromAddr)
}

func decodeLogClaim(b *body) Frame {
	return &LogClaim{RequestID: b.u64(), Topic: b.topic(), FromID: b.str(), FromAddr: b.str()}
}

func (f *LogClaimed) bodyLen() int { return 16 }

func (f *LogClaimed) appendBody(d []byte) []byte {
	return putU64(putU64(d, f.RequestID), f.Records)
}

func decodeLogClaimed(b *body) Frame { return &LogClaimed{RequestID: b.u64(), Records: b.u64()} }

func (f *ReplicaRpc) bodyLen() int { return 8 + strLen(f.Topic) + blobLen(f.Rpc) }

func (f *ReplicaRpc) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putStr(d, f.Topic)
	return putBlob(d, f.Rpc)
}

func decodeReplicaRpc(b *body) Frame {
	return &ReplicaRpc{RequestID: b.u64(), Topic: b.topic(), Rpc: b.blob()}
}

func (f *Ping) bodyLen() int               { return 8 }
func (f *Ping) appendBody(d []byte) []byte { return putU64(d, f.Nonce) }
func decodePing(b *body) Frame             { return &Ping{Nonce: b.u64()} }
func (f *Pong) bodyLen() int               { return 8 }
func (f *Pong) appendBody(d []byte) []byte { return putU64(d, f.Nonce) }
func decodePong(b *body) Frame             { return &Pong{Nonce: b.u64()} }

func (f *ConsumerOpen) bodyLen() int {
	return 8 + strLen(f.Topic) + strLen(f.Consumer) + 8 + 4 + 4 + 1 + 16 + strLen(f.DeadLetter) +
		4 + 8*len(f.BackoffMs)
}

func (f *ConsumerOpen) appendBody(d []byte) []byte {
	d = putU64(d, f.RequestID)
	d = putStr(d, f.Topic)
	d = putStr(d, f.Consumer)
	d = putU64(d, f.AckWaitMs)
	d = putU32(d, f.MaxDeliver)
	d = putU32(d, f.MaxAckPending)
	var a, b uint64
	switch f.Start.Kind {
	case ConsumerStartPosition:
		a, b = f.Start.Position.Stream, f.Start.Position.Seq
	case ConsumerStartTime:
		a = f.Start.TimeMs
	}
	d = putU8(d, uint8(f.Start.Kind))
	d = putU64(d, a)
	d = putU64(d, b)
	d = putStr(d, f.DeadLetter)
	d = putU32(d, uint32(len(f.BackoffMs)))
	for _, ms := range f.BackoffMs {
		d = putU64(d, ms)
	}
	return d
}

func decodeConsumerOpen(b *body) Frame {
	f := &ConsumerOpen{RequestID: b.u64(), Topic: b.topic(), Consumer: b.str()}
	if b.err == nil {
		if reason := ValidateConsumer(f.Consumer); reason != "" {
			b.fail(reason)
		}
	}
	if f.AckWaitMs = b.u64(); b.err == nil && f.AckWaitMs == 0 {
		b.fail("ack_wait_ms is 0")
	}
	f.MaxDeliver = b.u32()
	if f.MaxAckPending = b.u32(); b.err == nil && f.MaxAckPending == 0 {
		b.fail("max_ack_pending is 0")
	}
	kind, x, y := ConsumerStartKind(b.u8()), b.u64(), b.u64()
	if b.err == nil {
		switch {
		case kind == ConsumerStartFirst && x == 0 && y == 0, kind == ConsumerStartLast && x == 0 && y == 0:
			f.Start = ConsumerStart{Kind: kind}
		case kind == ConsumerStartPosition && x == 0:
			b.fail("consumer start position with stream 0")
		case kind == ConsumerStartPosition:
			f.Start = ConsumerStart{Kind: kind, Position: Position{Stream: x, Seq: y}}
		case kind == ConsumerStartTime && y == 0:
			f.Start = ConsumerStart{Kind: kind, TimeMs: x}
		case kind <= ConsumerStartTime:
			b.fail("unused consumer start field is not 0")
		default:
			b.fail("unknown consumer start kind")
		}
	}
	if dl := b.str(); b.err == nil && dl != "" {
		if ValidateTopic(dl) != "" {
			b.fail("invalid dead-letter topic")
		}
		f.DeadLetter = dl
	}
	n := b.count(8)
	if b.err == nil && n > MaxBackoffSteps {
		b.fail("backoff schedule longer than 16 steps")
	}
	if b.err == nil && n > 0 {
		f.BackoffMs = make([]uint64, n)
		for i := range f.BackoffMs {
			f.BackoffMs[i] = b.u64()
		}
	}
	return f
}

func (f *ConsumerOk) bodyLen() int { return 16 }

func (f *ConsumerOk) appendBody(d []byte) []byte { return putU64(putU64(d, f.RequestID), f.MemberID) }

func decodeConsumerOk(b *body) Frame { return &ConsumerOk{RequestID: b.u64(), MemberID: b.u64()} }

func (f *ConsumerMessage) bodyLen() int {
	n := 16 + 4 + 8 + blobLen(f.Payload)
	if len(f.Headers) > 0 {
		n += headersLen(f.Headers)
	}
	return n
}

func (f *ConsumerMessage) appendBody(d []byte) []byte {
	d = putPosition(d, f.Position)
	d = putU32(d, f.Delivery)
	d = putU64(d, f.TimestampMs)
	d = putBlob(d, f.Payload)
	if len(f.Headers) > 0 {
		d = putHeaders(d, f.Headers)
	}
	return d
}

func decodeConsumerMessage(b *body) Frame {
	f := &ConsumerMessage{Position: Position{Stream: b.u64(), Seq: b.u64()}}
	if f.Delivery = b.u32(); b.err == nil && f.Delivery == 0 {
		b.fail("delivery 0")
	}
	f.TimestampMs = b.u64()
	f.Payload = b.blob()
	if b.err == nil && !b.atEnd() {
		f.Headers = b.headers()
	}
	return f
}

func (f *ConsumerAck) bodyLen() int { return 16 + 1 + 8 }

func (f *ConsumerAck) appendBody(d []byte) []byte {
	d = putPosition(d, f.Position)
	d = putU8(d, uint8(f.Op))
	if f.Op == OpNak {
		return putU64(d, f.DelayMs)
	}
	return putU64(d, 0)
}

func decodeConsumerAck(b *body) Frame {
	f := &ConsumerAck{Position: Position{Stream: b.u64(), Seq: b.u64()}, Op: ConsumerAckOp(b.u8()), DelayMs: b.u64()}
	if b.err == nil {
		switch f.Op {
		case OpNak:
		case OpAck, OpInProgress, OpTerm:
			if f.DelayMs != 0 {
				b.fail("delay_ms set on an op other than nak")
			}
		default:
			b.fail("unknown consumer ack op")
		}
	}
	return f
}

var decoders = map[Kind]func(*body) Frame{
	KindHello:              decodeHello,
	KindHelloOk:            decodeHelloOk,
	KindPublish:            decodePublish,
	KindPublishBatch:       decodePublishBatch,
	KindPublishAck:         decodePublishAck,
	KindSubscribe:          decodeSubscribe,
	KindSubscribeOk:        decodeSubscribeOk,
	KindUnsubscribe:        decodeUnsubscribe,
	KindEventBatch:         decodeEventBatch,
	KindBatchTopic:         decodeBatchTopic,
	KindEventHeaders:       decodeEventHeaders,
	KindCachePut:           decodeCachePut,
	KindCacheGet:           decodeCacheGet,
	KindCacheDelete:        decodeCacheDelete,
	KindCacheValue:         decodeCacheValue,
	KindCacheOk:            decodeCacheOk,
	KindError:              decodeError,
	KindMoved:              decodeMoved,
	KindClusterInfoRequest: decodeClusterInfoRequest,
	KindClusterInfo:        decodeClusterInfo,
	KindLogRead:            decodeLogRead,
	KindLogChunk:           decodeLogChunk,
	KindLogClaim:           decodeLogClaim,
	KindLogClaimed:         decodeLogClaimed,
	KindReplicaRpc:         decodeReplicaRpc,
	KindPing:               decodePing,
	KindPong:               decodePong,
	KindConsumerOpen:       decodeConsumerOpen,
	KindConsumerOk:         decodeConsumerOk,
	KindConsumerMessage:    decodeConsumerMessage,
	KindConsumerAck:        decodeConsumerAck,
}

// DecodePayload decodes a complete payload of a frame of type k. Blob fields
// of the result are slices of payload. Trailing bytes are malformed.
func DecodePayload(k Kind, payload []byte) (Frame, error) {
	dec, ok := decoders[k]
	if !ok {
		return nil, &DecodeError{Kind: UnknownFrameType, Type: uint8(k)}
	}
	b := &body{buf: payload, frame: k.String()}
	f := dec(b)
	b.finish()
	if b.err != nil {
		return nil, b.err
	}
	return f, nil
}

// PayloadLen is the length of f's payload (the header's payload_len).
func PayloadLen(f Frame) int { return f.bodyLen() }

// EncodedLen is f's encoded size, header included.
func EncodedLen(f Frame) int { return HeaderLen + f.bodyLen() }

// Append appends f, header and payload, to dst. It never fails: a string or
// key longer than its length prefix allows is cut short so the frame stays
// parseable; validate topics and keys, and keep payloads within the peer's
// max_frame_bytes, before sending.
func Append(dst []byte, f Frame) []byte {
	n := f.bodyLen()
	if n > maxU32 {
		n = maxU32
	}
	dst = putU8(dst, FramingVersion)
	dst = putU8(dst, uint8(f.Kind()))
	dst = putU16(dst, 0)
	dst = putU32(dst, uint32(n))
	return f.appendBody(dst)
}

// AppendPublish appends f as Append does, without boxing it in a Frame, so
// a caller's Publish can stay on its stack (the publish hot path).
func AppendPublish(dst []byte, f *Publish) []byte {
	return f.appendBody(appendHeader(dst, KindPublish, f.bodyLen()))
}

// AppendPublishBatch appends f as Append does, without boxing it in a Frame.
func AppendPublishBatch(dst []byte, f *PublishBatch) []byte {
	return f.appendBody(appendHeader(dst, KindPublishBatch, f.bodyLen()))
}

func appendHeader(dst []byte, k Kind, n int) []byte {
	if n > maxU32 {
		n = maxU32
	}
	dst = putU8(dst, FramingVersion)
	dst = putU8(dst, uint8(k))
	dst = putU16(dst, 0)
	return putU32(dst, uint32(n))
}

// Encode returns f encoded in a fresh buffer.
func Encode(f Frame) []byte { return Append(make([]byte, 0, EncodedLen(f)), f) }
