package starling_test

import (
	"bytes"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"starling.invalid/starling"
)

// A publish under a span carries its trace context (the W3C propagator's
// traceparent) to the subscriber, which starts from it as a remote parent;
// a publish without one, or with its own traceparent, gets nothing added.
func TestTraceContextTravelsWithMessages(t *testing.T) {
	t.Parallel()
	otel.SetTextMapPropagator(propagation.TraceContext{})
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "trace.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	traced := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true,
	}))
	const want = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	const own = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

	if err := c.PublishAcked(traced, "trace.t", []byte("traced")); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishAcked(ctx, "trace.t", []byte("untraced")); err != nil {
		t.Fatal(err)
	}
	mine := starling.Message{Payload: []byte("own"), Headers: []starling.Header{{Name: "traceparent", Value: own}}}
	if err := c.PublishMessage(traced, "trace.t", mine, true); err != nil {
		t.Fatal(err)
	}
	batch := []starling.Message{{Payload: []byte("b0")}, {Payload: []byte("b1"), Headers: []starling.Header{{Name: "k", Value: "v"}}}}
	if err := c.PublishMessages(traced, "trace.t", batch, true); err != nil {
		t.Fatal(err)
	}
	explicit := starling.Message{Payload: []byte("explicit")}.WithTraceContext(traced)
	if err := c.PublishMessage(ctx, "trace.t", explicit, true); err != nil {
		t.Fatal(err)
	}
	if len(mine.Headers) != 1 || len(batch[0].Headers) != 0 {
		t.Fatalf("the caller's messages were modified: %v %v", mine.Headers, batch[0].Headers)
	}

	wantTrace := map[string]string{"traced": want, "untraced": "", "own": own, "b0": want, "b1": want, "explicit": want}
	for i := 0; i < len(wantTrace); i++ {
		e := next(t, sub)
		w, ok := wantTrace[string(e.Payload)]
		if !ok {
			t.Fatalf("unexpected event %q", e.Payload)
		}
		got, _ := e.Header("traceparent")
		if got != w {
			t.Fatalf("%q: traceparent %q, want %q (headers %v)", e.Payload, got, w, e.Headers)
		}
		if bytes.Equal(e.Payload, []byte("b1")) {
			if v, _ := e.Header("k"); v != "v" {
				t.Fatalf("b1 lost its own header: %v", e.Headers)
			}
		}
		sc := trace.SpanContextFromContext(e.TraceContext(ctx))
		switch w {
		case "":
			if sc.IsValid() {
				t.Fatalf("%q: a trace context from nothing: %v", e.Payload, sc)
			}
		case want:
			if sc.TraceID() != tid || sc.SpanID() != sid || !sc.IsRemote() || !sc.IsSampled() {
				t.Fatalf("%q: extracted %v, want trace %v span %v, remote and sampled", e.Payload, sc, tid, sid)
			}
		}
	}
}
