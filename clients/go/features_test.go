package starling_test

// Integration tests of the features a single broker grants beyond the base
// set: wildcard subscriptions, message headers and request/reply, against
// the real broker (skipped when STARLING_BROKER_BIN is unset).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
	"starling.invalid/starling/wire"
)

func TestWildcardSubscriptions(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	one, err := c.Subscribe(ctx, "orders.*", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	all, err := c.Subscribe(ctx, "orders.>", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer all.Close()
	if !one.IsWildcard() || !all.IsWildcard() {
		t.Fatal("a pattern subscription does not say it is one")
	}
	sent := []struct{ topic, payload string }{
		{"orders.eu", "eu-1"}, {"orders.us", "us-1"}, {"orders.eu.west", "west-1"},
		{"billing.eu", "not matched"}, {"orders.eu", "eu-2"},
	}
	for _, m := range sent {
		if err := c.PublishAcked(ctx, m.topic, []byte(m.payload)); err != nil {
			t.Fatal(err)
		}
	}
	// Batches of different topics interleave; each topic keeps its order.
	expect := func(sub *starling.Subscription, want ...string) {
		t.Helper()
		wantBy, gotBy := map[string][]string{}, map[string][]string{}
		for _, w := range want {
			topic, payload, _ := strings.Cut(w, "=")
			wantBy[topic] = append(wantBy[topic], payload)
		}
		perTopic := map[string]uint64{}
		for range want {
			e := next(t, sub)
			gotBy[e.Topic] = append(gotBy[e.Topic], string(e.Payload))
			if seen, ok := perTopic[e.Topic]; ok && e.Seq != seen+1 {
				t.Fatalf("%s: %s numbered %d after %d", sub.Topic(), e.Topic, e.Seq, seen)
			}
			perTopic[e.Topic] = e.Seq
		}
		if fmt.Sprint(gotBy) != fmt.Sprint(wantBy) {
			t.Fatalf("%s: got %v, want %v", sub.Topic(), gotBy, wantBy)
		}
		if (sub.ResumePoint() != starling.Position{}) {
			t.Fatalf("a wildcard subscription has a resume point %+v", sub.ResumePoint())
		}
	}
	expect(one, "orders.eu=eu-1", "orders.us=us-1", "orders.eu=eu-2")
	expect(all, "orders.eu=eu-1", "orders.us=us-1", "orders.eu.west=west-1", "orders.eu=eu-2")

	if _, err := c.Subscribe(ctx, "orders.*", starling.FromTime(time.Unix(0, 0))); !errors.Is(err, starling.ErrInvalidTopic) {
		t.Fatalf("a pattern from a time: %v, want ErrInvalidTopic", err)
	}
	if _, err := c.Subscribe(ctx, "orders.>.x", starling.Live()); !errors.Is(err, starling.ErrInvalidRequest) {
		t.Fatalf("a pattern that does not parse: %v, want ErrInvalidRequest", err)
	}
	if _, err := c.Subscribe(ctx, "secret.*", starling.Live()); !errors.Is(err, starling.ErrForbidden) {
		t.Fatalf("a pattern reaching a denied topic: %v, want ErrForbidden", err)
	}
}

func TestHeadersOnPublishAndDelivery(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	if !c.ServerInfo().Has(wire.FeatureHeaders) {
		t.Fatalf("the broker did not grant HEADERS: %+v", c.ServerInfo())
	}
	sub, err := c.Subscribe(ctx, "hdr.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	trace := []starling.Header{{Name: "traceparent", Value: "00-ab"}, {Name: "empty", Value: ""}}
	if err := c.PublishMessage(ctx, "hdr.t", starling.Message{Payload: []byte("one"), Headers: trace}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "hdr.t", []byte("plain")); err != nil {
		t.Fatal(err)
	}
	batch := []starling.Message{
		{Payload: []byte("b0")},
		{Payload: []byte("b1"), Headers: []starling.Header{{Name: "k", Value: "v1"}}},
		{Payload: []byte("b2")},
		{Payload: []byte("b3"), Headers: []starling.Header{{Name: "k", Value: "v3"}, {Name: "x", Value: "y"}}},
	}
	if err := c.PublishMessages(ctx, "hdr.t", batch, true); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishMessage(ctx, "hdr.t", starling.Message{Payload: []byte("fire"), Headers: trace[:1]}, false); err != nil {
		t.Fatal(err)
	}
	want := []starling.Message{{Payload: []byte("one"), Headers: trace}, {Payload: []byte("plain")}}
	want = append(want, batch...)
	want = append(want, starling.Message{Payload: []byte("fire"), Headers: trace[:1]})
	for i, w := range want {
		e := next(t, sub)
		if !bytes.Equal(e.Payload, w.Payload) || fmt.Sprint(e.Headers) != fmt.Sprint(w.Headers) {
			t.Fatalf("event %d: %q %v, want %q %v", i, e.Payload, e.Headers, w.Payload, w.Headers)
		}
	}
	bad := starling.Message{Payload: []byte("x"), Headers: []starling.Header{{Name: "a b", Value: "1"}}}
	if err := c.PublishMessage(ctx, "hdr.t", bad, true); !errors.Is(err, starling.ErrInvalidHeader) {
		t.Fatalf("a header name with a space: %v, want ErrInvalidHeader", err)
	}
}

func TestRequestReply(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	requester := s.connect(t, starling.TokenCredentials(appToken))
	responder := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)

	if _, err := requester.Request(ctx, "svc.echo", []byte("anyone?")); !errors.Is(err, starling.ErrNoResponders) {
		t.Fatalf("a request nobody subscribes to: %v, want ErrNoResponders", err)
	}
	// docs/protocol.md 5.2: a one-message PublishBatch carrying reply-to is
	// a request too, acked or not; a batch of several is not checked.
	inbox := []starling.Header{{Name: starling.ReplyToHeader, Value: "_INBOX.0123456789abcdef0123456789abcdef.1"}}
	one := []starling.Message{{Payload: []byte("x"), Headers: inbox}}
	if err := requester.PublishMessages(ctx, "svc.none", one, true); !errors.Is(err, starling.ErrNoResponders) {
		t.Fatalf("a one-message batch request nobody subscribes to: %v, want ErrNoResponders", err)
	}
	if err := requester.PublishMessages(ctx, "svc.none", append(one, one...), true); err != nil {
		t.Fatalf("a two-message batch carrying reply-to: %v, want it published", err)
	}
	rctx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() {
		served <- responder.Respond(rctx, "svc.*", func(_ context.Context, req starling.Event) (starling.Message, error) {
			if string(req.Payload) == "ignore" {
				return starling.Message{}, errors.New("not answered")
			}
			tag, _ := req.Header("tag")
			return starling.Message{Payload: append([]byte(req.Topic+":"), bytes.ToUpper(req.Payload)...),
				Headers: []starling.Header{{Name: "tag", Value: tag}}}, nil
		})
	}()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Errorf("Respond: %v", err)
		}
	}()
	// The responder's subscription is registered once a request finds it.
	var reply starling.Message
	deadline := time.Now().Add(testbroker.Soon)
	for {
		var err error
		reply, err = requester.RequestMessage(ctx, "svc.echo", starling.Message{Payload: []byte("ping"),
			Headers: []starling.Header{{Name: "tag", Value: "t1"}}})
		if err == nil {
			break
		}
		if !errors.Is(err, starling.ErrNoResponders) || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if tag, _ := reply.Header("tag"); string(reply.Payload) != "svc.echo:PING" || tag != "t1" {
		t.Fatalf("reply %q %v", reply.Payload, reply.Headers)
	}
	// Many requests at once, each answered with its own reply.
	errs := make(chan error, 20)
	for i := range 20 {
		go func() {
			p := fmt.Sprintf("r%d", i)
			r, err := requester.Request(ctx, "svc.many", []byte(p))
			if err == nil && string(r.Payload) != "svc.many:"+string(bytes.ToUpper([]byte(p))) {
				err = fmt.Errorf("request %s answered %q", p, r.Payload)
			}
			errs <- err
		}()
	}
	for range 20 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := requester.Request(short, "svc.echo", []byte("ignore")); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("an unanswered request: %v, want context.DeadlineExceeded", err)
	}
	if err := responder.Reply(ctx, starling.Event{Topic: "svc.echo", Payload: []byte("x")}, nil); !errors.Is(err, starling.ErrNotARequest) {
		t.Fatalf("replying to a plain event: %v, want ErrNotARequest", err)
	}
}
