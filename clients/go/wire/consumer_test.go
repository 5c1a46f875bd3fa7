package wire_test

// The durable consumer frames (0x70-0x73) and the message id header, against
// the hand-written vectors of proto/tests/vectors (read directly, so these
// run whether or not proto/vectors/frames.json carries the frames yet) and
// the malformed cases of the reference implementation's own unit tests.

import (
	"bytes"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"starling.invalid/starling/wire"
)

// handWritten is proto/tests/vectors (or its invalid/ subdirectory).
func handWritten(sub string) string {
	return filepath.Join("..", "..", "..", "proto", "tests", "vectors", sub)
}

// parseHexFile reads a .hex vector: whitespace ignored, '#' to the end of a
// line a comment. It also returns the "# expect: " line's text, if any.
func parseHexFile(t *testing.T, path string) (raw []byte, expect string) {
	t.Helper()
	text, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var digits strings.Builder
	for line := range strings.SplitSeq(string(text), "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			if e, ok := strings.CutPrefix(strings.TrimSpace(line[i:]), "# expect: "); ok {
				expect = e
			}
			line = line[:i]
		}
		digits.WriteString(strings.Join(strings.Fields(line), ""))
	}
	raw, err = hex.DecodeString(digits.String())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return raw, expect
}

const handWrittenLimit = 1 << 20

// Every hand-written vector: the valid ones decode and re-encode byte for
// byte, the invalid ones fail with their "# expect:" message.
func TestHandWrittenVectors(t *testing.T) {
	valid, err := filepath.Glob(filepath.Join(handWritten(""), "*.hex"))
	if err != nil || len(valid) == 0 {
		t.Fatalf("no hand-written vectors: %v", err)
	}
	for _, path := range valid {
		t.Run(filepath.Base(path), func(t *testing.T) {
			raw, _ := parseHexFile(t, path)
			f, n, err := wire.Decoder{MaxFrameBytes: handWrittenLimit}.Decode(raw)
			if err != nil || f == nil || n != len(raw) {
				t.Fatalf("decode: %v, %d of %d bytes, %v", f, n, len(raw), err)
			}
			if stem := strings.SplitN(filepath.Base(path), ".", 2)[0]; f.Kind().String() != stem {
				t.Fatalf("decoded a %s", f.Kind())
			}
			if enc := wire.Encode(f); !bytes.Equal(enc, raw) {
				t.Fatalf("re-encoded\n got %x\nwant %x", enc, raw)
			}
		})
	}
	invalid, _ := filepath.Glob(filepath.Join(handWritten("invalid"), "*.hex"))
	for _, path := range invalid {
		t.Run("invalid/"+filepath.Base(path), func(t *testing.T) {
			raw, expect := parseHexFile(t, path)
			if expect == "" {
				t.Fatal("no '# expect:' line")
			}
			f, _, err := wire.Decoder{MaxFrameBytes: handWrittenLimit}.Decode(raw)
			if err == nil || err.Error() != expect {
				t.Fatalf("decoded %v, error %v; want %q", f, err, expect)
			}
		})
	}
}

// The consumer vectors decode to the values their comments (and
// docs/protocol.md, section 5.8) state.
func TestConsumerVectorsDecodeToTheirValues(t *testing.T) {
	cases := map[string]wire.Frame{
		"consumer_open.hex": &wire.ConsumerOpen{RequestID: 9, Topic: "jobs", Consumer: "w1", AckWaitMs: 30000,
			MaxDeliver: 5, MaxAckPending: 100, DeadLetter: "dlq", BackoffMs: []uint64{1000, 5000}},
		"consumer_open.position.hex": &wire.ConsumerOpen{RequestID: 1, Topic: "j", Consumer: "c", AckWaitMs: 1,
			MaxAckPending: 1, Start: wire.ConsumerStart{Kind: wire.ConsumerStartPosition, Position: wire.Position{Stream: 7, Seq: 3}}},
		"consumer_ok.hex": &wire.ConsumerOk{RequestID: 9, MemberID: 0x0102},
		"consumer_message.hex": &wire.ConsumerMessage{Position: wire.Position{Stream: 0x0a0b0c0d0e0f1011, Seq: 100},
			Delivery: 2, TimestampMs: 0x0102030405, Payload: []byte("job")},
		"consumer_ack.hex":     &wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpAck},
		"consumer_ack.nak.hex": &wire.ConsumerAck{Position: wire.Position{Stream: 5, Seq: 6}, Op: wire.OpNak, DelayMs: 250},
	}
	for name, want := range cases {
		raw, _ := parseHexFile(t, filepath.Join(handWritten(""), name))
		got, err := wire.DecodePayload(wire.Kind(raw[1]), raw[wire.HeaderLen:])
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s:\n got %+v\nwant %+v", name, got, want)
		}
		if !bytes.Equal(wire.Encode(want), raw) || wire.EncodedLen(want) != len(raw) {
			t.Fatalf("%s: encoding the value gives %x", name, wire.Encode(want))
		}
	}
}

func malformed(t *testing.T, k wire.Kind, payload []byte, reason string) {
	t.Helper()
	f, err := wire.DecodePayload(k, payload)
	var de *wire.DecodeError
	if !errors.As(err, &de) || de.Kind != wire.Malformed || de.Frame != k.String() || de.Reason != reason {
		t.Fatalf("%s %x: decoded %+v, error %v; want malformed: %s", k, payload, f, err, reason)
	}
	if de.Code() != wire.CodeBadFrame {
		t.Fatalf("code %s", de.Code())
	}
}

func payloadOf(f wire.Frame) []byte { return wire.Encode(f)[wire.HeaderLen:] }

// The checks of ConsumerOpen, at the offsets the reference implementation's
// tests use (proto/src/messages/consumer.rs) and a few more.
func TestConsumerOpenIsChecked(t *testing.T) {
	open := wire.ConsumerOpen{RequestID: 1, Topic: "jobs", Consumer: "w", AckWaitMs: 30000, MaxDeliver: 5,
		MaxAckPending: 100, DeadLetter: "jobs.dead", BackoffMs: []uint64{100, 1000}}
	p := payloadOf(&open)
	if len(p) != 8+6+3+8+4+4+1+16+11+4+16 {
		t.Fatalf("payload of %d bytes", len(p))
	}
	at := func(off int, v byte) []byte {
		q := bytes.Clone(p)
		q[off] = v
		return q
	}
	k := wire.KindConsumerOpen
	// start_kind at 8 + 6 + 3 + 16 = 33, start_a at 34, start_b at 42.
	malformed(t, k, at(33, 9), "unknown consumer start kind")
	malformed(t, k, at(41, 1), "unused consumer start field is not 0")
	malformed(t, k, at(49, 1), "unused consumer start field is not 0")
	malformed(t, k, at(33, 2), "consumer start position with stream 0")
	malformed(t, k, at(15, ' '), "consumer name holds a character other than A-Z a-z 0-9 - _ .")
	zeroWait := bytes.Clone(p)
	clear(zeroWait[17:25])
	malformed(t, k, zeroWait, "ack_wait_ms is 0")
	zeroPending := bytes.Clone(p)
	clear(zeroPending[29:33])
	malformed(t, k, zeroPending, "max_ack_pending is 0")

	withStart := func(s wire.ConsumerStart) []byte {
		o := open
		o.Start = s
		return payloadOf(&o)
	}
	// A time start carries its start_b 0; a position's start_b may be anything.
	timeStart := withStart(wire.ConsumerStart{Kind: wire.ConsumerStartTime, TimeMs: 7})
	timeStart[49] = 1
	malformed(t, k, timeStart, "unused consumer start field is not 0")
	if _, err := wire.DecodePayload(k, withStart(wire.ConsumerStart{Kind: wire.ConsumerStartPosition,
		Position: wire.Position{Stream: 1, Seq: 0}})); err != nil {
		t.Fatal(err)
	}

	o := open
	o.DeadLetter = "bad topic"
	malformed(t, k, payloadOf(&o), "invalid dead-letter topic")
	o = open
	o.BackoffMs = make([]uint64, wire.MaxBackoffSteps+1)
	malformed(t, k, payloadOf(&o), "backoff schedule longer than 16 steps")
	o.BackoffMs = o.BackoffMs[:wire.MaxBackoffSteps]
	if _, err := wire.DecodePayload(k, payloadOf(&o)); err != nil {
		t.Fatalf("16 backoff steps: %v", err)
	}
	o = open
	o.Consumer = strings.Repeat("c", 65)
	malformed(t, k, payloadOf(&o), "consumer name longer than 64 bytes")
	o.Consumer = ""
	malformed(t, k, payloadOf(&o), "consumer name is empty")
	o = open
	o.Topic = ""
	malformed(t, k, payloadOf(&o), "topic is empty")
	// A count past what remains is refused before the 16-step rule.
	huge := bytes.Clone(p)
	copy(huge[len(huge)-20:], []byte{0xff, 0xff, 0xff, 0xff})
	malformed(t, k, huge, "element count exceeds remaining bytes")
	malformed(t, k, append(bytes.Clone(p), 0), "trailing bytes after last field")

	// The encoder writes only the field the start kind names.
	stray := open
	stray.Start = wire.ConsumerStart{Kind: wire.ConsumerStartLast, Position: wire.Position{Stream: 3, Seq: 4}, TimeMs: 5}
	f, err := wire.DecodePayload(k, payloadOf(&stray))
	if err != nil || f.(*wire.ConsumerOpen).Start != (wire.ConsumerStart{Kind: wire.ConsumerStartLast}) {
		t.Fatalf("%+v %v", f, err)
	}
}

func TestConsumerMessageAndAckAreChecked(t *testing.T) {
	m := payloadOf(&wire.ConsumerMessage{Position: wire.Position{Stream: 1, Seq: 2}, Delivery: 3, TimestampMs: 4, Payload: []byte("hi")})
	if len(m) != 16+4+8+4+2 {
		t.Fatalf("payload of %d bytes", len(m))
	}
	zero := bytes.Clone(m)
	clear(zero[16:20])
	malformed(t, wire.KindConsumerMessage, zero, "delivery 0")
	malformed(t, wire.KindConsumerMessage, m[:len(m)-1], "byte blob overruns payload")
	if got := payloadOf(&wire.ConsumerOk{RequestID: 1, MemberID: 2}); !bytes.Equal(got, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2}) {
		t.Fatalf("consumer_ok %x", got)
	}
	pos := wire.Position{Stream: 1, Seq: 2}
	for _, a := range []wire.ConsumerAck{
		{Position: pos, Op: wire.OpAck},
		{Position: pos, Op: wire.OpNak, DelayMs: wire.BackoffDelay},
		{Position: pos, Op: wire.OpNak},
		{Position: pos, Op: wire.OpInProgress},
		{Position: pos, Op: wire.OpTerm},
	} {
		f, err := wire.DecodePayload(wire.KindConsumerAck, payloadOf(&a))
		if err != nil || *f.(*wire.ConsumerAck) != a {
			t.Fatalf("%+v: %+v %v", a, f, err)
		}
	}
	// A delay on another op is not encoded, and refused when received.
	stray := wire.ConsumerAck{Position: pos, Op: wire.OpTerm, DelayMs: 5}
	ack := payloadOf(&stray)
	if !bytes.Equal(ack[17:], make([]byte, 8)) {
		t.Fatalf("term encoded with delay %x", ack[17:])
	}
	ack[24] = 1
	malformed(t, wire.KindConsumerAck, ack, "delay_ms set on an op other than nak")
	ack[16] = 7
	malformed(t, wire.KindConsumerAck, ack, "unknown consumer ack op")
	if wire.OpInProgress.String() != "in_progress" || wire.ConsumerAckOp(9).String() != "op(9)" {
		t.Fatal(wire.OpInProgress, wire.ConsumerAckOp(9))
	}
}

// Headers trail the payload as a header list, validated as Publish's; none is
// nothing at all, so a message cut exactly before its list is the same
// delivery without headers, and every other cut is malformed.
func TestConsumerMessageHeaders(t *testing.T) {
	bare := wire.ConsumerMessage{Position: wire.Position{Stream: 1, Seq: 2}, Delivery: 3, TimestampMs: 4, Payload: []byte("hi")}
	with := bare
	with.Headers = []wire.Header{{Name: "a", Value: "b"}}
	m, w := payloadOf(&bare), payloadOf(&with)
	if !bytes.Equal(w[:len(m)], m) || !bytes.Equal(w[len(m):], []byte{0, 0, 0, 1, 0, 1, 'a', 0, 1, 'b'}) {
		t.Fatalf("with headers %x", w)
	}
	if wire.PayloadLen(&with) != len(w) {
		t.Fatalf("PayloadLen %d of %d", wire.PayloadLen(&with), len(w))
	}
	f, err := wire.DecodePayload(wire.KindConsumerMessage, w)
	if err != nil || !reflect.DeepEqual(f, &with) {
		t.Fatalf("%+v %v", f, err)
	}
	noHeaders := bare
	noHeaders.Headers = []wire.Header{}
	if got := payloadOf(&noHeaders); !bytes.Equal(got, m) {
		t.Fatalf("an empty header list encoded: %x", got)
	}
	for end := range len(w) {
		f, err := wire.DecodePayload(wire.KindConsumerMessage, w[:end])
		if end == len(m) {
			if err != nil || !reflect.DeepEqual(f, &bare) {
				t.Fatalf("cut before the headers: %+v %v", f, err)
			}
			continue
		}
		var de *wire.DecodeError
		if !errors.As(err, &de) || de.Kind != wire.Malformed {
			t.Fatalf("cut at %d of %d: decoded %+v, error %v", end, len(w), f, err)
		}
	}
	k := wire.KindConsumerMessage
	malformed(t, k, append(bytes.Clone(w), 0), "trailing bytes after last field")
	malformed(t, k, append(bytes.Clone(m), 0, 0, 0, 0), "header list is empty")
	malformed(t, k, append(bytes.Clone(m), 0, 0, 0, 1, 0, 1, ':', 0, 0), "header name contains a colon")
	malformed(t, k, append(bytes.Clone(m), 0, 0, 0, 1, 0, 0, 0, 0), "header name is empty")
	malformed(t, k, append(bytes.Clone(m), 0, 0, 0, 2, 0, 1, 'a', 0, 0), "element count exceeds remaining bytes")
	id := with
	id.Headers = []wire.Header{{Name: wire.MsgIDHeader, Value: "job-7"}}
	f, err = wire.DecodePayload(k, payloadOf(&id))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := wire.MsgID(f.(*wire.ConsumerMessage).Headers); !ok || got != "job-7" {
		t.Fatal(got, ok)
	}
}

func TestConsumerKindsAndNames(t *testing.T) {
	for k, name := range map[wire.Kind]string{0x70: "consumer_open", 0x71: "consumer_ok", 0x72: "consumer_message", 0x73: "consumer_ack"} {
		if !k.Known() || k.String() != name {
			t.Fatalf("%#x: %v %s", uint8(k), k.Known(), k)
		}
	}
	if wire.Kind(0x74).Known() {
		t.Fatal("0x74 is assigned")
	}
	for name, want := range map[string]string{
		"w1": "", "a.b-c_D9": "", "": "consumer name is empty",
		strings.Repeat("c", 64): "", strings.Repeat("c", 65): "consumer name longer than 64 bytes",
		"a b": "consumer name holds a character other than A-Z a-z 0-9 - _ .",
		"é":   "consumer name holds a character other than A-Z a-z 0-9 - _ .",
	} {
		if got := wire.ValidateConsumer(name); got != want {
			t.Fatalf("ValidateConsumer(%q) = %q, want %q", name, got, want)
		}
	}
	if got := wire.ValidateGroup(strings.Repeat("g", 65)); got != "group name longer than 64 bytes" {
		t.Fatal(got)
	}
	if wire.FeaturesClient&(wire.FeatureConsumers|wire.FeatureDedup) != wire.FeatureConsumers|wire.FeatureDedup {
		t.Fatal("the client does not ask for CONSUMERS and DEDUP")
	}
}

func TestMsgIDIsTheFirstExactHeader(t *testing.T) {
	hs := []wire.Header{{Name: "starling-msg-id", Value: "lower"}, {Name: wire.MsgIDHeader, Value: "a"}, {Name: wire.MsgIDHeader, Value: "b"}}
	if id, ok := wire.MsgID(hs); !ok || id != "a" {
		t.Fatal(id, ok)
	}
	if _, ok := wire.MsgID(hs[:1]); ok {
		t.Fatal("a header name compared without case")
	}
	if wire.ValidateHeaderName(wire.MsgIDHeader) != "" {
		t.Fatal("the msg id header name is invalid")
	}
}
