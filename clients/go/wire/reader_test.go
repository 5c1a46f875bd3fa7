package wire_test

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"starling.invalid/starling/wire"
)

// A header announcing a maximal frame followed by a trickle of bytes costs
// the reader memory in proportion to what arrived, not to the announcement.
func TestReaderGrowsWithTheBytesReceived(t *testing.T) {
	const limit = 64 << 20
	payload := make([]byte, 8<<20)
	raw := wire.Encode(&wire.Publish{RequestID: 1, Topic: "t", Payload: payload})
	src := &pieces{data: raw, size: 1024}
	r := wire.NewReader(src, limit)
	done := make(chan error, 1)
	go func() { _, err := r.ReadFrame(); done <- err }()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if c := r.Capacity(); c > 3*len(raw) {
		t.Fatalf("capacity %d for a %d-byte frame", c, len(raw))
	}
	// Only the header and nothing else: a few KiB.
	header := raw[:wire.HeaderLen]
	r = wire.NewReader(bytes.NewReader(header), limit)
	if _, err := r.ReadFrame(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	if c := r.Capacity(); c > wire.DefaultReadChunk+wire.GrowFloor {
		t.Fatalf("capacity %d after a bare header announcing %d bytes", c, len(payload))
	}
}

func TestReaderEndsCleanlyAndFramesStayValid(t *testing.T) {
	var raw []byte
	raw = wire.Append(raw, &wire.Ping{Nonce: 1})
	raw = wire.Append(raw, &wire.EventBatch{Stream: 1, Events: [][]byte{[]byte("first")}})
	raw = wire.Append(raw, &wire.EventBatch{Stream: 1, FirstSeq: 1, Events: [][]byte{[]byte("second")}})
	r := wire.NewReader(&pieces{data: raw, size: 5}, 1024)
	var batches []*wire.EventBatch
	for {
		f, err := r.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := f.(*wire.EventBatch); ok {
			batches = append(batches, b)
		}
	}
	if len(batches) != 2 || string(batches[0].Events[0]) != "first" || string(batches[1].Events[0]) != "second" {
		t.Fatalf("frames changed after later reads: %q %q", batches[0].Events[0], batches[1].Events[0])
	}
}

func TestSeenStreamsDropsRepeats(t *testing.T) {
	var s wire.SeenStreams
	at := func(stream, seq uint64) wire.Position { return wire.Position{Stream: stream, Seq: seq} }
	for _, c := range []struct {
		first wire.Position
		n     int
		skip  int
	}{
		{at(1, 0), 10, 0}, {at(1, 5), 10, 5}, {at(1, 0), 3, 3}, {at(1, 15), 1, 0},
		{at(2, 0), 4, 0}, {at(1, 12), 4, 4},
	} {
		if got := s.Skip(c.first, c.n); got != c.skip {
			t.Fatalf("skip(%+v, %d) = %d, want %d", c.first, c.n, got, c.skip)
		}
	}
	for i := uint64(3); i <= 10; i++ {
		s.Skip(at(i, 0), 1)
	}
	if s.Skip(at(1, 0), 1) != 0 {
		t.Fatal("the oldest stream should be forgotten")
	}
}

func TestEncoderCutsOverlongStringsOnACharacterBoundary(t *testing.T) {
	long := bytes.Repeat([]byte("é"), 40000) // 80000 bytes
	raw := wire.Encode(&wire.Error{RequestID: 1, Code: wire.CodeInternal, Message: string(long)})
	f, _, err := wire.Decoder{MaxFrameBytes: 1 << 20}.Decode(raw)
	if err != nil {
		t.Fatalf("an over-long message must still encode to a valid frame: %v", err)
	}
	if m := f.(*wire.Error).Message; len(m) != 65534 {
		t.Fatalf("cut to %d bytes", len(m))
	}
}
