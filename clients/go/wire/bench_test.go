package wire_test

import (
	"testing"

	"starling.invalid/starling/wire"
)

func BenchmarkEncodePublish256(b *testing.B) {
	f := &wire.Publish{RequestID: 1, Topic: "bench.topic", Payload: make([]byte, 256)}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		buf = wire.Append(buf[:0], f)
	}
}

func BenchmarkDecodeEventBatch64x256(b *testing.B) {
	events := make([][]byte, 64)
	for i := range events {
		events[i] = make([]byte, 256)
	}
	raw := wire.Encode(&wire.EventBatch{Stream: 1, Events: events})
	dec := wire.Decoder{MaxFrameBytes: 1 << 20}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := dec.Decode(raw); err != nil {
			b.Fatal(err)
		}
	}
}
