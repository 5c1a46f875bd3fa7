//! Trace context through a real broker: a publish made under an OpenTelemetry span carries
//! its context (the W3C propagator's `traceparent`) to the subscriber, which gets it back as
//! a remote parent; a publish without a span, or with its own `traceparent`, gets nothing
//! added; a message can carry another context explicitly.

use opentelemetry::Context;
use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use starling_client::{Client, Message, Subscription};
use starling_testkit::broker::{SOON, pinned_config, start_broker};

const TRACE: u128 = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736;
const SPAN: u64 = 0x00f0_67aa_0ba9_02b7;
const WANT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OWN: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn remote(trace: u128, span: u64) -> Context {
    Context::new().with_remote_span_context(SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        TraceFlags::SAMPLED,
        true,
        TraceState::default(),
    ))
}

async fn next(sub: &mut Subscription) -> starling_client::Event {
    match tokio::time::timeout(SOON, sub.next_event()).await {
        Ok(Some(Ok(e))) => e,
        other => panic!("expected an event, got {other:?}"),
    }
}

fn traceparent(e: &starling_client::Event) -> Option<&str> {
    e.headers
        .iter()
        .find(|h| h.name == "traceparent")
        .map(|h| h.value.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_publishers_trace_context_reaches_the_subscriber() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let broker = start_broker().await;
    let client = Client::connect(pinned_config(&broker))
        .await
        .expect("connect");
    let mut sub = client.subscribe("trace.orders").await.expect("subscribe");
    let cx = remote(TRACE, SPAN);

    // The context is the caller's at the call (a guard held across the await is on this
    // test's thread: the main future of a tokio test is not moved).
    {
        let _in_span = cx.clone().attach();
        client
            .publish_acked("trace.orders", "traced")
            .await
            .expect("publish under a span");
        client
            .publish_message(
                "trace.orders",
                Message::new("own").header("traceparent", OWN),
                true,
            )
            .await
            .expect("publish with its own traceparent");
    }
    client
        .publish_acked("trace.orders", "untraced")
        .await
        .expect("publish without a span");
    client
        .publish_message(
            "trace.orders",
            Message::new("explicit").with_trace_context(&remote(7, 9)),
            true,
        )
        .await
        .expect("publish with an explicit context");

    let traced = next(&mut sub).await;
    assert_eq!(&traced.payload[..], b"traced");
    assert_eq!(traceparent(&traced), Some(WANT), "{:?}", traced.headers);
    let parent = traced.trace_context();
    let sc = parent.span().span_context().clone();
    assert_eq!(sc.trace_id(), TraceId::from(TRACE));
    assert_eq!(sc.span_id(), SpanId::from(SPAN));
    assert!(sc.is_remote() && sc.is_sampled());

    let own = next(&mut sub).await;
    assert_eq!(
        own.headers
            .iter()
            .filter(|h| h.name == "traceparent")
            .map(|h| h.value.as_str())
            .collect::<Vec<_>>(),
        vec![OWN],
        "a message's own traceparent is kept, alone"
    );

    let untraced = next(&mut sub).await;
    assert!(untraced.headers.is_empty(), "{:?}", untraced.headers);
    assert!(!untraced.trace_context().span().span_context().is_valid());

    let explicit = next(&mut sub).await;
    assert_eq!(
        traceparent(&explicit),
        Some("00-00000000000000000000000000000007-0000000000000009-01")
    );
    client.close().await;
}
