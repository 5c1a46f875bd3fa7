package starling_test

// Integration tests of durable consumers (docs/consumers.md) and publish
// de-duplication against the real broker (skipped when STARLING_BROKER_BIN
// is unset): topics under jobs. are durable (durable_topics, as the Rust
// tests and the CLI's users configure it), with ack_level persisted.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
	"starling.invalid/starling/wire"
)

// durableBroker is a broker whose jobs.> and secret.jobs topics are durable.
type durableBroker struct {
	single
	port int
}

func startDurable(t *testing.T) *durableBroker {
	t.Helper()
	testbroker.Bin(t)
	setup := testbroker.NewSetup(t, usersDoc())
	setup.Extra = fmt.Sprintf("durable_topics: [\"jobs.>\", \"secret.jobs\"]\nstorage_dir: %q\nstorage_fsync: always\nack_level: persisted\n",
		filepath.Join(setup.Dir, "data"))
	port := testbroker.FreePort(t)
	return &durableBroker{single: single{setup: setup, broker: setup.Start(t, testbroker.Options{Port: port})}, port: port}
}

// restart stops the broker (SIGTERM) and starts it again on the same port
// and data directory.
func (d *durableBroker) restart(t *testing.T) {
	t.Helper()
	d.broker.Stop()
	d.broker = d.setup.Start(t, testbroker.Options{Port: d.port})
}

// metric sums every series of the broker's metric name.
func metric(t *testing.T, b *testbroker.Broker, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + b.HTTP + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

func consume(t *testing.T, c *starling.Client, topic, name string, opts starling.ConsumerOptions) *starling.Consumer {
	t.Helper()
	cons, err := c.Consume(ctxT(t), topic, name, opts)
	if err != nil {
		t.Fatalf("consume %s %s: %v", topic, name, err)
	}
	t.Cleanup(func() { _ = cons.Close() })
	return cons
}

func nextDelivery(t *testing.T, cons *starling.Consumer) starling.Delivery {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	d, err := cons.Next(ctx)
	if err != nil {
		t.Fatalf("next delivery: %v", err)
	}
	return d
}

// noDelivery checks that nothing is delivered within d.
func noDelivery(t *testing.T, cons *starling.Consumer, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	if got, err := cons.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("delivered %q (count %d, err %v), want nothing within %s", got.Payload, got.DeliveryCount, err, d)
	}
}

func publishJobs(t *testing.T, c *starling.Client, topic string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := c.PublishAcked(ctxT(t), topic, fmt.Appendf(nil, "job-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
}

// A consumer receives what was published, in order; a second member of the
// same name continues after what was acked (the rest redelivered), and so
// does one after a broker restart.
func TestConsumerReceivesAndResumesAfterItsAcks(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	if !c.ServerInfo().Has(wire.FeatureConsumers) {
		t.Fatalf("the broker did not grant CONSUMERS: %+v", c.ServerInfo())
	}
	began := time.Now().Add(-time.Minute)
	publishJobs(t, c, "jobs.a", 0, 10)
	first := consume(t, c, "jobs.a", "workers", starling.ConsumerOptions{})
	var ds []starling.Delivery
	for i := range 10 {
		d := nextDelivery(t, first)
		if string(d.Payload) != fmt.Sprintf("job-%d", i) || d.DeliveryCount != 1 || d.Topic != "jobs.a" {
			t.Fatalf("delivery %d: %q count %d topic %q", i, d.Payload, d.DeliveryCount, d.Topic)
		}
		if d.Timestamp.Before(began) || d.Timestamp.After(time.Now().Add(time.Minute)) {
			t.Fatalf("delivery %d stamped %s", i, d.Timestamp)
		}
		if i > 0 && d.Position.Seq != ds[i-1].Position.Seq+1 {
			t.Fatalf("delivery %d at %+v after %+v", i, d.Position, ds[i-1].Position)
		}
		ds = append(ds, d)
	}
	for _, d := range ds[:4] {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	second := consume(t, c, "jobs.a", "workers", starling.ConsumerOptions{})
	got := map[string]uint32{}
	for range 6 {
		d := nextDelivery(t, second)
		got[string(d.Payload)] = d.DeliveryCount
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 10 {
		count, ok := got[fmt.Sprintf("job-%d", i)]
		if ok != (i >= 4) || ok && count != 2 {
			t.Fatalf("the second member got %v: job-%d acked by the first member, or not redelivered", got, i)
		}
	}
	publishJobs(t, c, "jobs.a", 10, 12)
	for i := 10; i < 12; i++ {
		if d := nextDelivery(t, second); string(d.Payload) != fmt.Sprintf("job-%d", i) || d.DeliveryCount != 1 {
			t.Fatalf("%q count %d, want job-%d", d.Payload, d.DeliveryCount, i)
		} else if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := second.Close(); err != nil {
		t.Fatal(err)
	}

	_ = c.Close()
	b.restart(t)
	again := b.connect(t, starling.TokenCredentials(appToken))
	third := consume(t, again, "jobs.a", "workers", starling.ConsumerOptions{})
	noDelivery(t, third, 700*time.Millisecond)
	publishJobs(t, again, "jobs.a", 12, 13)
	if d := nextDelivery(t, third); string(d.Payload) != "job-12" || d.DeliveryCount != 1 {
		t.Fatalf("after a restart: %q count %d, want job-12", d.Payload, d.DeliveryCount)
	}
}

// An unanswered delivery comes back after the ack wait; InProgress holds it,
// Nak brings it back (at once or after its delay), Term ends it.
func TestConsumerRedeliversAfterAckWaitNakAndNotAfterTerm(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	publishJobs(t, c, "jobs.b", 0, 1)
	const wait = 400 * time.Millisecond
	cons := consume(t, c, "jobs.b", "retry", starling.ConsumerOptions{AckWait: wait})
	d1 := nextDelivery(t, cons)
	start := time.Now()
	d2 := nextDelivery(t, cons)
	if d2.Position != d1.Position || d1.DeliveryCount != 1 || d2.DeliveryCount != 2 {
		t.Fatalf("%+v then %+v", d1, d2)
	}
	if e := time.Since(start); e < wait/2 {
		t.Fatalf("redelivered %s after the first delivery, ack wait %s", e, wait)
	}
	// In progress: held past several ack waits.
	held := time.Now().Add(3 * wait)
	for time.Now().Before(held) {
		if err := d2.InProgress(ctx); err != nil {
			t.Fatal(err)
		}
		noDelivery(t, cons, wait/4)
	}
	if err := d2.Nak(ctx, 0); err != nil {
		t.Fatal(err)
	}
	d3 := nextDelivery(t, cons)
	if d3.Position != d1.Position || d3.DeliveryCount != 3 {
		t.Fatalf("after a nak: %+v", d3)
	}
	start = time.Now()
	if err := d3.Nak(ctx, 300*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	d4 := nextDelivery(t, cons)
	if e := time.Since(start); d4.DeliveryCount != 4 || e < 200*time.Millisecond {
		t.Fatalf("after a nak of 300ms: count %d after %s", d4.DeliveryCount, e)
	}
	if err := d4.Term(ctx); err != nil {
		t.Fatal(err)
	}
	noDelivery(t, cons, 3*wait)
	if n := metric(t, b.broker, "starling_consumer_redeliveries_total"); n < 3 {
		t.Fatalf("%v redeliveries counted", n)
	}
}

// Past MaxDeliver a message goes to the dead-letter topic.
func TestConsumerDeadLettersPastMaxDeliver(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	dead := consume(t, c, "jobs.dead", "inspect", starling.ConsumerOptions{})
	if err := c.PublishAcked(ctx, "jobs.c", []byte("poison")); err != nil {
		t.Fatal(err)
	}
	w := consume(t, c, "jobs.c", "w", starling.ConsumerOptions{MaxDeliver: 2, DeadLetter: "jobs.dead",
		Backoff: []time.Duration{10 * time.Millisecond}})
	for n := uint32(1); n <= 2; n++ {
		d := nextDelivery(t, w)
		if d.DeliveryCount != n || string(d.Payload) != "poison" {
			t.Fatalf("delivery %d: %+v", n, d)
		}
		if err := d.Nak(ctx, starling.NakBackoff); err != nil {
			t.Fatal(err)
		}
	}
	noDelivery(t, w, 500*time.Millisecond)
	d := nextDelivery(t, dead)
	if string(d.Payload) != "poison" || d.Topic != "jobs.dead" {
		t.Fatalf("dead-lettered %+v", d)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// Members of one consumer share its messages: each acked exactly once.
func TestConsumerMembersShareTheMessages(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c1 := b.connect(t, starling.TokenCredentials(appToken))
	c2 := b.connect(t, starling.TokenCredentials(appToken))
	members := []*starling.Consumer{consume(t, c1, "jobs.d", "pool", starling.ConsumerOptions{}),
		consume(t, c2, "jobs.d", "pool", starling.ConsumerOptions{})}
	const n = 40
	publishJobs(t, c1, "jobs.d", 0, n)
	var mu sync.Mutex
	got := map[string]int{}
	ctx, stop := context.WithCancel(ctxT(t))
	defer stop()
	var wg sync.WaitGroup
	for _, m := range members {
		wg.Go(func() {
			for d, err := range m.All(ctx) {
				if err != nil {
					return
				}
				mu.Lock()
				got[string(d.Payload)]++
				total := len(got)
				mu.Unlock()
				if err := d.Ack(ctx); err != nil {
					return
				}
				if total == n {
					stop()
				}
			}
		})
	}
	wg.Wait()
	if len(got) != n {
		t.Fatalf("%d of %d messages", len(got), n)
	}
	for p, k := range got {
		if k != 1 {
			t.Fatalf("%s delivered %d times", p, k)
		}
	}
}

func TestConsumerRefusals(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	reader := b.connect(t, starling.TokenCredentials(readerToken))
	ctx := ctxT(t)
	for _, tc := range []struct {
		what        string
		client      *starling.Client
		topic, name string
		opts        starling.ConsumerOptions
		want        error
	}{
		{"a topic that is not durable", c, "plain.t", "w", starling.ConsumerOptions{}, starling.ErrInvalidRequest},
		{"a denied topic", c, "secret.jobs", "w", starling.ConsumerOptions{}, starling.ErrForbidden},
		{"a dead-letter topic the user may not publish to", reader, "jobs.e", "w",
			starling.ConsumerOptions{DeadLetter: "jobs.e.dead"}, starling.ErrForbidden},
		{"max_ack_pending over the broker's budget", c, "jobs.e", "big",
			starling.ConsumerOptions{MaxAckPending: math.MaxUint32}, starling.ErrLimitExceeded},
		{"a pattern", c, "jobs.*", "w", starling.ConsumerOptions{}, starling.ErrInvalidTopic},
		{"an invalid name", c, "jobs.e", "two words", starling.ConsumerOptions{}, starling.ErrInvalidConsumer},
	} {
		_, err := tc.client.Consume(ctx, tc.topic, tc.name, tc.opts)
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v, want %v", tc.what, err, tc.want)
		}
		var se *starling.ServerError
		if errors.As(err, &se) && (se.Op != "consume" || se.Name != tc.topic) {
			t.Fatalf("%s: refusal names %q %q", tc.what, se.Op, se.Name)
		}
	}
	consume(t, c, "jobs.e", "w", starling.ConsumerOptions{AckWait: time.Second})
	if _, err := c.Consume(ctx, "jobs.e", "w", starling.ConsumerOptions{AckWait: 2 * time.Second}); !errors.Is(err, starling.ErrInvalidRequest) {
		t.Fatalf("a member with other settings: %v, want ErrInvalidRequest", err)
	}
	consume(t, c, "jobs.e", "w", starling.ConsumerOptions{AckWait: time.Second, Start: starling.ConsumeLast()})
}

// Publishing the same message id twice stores the message once: single and
// batch publishes, acked or not, a repeat within a batch included.
func TestPublishDeduplicatesByMsgID(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	if !c.ServerInfo().Has(wire.FeatureDedup) {
		t.Fatalf("the broker did not grant DEDUP: %+v", c.ServerInfo())
	}
	sub, err := c.Subscribe(ctx, "dedup.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	msg := func(p, id string) starling.Message {
		m := starling.Message{Payload: []byte(p)}
		if id != "" {
			m = m.WithMsgID(id)
		}
		return m
	}
	for _, acked := range []bool{true, true, false} {
		if err := c.PublishMessage(ctx, "dedup.t", msg("a", "id-a"), acked); err != nil {
			t.Fatal(err)
		}
	}
	batch := []starling.Message{msg("c", "id-c"), msg("c again", "id-c"), msg("a again", "id-a"), msg("plain", "")}
	if err := c.PublishMessages(ctx, "dedup.t", batch, true); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishMessages(ctx, "dedup.t", batch[:3], false); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishMessage(ctx, "dedup.t", msg("b", "id-b"), true); err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct{ payload, id string }{{"a", "id-a"}, {"c", "id-c"}, {"plain", ""}, {"b", "id-b"}} {
		e := next(t, sub)
		id, _ := e.MsgID()
		if string(e.Payload) != want.payload || id != want.id {
			t.Fatalf("event %q id %q, want %q id %q", e.Payload, id, want.payload, want.id)
		}
	}
	quiet, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	if e, err := sub.Next(quiet); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a repeat was delivered: %q (%v)", e.Payload, err)
	}
	if n := metric(t, b.broker, "starling_publish_duplicates_total"); n != 7 {
		t.Fatalf("%v duplicates counted, want 7", n)
	}
	if err := c.PublishMessage(ctx, "dedup.t", msg("x", "").WithMsgID(""), true); !errors.Is(err, starling.ErrInvalidRequest) {
		t.Fatalf("an empty id: %v, want ErrInvalidRequest", err)
	}
	if err := c.PublishMessage(ctx, "dedup.t", msg("x", strings.Repeat("i", 129)), true); !errors.Is(err, starling.ErrLimitExceeded) {
		t.Fatalf("an id over max_msg_id_bytes: %v, want ErrLimitExceeded", err)
	}
	// A durable topic takes ids too (its log keeps them) and drops a repeat.
	for range 2 {
		if err := c.PublishMessage(ctx, "jobs.f", msg("x", "id-x"), true); err != nil {
			t.Fatalf("an id on a durable topic: %v", err)
		}
	}
	durable := consume(t, c, "jobs.f", "w", starling.ConsumerOptions{})
	if d := nextDelivery(t, durable); string(d.Payload) != "x" {
		t.Fatalf("the durable topic delivered %q", d.Payload)
	} else if id, ok := d.MsgID(); !ok || id != "id-x" {
		t.Fatalf("the durable topic's delivery has id %q (%v)", id, ok)
	}
	noDelivery(t, durable, 500*time.Millisecond)
	// Another topic has its own window.
	other, err := c.Subscribe(ctx, "dedup.u", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := c.PublishMessage(ctx, "dedup.u", msg("a elsewhere", "id-a"), true); err != nil {
		t.Fatal(err)
	}
	if e := next(t, other); string(e.Payload) != "a elsewhere" {
		t.Fatalf("%q", e.Payload)
	}
}

// Headers and a message id published to a durable topic are kept in its
// log: the consumer's deliveries carry them (a redelivery too), a
// subscription resuming from the log after a restart gets them, and the
// topic's de-duplication window survives the restart.
func TestDurableTopicKeepsHeadersAndMsgIDs(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	if info := c.ServerInfo(); !info.Has(wire.FeatureHeaders) || !info.Has(wire.FeatureDedup) {
		t.Fatalf("the broker did not grant HEADERS and DEDUP: %+v", info)
	}
	const topic, trace = "jobs.h", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	headed := starling.Message{Payload: []byte("job"), Headers: []starling.Header{{Name: "traceparent", Value: trace}}}.WithMsgID("job-7")
	want := []starling.Header{{Name: "traceparent", Value: trace}, {Name: starling.MsgIDHeader, Value: "job-7"}}
	if err := c.PublishMessage(ctx, topic, headed, true); err != nil {
		t.Fatalf("headers and a message id on a durable topic: %v", err)
	}
	if err := c.PublishAcked(ctx, topic, []byte("plain")); err != nil {
		t.Fatal(err)
	}

	cons := consume(t, c, topic, "workers", starling.ConsumerOptions{})
	d := nextDelivery(t, cons)
	if string(d.Payload) != "job" || d.DeliveryCount != 1 || !reflect.DeepEqual(d.Headers, want) {
		t.Fatalf("delivered %q (count %d) with headers %+v, want %+v", d.Payload, d.DeliveryCount, d.Headers, want)
	}
	if id, ok := d.MsgID(); !ok || id != "job-7" {
		t.Fatalf("the delivery's id %q (%v)", id, ok)
	}
	if v, ok := d.Header("traceparent"); !ok || v != trace {
		t.Fatalf("the delivery's traceparent %q (%v)", v, ok)
	}
	plain := nextDelivery(t, cons)
	if string(plain.Payload) != "plain" || plain.Headers != nil {
		t.Fatalf("delivered %q with headers %+v", plain.Payload, plain.Headers)
	}
	if _, ok := plain.MsgID(); ok {
		t.Fatal("a message without an id has one")
	}
	if err := plain.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Nak(ctx, 0); err != nil {
		t.Fatal(err)
	}
	again := nextDelivery(t, cons)
	if again.Position != d.Position || again.DeliveryCount != 2 || !reflect.DeepEqual(again.Headers, want) {
		t.Fatalf("redelivered %q (count %d) with headers %+v", again.Payload, again.DeliveryCount, again.Headers)
	}
	if err := again.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cons.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.Close()

	// After a restart nothing is retained in memory: a resume reads the log.
	b.restart(t)
	c = b.connect(t, starling.TokenCredentials(appToken))
	// A retry after the restart is a repeat: acked, not stored again.
	if err := c.PublishMessage(ctx, topic, headed, true); err != nil {
		t.Fatalf("a repeat after the restart: %v", err)
	}
	if err := c.PublishAcked(ctx, topic, []byte("last")); err != nil {
		t.Fatal(err)
	}
	sub, err := c.Subscribe(ctx, topic, starling.FromPosition(d.Position))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	e := next(t, sub)
	if string(e.Payload) != "job" || e.Position != d.Position || !reflect.DeepEqual(e.Headers, want) {
		t.Fatalf("resumed at %q (%+v) with headers %+v, want %+v", e.Payload, e.Position, e.Headers, want)
	}
	if id, ok := e.MsgID(); !ok || id != "job-7" {
		t.Fatalf("the resumed event's id %q (%v)", id, ok)
	}
	for _, p := range []string{"plain", "last"} {
		if e := next(t, sub); string(e.Payload) != p || e.Headers != nil {
			t.Fatalf("resumed %q with headers %+v, want %q (the repeat not stored)", e.Payload, e.Headers, p)
		}
	}
	if n := metric(t, b.broker, "starling_publish_duplicates_total"); n != 1 {
		t.Fatalf("%v duplicates counted after the restart, want 1", n)
	}
}
