package starling_test

// The consumer stream and the feature checks of durable consumers and
// publish de-duplication, against a minimal QUIC broker on loopback whose
// streams a test scripts (no STARLING_BROKER_BIN needed).

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
	"starling.invalid/starling/wire"
)

// fakeStream is one stream the fake broker accepted after the handshake,
// with its first frame.
type fakeStream struct {
	st    *quic.Stream
	rd    *wire.Reader
	first wire.Frame
}

func (f *fakeStream) write(t *testing.T, frames ...wire.Frame) {
	t.Helper()
	var buf []byte
	for _, fr := range frames {
		buf = wire.Append(buf, fr)
	}
	if _, err := f.st.Write(buf); err != nil {
		t.Errorf("fake broker write: %v", err)
	}
}

// startFake runs a broker that grants what a Hello asks for except strip,
// and hands every later stream to handle, on a goroutine of its own. It
// returns a client connected to it (DisableClusterRouting, request timeout
// timeout).
func startFake(t *testing.T, strip uint64, timeout time.Duration, handle func(*fakeStream)) *starling.Client {
	t.Helper()
	ca := testbroker.NewCA(t, "fake-ca")
	leaf := ca.Server(t, "localhost")
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := quic.ListenAddr("127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert},
		NextProtos: []string{wire.ALPNEvents, wire.ALPNCache}, MinVersion: tls.VersionTLS13}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	handlers := make(chan struct{}, 64)
	go func() {
		defer close(done)
		for {
			q, err := ln.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				for first := true; ; first = false {
					st, err := q.AcceptStream(ctx)
					if err != nil {
						return
					}
					rd := wire.NewReader(st, 1<<20)
					f, err := rd.ReadFrame()
					if err != nil {
						return
					}
					if h, ok := f.(*wire.Hello); ok {
						if !first {
							return
						}
						_ = wire.WriteFrame(st, &wire.HelloOk{Version: wire.ProtocolVersion,
							Features: h.Features &^ strip, ServerID: "fake", MaxFrameBytes: 1 << 20})
						_ = st.Close()
						continue
					}
					handlers <- struct{}{}
					go func() {
						defer func() { <-handlers }()
						handle(&fakeStream{st: st, rd: rd, first: f})
					}()
				}
			}()
		}
	}()
	trust, err := starling.TrustCAPEM(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	c, err := starling.Connect(ctxT(t), starling.Config{Server: ln.Addr().String(), Trust: trust,
		DisableClusterRouting: true, RequestTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		cancel()
		_ = ln.Close()
		<-done
		for range cap(handlers) {
			handlers <- struct{}{} // every handler returned
		}
	})
	return c
}

// A broker that grants neither CONSUMERS nor DEDUP: Consume and a publish
// with a message id fail with ErrUnsupported and send nothing, while a
// publish with other headers goes through.
func TestConsumeAndMsgIDNeedTheirFeatures(t *testing.T) {
	t.Parallel()
	got := make(chan wire.Frame, 16)
	c := startFake(t, wire.FeatureConsumers|wire.FeatureDedup, 5*time.Second, func(f *fakeStream) {
		for fr := f.first; ; {
			got <- fr
			if p, ok := fr.(*wire.Publish); ok && p.Ack == wire.Ack {
				_ = wire.WriteFrame(f.st, &wire.PublishAck{RequestID: p.RequestID, Count: 1})
			}
			var err error
			if fr, err = f.rd.ReadFrame(); err != nil {
				_ = f.st.Close()
				return
			}
		}
	})
	ctx := ctxT(t)
	if c.ServerInfo().Has(wire.FeatureConsumers) || c.ServerInfo().Has(wire.FeatureDedup) {
		t.Fatalf("the fake broker granted %b", c.ServerInfo().Features)
	}
	if _, err := c.Consume(ctx, "jobs", "workers", starling.ConsumerOptions{}); !errors.Is(err, starling.ErrUnsupported) {
		t.Fatalf("Consume without CONSUMERS: %v, want ErrUnsupported", err)
	}
	m := starling.Message{Payload: []byte("x"), Headers: []starling.Header{{Name: "k", Value: "v"}}}
	if err := c.PublishMessage(ctx, "t", m.WithMsgID("id-1"), true); !errors.Is(err, starling.ErrUnsupported) {
		t.Fatalf("a message id without DEDUP: %v, want ErrUnsupported", err)
	}
	batch := []starling.Message{{Payload: []byte("a")}, starling.Message{Payload: []byte("b")}.WithMsgID("id-2")}
	if err := c.PublishMessages(ctx, "t", batch, false); !errors.Is(err, starling.ErrUnsupported) {
		t.Fatalf("a batch with a message id without DEDUP: %v, want ErrUnsupported", err)
	}
	if err := c.PublishMessage(ctx, "t", m, true); err != nil {
		t.Fatalf("headers without an id: %v", err)
	}
	if f, ok := (<-got).(*wire.Publish); !ok || f.Topic != "t" || len(f.Headers) != 1 {
		t.Fatalf("the fake broker got %+v", f)
	}
	select {
	case f := <-got:
		t.Fatalf("sent without the feature: %+v", f)
	case <-time.After(200 * time.Millisecond):
	}
}

// A message id is one header, replacing an earlier one, and the caller's
// headers are left alone.
func TestWithMsgIDSetsOneHeader(t *testing.T) {
	hs := []starling.Header{{Name: "k", Value: "v"}, {Name: starling.MsgIDHeader, Value: "old"}}
	m := starling.Message{Payload: []byte("x"), Headers: hs}
	withID := m.WithMsgID("a").WithMsgID("b")
	if id, ok := withID.MsgID(); !ok || id != "b" || len(withID.Headers) != 2 || withID.Headers[0] != hs[0] {
		t.Fatalf("%+v", withID.Headers)
	}
	if hs[1].Value != "old" {
		t.Fatal("WithMsgID changed the caller's headers")
	}
	if _, ok := (starling.Message{}).MsgID(); ok {
		t.Fatal("a message without headers has an id")
	}
	e := starling.Event{Headers: withID.Headers}
	if id, ok := e.MsgID(); !ok || id != "b" {
		t.Fatal(id, ok)
	}
	d := starling.Delivery{Headers: withID.Headers}
	if id, ok := d.MsgID(); !ok || id != "b" {
		t.Fatal(id, ok)
	}
	if _, ok := (starling.Delivery{}).MsgID(); ok {
		t.Fatal("a delivery without headers has an id")
	}
}

// fakeHeaders are the headers of the fake broker's second delivery.
var fakeHeaders = []wire.Header{{Name: "traceparent", Value: "00-01"}, {Name: wire.MsgIDHeader, Value: "job-7"}}

// The member's side of the stream: ConsumerOpen as configured, deliveries
// in order with their counts, times and headers, a Ping answered, answers in the
// order given, and Close sending them before the stream's end and waiting
// for the broker's (a delivery sent meanwhile is dropped).
func TestConsumerStreamAgainstAFakeBroker(t *testing.T) {
	t.Parallel()
	type seen struct {
		open    *wire.ConsumerOpen
		answers []wire.Frame
		eof     bool
	}
	result := make(chan seen, 1)
	c := startFake(t, 0, 5*time.Second, func(f *fakeStream) {
		open, _ := f.first.(*wire.ConsumerOpen)
		var s seen
		s.open = open
		defer func() { result <- s }()
		f.write(t, &wire.ConsumerOk{RequestID: open.RequestID, MemberID: 42}, &wire.Ping{Nonce: 7})
		for i := range 3 {
			m := &wire.ConsumerMessage{Position: wire.Position{Stream: 9, Seq: uint64(i)}, Delivery: uint32(i + 1),
				TimestampMs: 1_700_000_000_000 + uint64(i), Payload: []byte{'m', byte('0' + i)}}
			if i == 1 {
				m.Headers = fakeHeaders
			}
			f.write(t, m)
		}
		for {
			fr, err := f.rd.ReadFrame()
			if errors.Is(err, io.EOF) {
				s.eof = true
				// The member left: what comes now is not delivered.
				f.write(t, &wire.ConsumerMessage{Position: wire.Position{Stream: 9, Seq: 99}, Delivery: 1, Payload: []byte("late")})
				_ = f.st.Close()
				return
			}
			if err != nil {
				t.Errorf("fake broker read: %v", err)
				return
			}
			s.answers = append(s.answers, fr)
		}
	})
	ctx := ctxT(t)
	opts := starling.ConsumerOptions{AckWait: time.Second, MaxDeliver: 3, DeadLetter: "jobs.dead",
		Backoff: []time.Duration{time.Second}, Start: starling.ConsumeLast()}
	cons, err := c.Consume(ctx, "jobs", "workers", opts)
	if err != nil {
		t.Fatal(err)
	}
	if cons.MemberID() != 42 || cons.Topic() != "jobs" || cons.Name() != "workers" {
		t.Fatalf("member %d topic %q name %q", cons.MemberID(), cons.Topic(), cons.Name())
	}
	var ds []starling.Delivery
	for range 3 {
		d, err := cons.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	for i, d := range ds {
		if d.Topic != "jobs" || d.Position != (starling.Position{Stream: 9, Seq: uint64(i)}) || d.DeliveryCount != uint32(i+1) ||
			d.Timestamp.UnixMilli() != 1_700_000_000_000+int64(i) || !bytes.Equal(d.Payload, []byte{'m', byte('0' + i)}) {
			t.Fatalf("delivery %d: %+v", i, d)
		}
		var want []starling.Header
		if i == 1 {
			want = fakeHeaders
		}
		if !reflect.DeepEqual(d.Headers, want) {
			t.Fatalf("delivery %d: headers %+v, want %+v", i, d.Headers, want)
		}
	}
	if id, _ := ds[1].MsgID(); id != "job-7" {
		t.Fatalf("delivery 1: id %q", id)
	}
	if v, ok := ds[1].Header("traceparent"); !ok || v != "00-01" {
		t.Fatalf("delivery 1: traceparent %q (%v)", v, ok)
	}
	if err := ds[0].Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[1].Nak(ctx, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := ds[2].InProgress(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ds[2].Term(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cons.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s := <-result
	want := &wire.ConsumerOpen{RequestID: 1, Topic: "jobs", Consumer: "workers", AckWaitMs: 1000, MaxDeliver: 3,
		MaxAckPending: 1000, Start: wire.ConsumerStart{Kind: wire.ConsumerStartLast}, DeadLetter: "jobs.dead", BackoffMs: []uint64{1000}}
	if !bytes.Equal(wire.Encode(s.open), wire.Encode(want)) {
		t.Fatalf("consumer_open %+v, want %+v", s.open, want)
	}
	p := func(seq uint64) wire.Position { return wire.Position{Stream: 9, Seq: seq} }
	wantAnswers := []wire.Frame{&wire.Pong{Nonce: 7}, &wire.ConsumerAck{Position: p(0), Op: wire.OpAck},
		&wire.ConsumerAck{Position: p(1), Op: wire.OpNak, DelayMs: 250}, &wire.ConsumerAck{Position: p(2), Op: wire.OpInProgress},
		&wire.ConsumerAck{Position: p(2), Op: wire.OpTerm}}
	if !s.eof || len(s.answers) != len(wantAnswers) {
		t.Fatalf("the broker read %d frames (end seen: %v): %+v", len(s.answers), s.eof, s.answers)
	}
	for i, w := range wantAnswers {
		if !bytes.Equal(wire.Encode(s.answers[i]), wire.Encode(w)) {
			t.Fatalf("answer %d: %+v, want %+v", i, s.answers[i], w)
		}
	}
	if _, err := cons.Next(ctx); !errors.Is(err, starling.ErrClosed) {
		t.Fatalf("Next after Close: %v", err)
	}
	if err := ds[0].Ack(ctx); !errors.Is(err, starling.ErrClosed) {
		t.Fatalf("an answer after Close: %v", err)
	}
	if err := cons.Close(); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// The broker's refusal of ConsumerOpen is Consume's error, and an Error
// ending the member is Next's (and the answers') error, naming the
// operation and topic.
func TestConsumerRefusalsAndEndsAreServerErrors(t *testing.T) {
	t.Parallel()
	c := startFake(t, 0, 5*time.Second, func(f *fakeStream) {
		open := f.first.(*wire.ConsumerOpen)
		if open.Consumer == "refused" {
			f.write(t, &wire.Error{RequestID: open.RequestID, Code: wire.CodeInvalidRequest, Message: "`jobs` is not a durable topic"})
			_ = f.st.Close()
			return
		}
		f.write(t, &wire.ConsumerOk{RequestID: open.RequestID, MemberID: 1},
			&wire.ConsumerMessage{Position: wire.Position{Stream: 1}, Delivery: 1, Payload: []byte("x")},
			&wire.Error{RequestID: open.RequestID, Code: wire.CodeUnavailable, Message: "the topic moved"})
		_ = f.st.Close()
		_, _ = io.Copy(io.Discard, f.st)
	})
	ctx := ctxT(t)
	_, err := c.Consume(ctx, "jobs", "refused", starling.ConsumerOptions{})
	var se *starling.ServerError
	if !errors.Is(err, starling.ErrInvalidRequest) || !errors.As(err, &se) || se.Op != "consume" || se.Name != "jobs" {
		t.Fatalf("a refused consumer: %v", err)
	}
	cons, err := c.Consume(ctx, "jobs", "ended", starling.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	d, err := cons.Next(ctx)
	if err != nil || string(d.Payload) != "x" {
		t.Fatalf("the delivery before the end: %+v %v", d, err)
	}
	_, err = cons.Next(ctx)
	if !errors.Is(err, starling.ErrUnavailable) || !errors.As(err, &se) || se.Op != "consume" {
		t.Fatalf("the member's end: %v", err)
	}
	if !errors.Is(cons.Err(), starling.ErrUnavailable) {
		t.Fatalf("Err: %v", cons.Err())
	}
	if err := d.Ack(ctx); !errors.Is(err, starling.ErrUnavailable) {
		t.Fatalf("an answer after the end: %v", err)
	}
	for _, err := range cons.All(ctx) {
		if !errors.Is(err, starling.ErrUnavailable) {
			t.Fatalf("All after the end: %v", err)
		}
	}
}

// A broker that never ends its side: Close gives up after the request
// timeout and says so; a Consumer left open ends with its Client.
func TestConsumerCloseIsBounded(t *testing.T) {
	t.Parallel()
	c := startFake(t, 0, 300*time.Millisecond, func(f *fakeStream) {
		open := f.first.(*wire.ConsumerOpen)
		f.write(t, &wire.ConsumerOk{RequestID: open.RequestID, MemberID: 1})
		_, _ = io.Copy(io.Discard, f.st) // reads to the member's end, never finishes
		<-f.st.Context().Done()
	})
	ctx := ctxT(t)
	cons, err := c.Consume(ctx, "jobs", "stuck", starling.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cons.Close(); !errors.Is(err, starling.ErrClosed) {
		t.Fatalf("Close against a broker that never ends the stream: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("Close took %s", d)
	}
	open, err := c.Consume(ctx, "jobs", "left-open", starling.ConsumerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		_, err := open.Next(context.Background())
		waited <- err
	}()
	_ = c.Close()
	select {
	case err := <-waited:
		if err == nil {
			t.Fatal("Next returned a delivery")
		}
	case <-time.After(testbroker.Soon):
		t.Fatal("Next still waits after the client closed")
	}
	if _, err := c.Consume(ctx, "jobs", "late", starling.ConsumerOptions{}); !errors.Is(err, starling.ErrClosed) {
		t.Fatalf("Consume after Close: %v", err)
	}
}
