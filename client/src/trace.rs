//! Trace context on messages: the caller's OpenTelemetry context goes into the headers of what
//! it publishes, and comes back out of what it receives, through the process's global
//! text-map propagator (`opentelemetry::global::set_text_map_propagator`; for W3C trace
//! context, `traceparent` and `tracestate`, the SDK's `TraceContextPropagator`).
//!
//! Injected ([`inject_current`]) only when the current context has a valid span, the broker
//! grants `HEADERS`, and the message carries none of the propagator's fields already (a
//! caller's own `traceparent`, or a message passed on, keeps its own). The default global
//! propagator writes nothing, so an application that set up no propagation sends no extra
//! headers. Extraction ([`context_of`]) gives the context a consumer starts its span under
//! (`Event::trace_context`, `Delivery::trace_context`).
//!
//! Uses the OpenTelemetry API crate rather than its own `traceparent` parser: the propagator
//! is what the application configured (W3C, B3, Jaeger, or a composite), and the format is
//! written and read in one place, the propagator's.

use opentelemetry::propagation::{Extractor, Injector};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::{Context, global};
use starling_proto::Header;

/// Headers as the propagator writes them: a field it sets replaces one of the same name.
struct Inject<'a>(&'a mut Vec<Header>);

impl Injector for Inject<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.retain(|h| !h.name.eq_ignore_ascii_case(key));
        self.0.push(Header::new(key, value));
    }
}

/// Headers as the propagator reads them (names compared without case; the first of a
/// repeated name).
struct Extract<'a>(&'a [Header]);

impl Extractor for Extract<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(key))
            .map(|h| h.value.as_str())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().map(|h| h.name.as_str()).collect()
    }
}

/// Adds the current context's trace fields to `headers` (see the module doc); `headers_granted`:
/// whether the broker takes headers at all.
pub(crate) fn inject_current(headers: &mut Vec<Header>, headers_granted: bool) {
    if !headers_granted {
        return;
    }
    // Looked at in place (no copy of the context) on the path every publish takes.
    if Context::map_current(|cx| cx.span().span_context().is_valid()) {
        inject(&Context::current(), headers);
    }
}

/// Adds `cx`'s trace fields to `headers` unless they carry one of the propagator's fields.
pub(crate) fn inject(cx: &Context, headers: &mut Vec<Header>) {
    global::get_text_map_propagator(|p| {
        let has_own = p
            .fields()
            .any(|f| headers.iter().any(|h| h.name.eq_ignore_ascii_case(f)));
        if !has_own {
            p.inject_context(cx, &mut Inject(headers));
        }
    });
}

/// The context the trace fields among `headers` describe (a remote parent), or an empty one.
pub fn context_of(headers: &[Header]) -> Context {
    global::get_text_map_propagator(|p| p.extract(&Extract(headers)))
}
