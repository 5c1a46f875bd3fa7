package starling

import (
	"context"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"starling.invalid/starling/wire"
)

// Zero options are the Rust SDK's ConsumerConfig defaults, so a Go member
// and a Rust member (the CLI's `starling consume`) of one consumer agree.
func TestConsumerOptionsDefaultsAreTheRustSDKs(t *testing.T) {
	f, err := ConsumerOptions{}.frame("jobs", "workers")
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.ConsumerOpen{RequestID: 1, Topic: "jobs", Consumer: "workers", AckWaitMs: 30000,
		MaxAckPending: 1000, Start: wire.ConsumerStart{Kind: wire.ConsumerStartFirst}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("%+v, want %+v", f, want)
	}
}

func TestConsumerOptionsMapToTheFrame(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_123)
	f, err := ConsumerOptions{AckWait: 1500 * time.Microsecond, MaxDeliver: 5, MaxAckPending: 7,
		Backoff: []time.Duration{0, 250 * time.Millisecond, time.Minute}, DeadLetter: "jobs.dead",
		Start: ConsumeFromTime(at)}.frame("jobs", "w-1.a_b")
	if err != nil {
		t.Fatal(err)
	}
	want := &wire.ConsumerOpen{RequestID: 1, Topic: "jobs", Consumer: "w-1.a_b", AckWaitMs: 1, MaxDeliver: 5,
		MaxAckPending: 7, Start: wire.ConsumerStart{Kind: wire.ConsumerStartTime, TimeMs: 1_700_000_000_123},
		DeadLetter: "jobs.dead", BackoffMs: []uint64{0, 250, 60000}}
	if !reflect.DeepEqual(f, want) {
		t.Fatalf("%+v, want %+v", f, want)
	}
	// Under a millisecond is still a wait: 1 ms, never the malformed 0.
	if f, _ := (ConsumerOptions{AckWait: time.Microsecond}).frame("t", "c"); f.AckWaitMs != 1 {
		t.Fatalf("ack wait %d ms", f.AckWaitMs)
	}
	for start, want := range map[string]wire.ConsumerStart{
		"first":      ConsumeFirst(),
		"last":       ConsumeLast(),
		"position":   ConsumeFromPosition(Position{Stream: 7, Seq: 3}),
		"zero":       ConsumeFromPosition(Position{}),
		"before1970": ConsumeFromTime(time.Unix(-5, 0)),
	} {
		f, err := ConsumerOptions{Start: want}.frame("t", "c")
		if err != nil {
			t.Fatalf("%s: %v", start, err)
		}
		back, err := wire.DecodePayload(wire.KindConsumerOpen, wire.Encode(f)[wire.HeaderLen:])
		if err != nil || back.(*wire.ConsumerOpen).Start != want {
			t.Fatalf("%s: %+v %v", start, back, err)
		}
	}
	if ConsumeFromPosition(Position{}).Kind != wire.ConsumerStartFirst || ConsumeFromTime(time.Unix(-5, 0)).TimeMs != 0 {
		t.Fatal("a zero position or a time before 1970")
	}
}

func TestConsumerOptionsAreCheckedBeforeSending(t *testing.T) {
	for name, o := range map[string]ConsumerOptions{
		"negative ack wait":      {AckWait: -time.Second},
		"negative max deliver":   {MaxDeliver: -1},
		"max deliver too large":  {MaxDeliver: math.MaxUint32 + 1},
		"negative ack pending":   {MaxAckPending: -1},
		"ack pending too large":  {MaxAckPending: math.MaxUint32 + 1},
		"17 backoff steps":       {Backoff: make([]time.Duration, 17)},
		"negative backoff":       {Backoff: []time.Duration{-1}},
		"bad dead letter":        {DeadLetter: "two words"},
		"own topic dead letter":  {DeadLetter: "jobs"},
		"position with stream 0": {Start: wire.ConsumerStart{Kind: wire.ConsumerStartPosition, Position: Position{Seq: 4}}},
		"unknown start kind":     {Start: wire.ConsumerStart{Kind: 9}},
	} {
		if _, err := o.frame("jobs", "workers"); !errors.Is(err, ErrInvalidConsumer) {
			t.Errorf("%s: %v, want ErrInvalidConsumer", name, err)
		}
	}
	if _, err := (ConsumerOptions{Backoff: make([]time.Duration, 16)}).frame("jobs", "w"); err != nil {
		t.Fatalf("16 backoff steps: %v", err)
	}
	for _, name := range []string{"", "two words", "a/b", "é", strings.Repeat("c", 65)} {
		if _, err := (ConsumerOptions{}).frame("jobs", name); !errors.Is(err, ErrInvalidConsumer) {
			t.Errorf("name %q: %v, want ErrInvalidConsumer", name, err)
		}
	}
	if ValidateConsumer(strings.Repeat("c", 64)) != nil {
		t.Fatal("a 64-byte name is valid")
	}
}

func TestDeliveryAnswersMapToTheFrame(t *testing.T) {
	m := &Consumer{closing: make(chan struct{}), ended: make(chan struct{}), wake: make(chan struct{}, 1)}
	d := Delivery{Position: Position{Stream: 5, Seq: 6}, consumer: m}
	ctx := t.Context()
	for _, answer := range []func() error{
		func() error { return d.Ack(ctx) },
		func() error { return d.Nak(ctx, 250*time.Millisecond) },
		func() error { return d.Nak(ctx, 0) },
		func() error { return d.Nak(ctx, NakBackoff) },
		func() error { return d.Nak(ctx, -time.Hour) },
		func() error { return d.InProgress(ctx) },
		func() error { return d.Term(ctx) },
	} {
		if err := answer(); err != nil {
			t.Fatal(err)
		}
	}
	var got []wire.ConsumerAck
	rd := wire.Decoder{MaxFrameBytes: 1 << 10}
	for rest := m.take(false); len(rest) > 0; {
		f, n, err := rd.Decode(rest)
		if err != nil || f == nil {
			t.Fatal(f, err)
		}
		got = append(got, *f.(*wire.ConsumerAck))
		rest = rest[n:]
	}
	p := d.Position
	want := []wire.ConsumerAck{{Position: p, Op: wire.OpAck}, {Position: p, Op: wire.OpNak, DelayMs: 250},
		{Position: p, Op: wire.OpNak}, {Position: p, Op: wire.OpNak, DelayMs: wire.BackoffDelay},
		{Position: p, Op: wire.OpNak, DelayMs: wire.BackoffDelay}, {Position: p, Op: wire.OpInProgress},
		{Position: p, Op: wire.OpTerm}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v\nwant %+v", got, want)
	}
	if err := (Delivery{}).Ack(ctx); !errors.Is(err, ErrClosed) {
		t.Fatalf("a zero Delivery's ack: %v", err)
	}
}

// The answers a Consumer holds are bounded: past consumerPendingBytes an
// answer waits for the writer (here: for ever, so until its context ends).
func TestConsumerAnswersAreBounded(t *testing.T) {
	m := &Consumer{closing: make(chan struct{}), ended: make(chan struct{}), wake: make(chan struct{}, 1)}
	d := Delivery{Position: Position{Stream: 1}, consumer: m}
	n := 0
	for ; n < 10*consumerPendingBytes; n++ {
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		err := d.Ack(ctx)
		cancel()
		if err != nil {
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatal(err)
			}
			break
		}
	}
	if size := len(m.wbuf); size < consumerPendingBytes || size > consumerPendingBytes+64 {
		t.Fatalf("%d answers held in %d bytes", n, size)
	}
	m.take(false)
	if err := d.Ack(t.Context()); err != nil {
		t.Fatalf("after the writer took them: %v", err)
	}
	close(m.closing)
	m.closed.Store(true)
	if err := d.Ack(t.Context()); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}
