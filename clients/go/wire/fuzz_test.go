package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"starling.invalid/starling/wire"
)

var errEOF = io.EOF

// FuzzDecode feeds arbitrary bytes to the decoder, whole and through the
// streaming Reader in small pieces. It checks that nothing panics, that both
// ways agree, and that every decoded frame re-encodes to its input bytes
// (the header's reserved flags aside). Its seed corpus is every vector of
// proto/vectors/frames.json (queue-group Subscribe frames and their malformed
// variants among them), plus the durable consumer frames of consumerSeeds
// (whether or not the vectors file has them yet), so `go test` runs them as
// regression cases.
func FuzzDecode(f *testing.F) {
	v := loadVectors(f)
	for _, c := range v.Valid {
		raw, _ := hex.DecodeString(c.Hex)
		f.Add(raw)
	}
	for _, c := range v.Invalid {
		raw, _ := hex.DecodeString(c.Hex)
		f.Add(raw)
	}
	for _, raw := range consumerSeeds() {
		f.Add(raw)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := wire.Decoder{MaxFrameBytes: limit}
		var whole []wire.Frame
		var wholeErr error
		rest := data
		for len(rest) > 0 {
			fr, n, err := dec.Decode(rest)
			if err != nil {
				var de *wire.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("not a DecodeError: %v", err)
				}
				wholeErr = err
				break
			}
			if fr == nil {
				break
			}
			got := wire.Encode(fr)
			want := append([]byte(nil), rest[:n]...)
			want[2], want[3] = 0, 0 // reserved flags are written as 0
			if !bytes.Equal(got, want) {
				t.Fatalf("%s re-encodes to %x, input %x", fr.Kind(), got, want)
			}
			whole = append(whole, fr)
			rest = rest[n:]
		}
		r := wire.NewReader(&pieces{data: data, size: 3}, limit)
		for i := 0; ; i++ {
			fr, err := r.ReadFrame()
			if err != nil {
				if i != len(whole) {
					t.Fatalf("reader stopped after %d frames, decoder read %d: %v", i, len(whole), err)
				}
				if wholeErr != nil && err.Error() != wholeErr.Error() {
					t.Fatalf("reader error %v, decoder error %v", err, wholeErr)
				}
				break
			}
			if i >= len(whole) || !bytes.Equal(wire.Encode(fr), wire.Encode(whole[i])) {
				t.Fatalf("frame %d differs between the decoder and the reader", i)
			}
			if r.Capacity() > 2*len(data)+wire.DefaultReadChunk+wire.GrowFloor {
				t.Fatalf("reader buffer %d for %d input bytes", r.Capacity(), len(data))
			}
		}
	})
}

// consumerSeeds are the four durable consumer frames in their variants (a
// message with and without headers), each also with a malformed field, and
// two of them back to back, as a member's stream carries them.
func consumerSeeds() [][]byte {
	frames := []wire.Frame{
		&wire.ConsumerOpen{RequestID: 9, Topic: "jobs", Consumer: "w1", AckWaitMs: 30000, MaxDeliver: 5,
			MaxAckPending: 100, DeadLetter: "dlq", BackoffMs: []uint64{1000, 5000}},
		&wire.ConsumerOpen{RequestID: 1, Topic: "j", Consumer: "c", AckWaitMs: 1, MaxAckPending: 1,
			Start: wire.ConsumerStart{Kind: wire.ConsumerStartPosition, Position: wire.Position{Stream: 7, Seq: 3}}},
		&wire.ConsumerOpen{RequestID: 2, Topic: "j", Consumer: "c", AckWaitMs: 1, MaxAckPending: 1,
			Start: wire.ConsumerStart{Kind: wire.ConsumerStartTime, TimeMs: 5}},
		&wire.ConsumerOpen{RequestID: 3, Topic: "j", Consumer: "c", AckWaitMs: 1, MaxAckPending: 1,
			Start: wire.ConsumerStart{Kind: wire.ConsumerStartLast}},
		&wire.ConsumerOk{RequestID: 9, MemberID: 0x0102},
		&wire.ConsumerMessage{Position: wire.Position{Stream: 1, Seq: 2}, Delivery: 3, TimestampMs: 4, Payload: []byte("job")},
		&wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpAck},
		&wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpNak, DelayMs: 250},
		&wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpNak, DelayMs: wire.BackoffDelay},
		&wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpInProgress},
		&wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpTerm},
		&wire.ConsumerMessage{Position: wire.Position{Stream: 1, Seq: 2}, Delivery: 3, TimestampMs: 4, Payload: []byte("job"),
			Headers: []wire.Header{{Name: "traceparent", Value: "00-01"}, {Name: wire.MsgIDHeader, Value: "job-7"}}},
	}
	var out [][]byte
	for _, fr := range frames {
		raw := wire.Encode(fr)
		out = append(out, raw)
		// The last byte's field broken: a backoff step, a delay, a payload,
		// a header value.
		broken := append([]byte(nil), raw...)
		broken[len(broken)-1] ^= 0xff
		out = append(out, broken)
		out = append(out, raw[:len(raw)-1])
	}
	out = append(out, append(wire.Encode(frames[5]), wire.Encode(frames[6])...))
	return out
}

type pieces struct {
	data []byte
	size int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.size, len(p.data))
	copy(b, p.data[:n])
	p.data = p.data[n:]
	return n, nil
}
