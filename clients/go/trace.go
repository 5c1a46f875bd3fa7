package starling

// Trace context on messages: the OpenTelemetry span context in a publish's
// ctx goes into the message's headers, and comes back out of a received
// event's, through the process's global text-map propagator
// (otel.SetTextMapPropagator; for W3C trace context, traceparent and
// tracestate, propagation.TraceContext{}).
//
// It is injected only when ctx holds a valid span context, the broker grants
// HEADERS, and the message carries none of the propagator's fields already (a
// caller's own traceparent, or a message passed on, keeps its own). The
// default global propagator writes nothing, so an application that set up no
// propagation sends no extra headers. The format is the propagator's, written
// and read in one place, rather than a parser of this package's own.

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"starling.invalid/starling/wire"
)

// headerCarrier is a message's headers as the propagator reads and writes
// them: names compared without case, a field it sets replacing one of the
// same name, the first of a repeated name read.
type headerCarrier struct{ hs *[]Header }

var _ propagation.TextMapCarrier = headerCarrier{}

func (c headerCarrier) Get(key string) string {
	for _, h := range *c.hs {
		if strings.EqualFold(h.Name, key) {
			return h.Value
		}
	}
	return ""
}

func (c headerCarrier) Set(key, value string) {
	kept := (*c.hs)[:0]
	for _, h := range *c.hs {
		if !strings.EqualFold(h.Name, key) {
			kept = append(kept, h)
		}
	}
	*c.hs = append(kept, Header{Name: key, Value: value})
}

func (c headerCarrier) Keys() []string {
	keys := make([]string, 0, len(*c.hs))
	for _, h := range *c.hs {
		keys = append(keys, h.Name)
	}
	return keys
}

// withTrace returns hs with ctx's trace fields added (see the file comment),
// or hs itself when there is nothing to add; hs is never modified.
func withTrace(ctx context.Context, hs []Header) []Header {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return hs
	}
	p := otel.GetTextMapPropagator()
	for _, f := range p.Fields() {
		for _, h := range hs {
			if strings.EqualFold(h.Name, f) {
				return hs
			}
		}
	}
	out := append(make([]Header, 0, len(hs)+2), hs...)
	p.Inject(ctx, headerCarrier{&out})
	return out
}

// withTraceEach returns the header lists of n messages (hs, by index) with
// ctx's trace fields added to each message's (withTrace), or hs itself when
// ctx holds no valid span context.
func withTraceEach(ctx context.Context, n int, hs []wire.IndexedHeaders) []wire.IndexedHeaders {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return hs
	}
	out := make([]wire.IndexedHeaders, 0, n)
	next := 0
	for i := 0; i < n; i++ {
		var own []Header
		if next < len(hs) && int(hs[next].Index) == i {
			own = hs[next].Headers
			next++
		}
		if traced := withTrace(ctx, own); len(traced) > 0 {
			out = append(out, wire.IndexedHeaders{Index: uint32(i), Headers: traced})
		}
	}
	return out
}

// traceContext returns ctx with the trace context among hs (a remote span
// context, which a span started from it takes as its parent).
func traceContext(ctx context.Context, hs []Header) context.Context {
	return otel.GetTextMapPropagator().Extract(ctx, headerCarrier{&hs})
}

// TraceContext returns ctx with the trace context e's publisher sent (its
// traceparent and tracestate, read by the global text-map propagator), so
// the span that handles e is its child:
// tracer.Start(e.TraceContext(ctx), "handle"). ctx unchanged when e carries
// none.
func (e Event) TraceContext(ctx context.Context) context.Context {
	return traceContext(ctx, e.Headers)
}

// TraceContext returns ctx with the trace context d's publisher sent, as
// Event.TraceContext does.
func (d Delivery) TraceContext(ctx context.Context) context.Context {
	return traceContext(ctx, d.Headers)
}

// WithTraceContext returns a copy of m with the trace fields of ctx's span
// context added (what the global propagator writes), unless m has them
// already. PublishMessage adds its own ctx's by itself; this is for a
// context other than the publish's.
func (m Message) WithTraceContext(ctx context.Context) Message {
	m.Headers = withTrace(ctx, m.Headers)
	return m
}
