package starling_test

// Integration tests of queue groups (docs/queue-groups.md) against the real
// broker (skipped when STARLING_BROKER_BIN is unset), and against a minimal
// QUIC broker on loopback that does not grant QUEUE_GROUPS.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
	"starling.invalid/starling/wire"
)

// share counts, per payload, which members received it.
type share struct {
	mu    sync.Mutex
	by    map[string][]string // payload -> members that got it
	per   map[string]int      // member -> events received
	total int
	grew  chan struct{}
}

func newShare() *share {
	return &share{by: map[string][]string{}, per: map[string]int{}, grew: make(chan struct{}, 1)}
}

func (s *share) add(member, payload string) {
	s.mu.Lock()
	s.by[payload] = append(s.by[payload], member)
	s.per[member]++
	s.total++
	s.mu.Unlock()
	select {
	case s.grew <- struct{}{}:
	default:
	}
}

// waitFor waits until cond holds (checked under the lock) or the test's
// patience runs out.
func (s *share) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.After(testbroker.Soon)
	for {
		s.mu.Lock()
		ok := cond()
		s.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-s.grew:
		case <-deadline:
			s.mu.Lock()
			defer s.mu.Unlock()
			t.Fatalf("timed out waiting for %s: %d events, per member %v", what, s.total, s.per)
		}
	}
}

// drain reads sub into sh as member until ctx ends.
func drain(ctx context.Context, sub *starling.Subscription, member string, sh *share) {
	for e, err := range sub.All(ctx) {
		if err != nil {
			return
		}
		sh.add(member, string(e.Payload))
	}
}

func TestQueueGroupSharesAmongGoMembers(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c1 := s.connect(t, starling.TokenCredentials(appToken))
	c2 := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	if !c1.ServerInfo().Has(wire.FeatureQueueGroups) {
		t.Fatalf("the broker did not grant QUEUE_GROUPS: %+v", c1.ServerInfo())
	}
	for _, bad := range []string{"", "two words", "a/b", "é", string(make([]byte, 65))} {
		if _, err := c1.SubscribeGroup(ctx, "jobs", bad); !errors.Is(err, starling.ErrInvalidGroup) {
			t.Fatalf("group %q: %v, want ErrInvalidGroup", bad, err)
		}
	}
	if _, err := c1.SubscribeGroup(ctx, "bad topic", "workers"); !errors.Is(err, starling.ErrInvalidTopic) {
		t.Fatalf("a group on an invalid topic: %v, want ErrInvalidTopic", err)
	}
	if _, err := c1.SubscribeGroup(ctx, "secret.jobs", "workers"); !errors.Is(err, starling.ErrForbidden) {
		t.Fatalf("a group on a denied topic: %v, want ErrForbidden", err)
	}

	rctx, stop := context.WithCancel(ctx)
	defer stop()
	workers, plain, audit := newShare(), newShare(), newShare()
	var subs []*starling.Subscription
	var wg sync.WaitGroup
	for i, c := range []*starling.Client{c1, c2, c1, c2} {
		sub, err := c.SubscribeGroup(ctx, "jobs", "workers")
		if err != nil {
			t.Fatal(err)
		}
		if sub.Group() != "workers" || sub.Topic() != "jobs" {
			t.Fatalf("group %q topic %q", sub.Group(), sub.Topic())
		}
		subs = append(subs, sub)
		wg.Add(1)
		go func() { defer wg.Done(); drain(rctx, sub, fmt.Sprintf("m%d", i), workers) }()
	}
	p, err := c2.Subscribe(ctx, "jobs", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	a, err := c1.SubscribeGroup(ctx, "jobs", "audit") // another group: a member of its own
	if err != nil {
		t.Fatal(err)
	}
	subs = append(subs, p, a)
	wg.Add(2)
	go func() { defer wg.Done(); drain(rctx, p, "plain", plain) }()
	go func() { defer wg.Done(); drain(rctx, a, "audit", audit) }()

	const n = 400
	for i := range n {
		pub := []*starling.Client{c1, c2}[i%2]
		if err := pub.PublishAcked(ctx, "jobs", fmt.Appendf(nil, "job-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	plain.waitFor(t, "the plain subscriber's events", func() bool { return plain.total >= n })
	audit.waitFor(t, "the audit group's events", func() bool { return audit.total >= n })
	workers.waitFor(t, "the workers' events", func() bool { return workers.total >= n })
	time.Sleep(300 * time.Millisecond) // room for a duplicate to show
	stop()
	wg.Wait()
	for _, sub := range subs {
		if sub.DroppedEvents() != 0 {
			t.Fatalf("%s/%s counted %d dropped events", sub.Topic(), sub.Group(), sub.DroppedEvents())
		}
		_ = sub.Close()
	}
	for name, sh := range map[string]*share{"workers": workers, "plain": plain, "audit": audit} {
		if sh.total != n || len(sh.by) != n {
			t.Fatalf("%s: %d events of %d distinct payloads, want %d each", name, sh.total, len(sh.by), n)
		}
		for i := range n {
			if got := sh.by[fmt.Sprintf("job-%d", i)]; len(got) != 1 {
				t.Fatalf("%s: job-%d went to %v, want exactly one", name, i, got)
			}
		}
	}
	if len(workers.per) != 4 {
		t.Fatalf("the work went to %d of 4 members: %v", len(workers.per), workers.per)
	}
	t.Logf("%d messages shared among 4 members: %v", n, workers.per)
}

func TestQueueGroupOnAPattern(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	sh := newShare()
	var wg sync.WaitGroup
	for i := range 2 {
		sub, err := c.SubscribeGroup(ctx, "orders.>", "billing")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for e, err := range sub.All(rctx) {
				if err != nil {
					return
				}
				sh.add(fmt.Sprintf("m%d", i), e.Topic+"="+string(e.Payload))
			}
		}()
	}
	const n = 50
	for i := range n {
		topic := []string{"orders.eu", "orders.us.east"}[i%2]
		if err := c.PublishAcked(ctx, topic, fmt.Appendf(nil, "o-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishAcked(ctx, "billing.eu", []byte("not matched")); err != nil {
		t.Fatal(err)
	}
	sh.waitFor(t, "the pattern group's events", func() bool { return sh.total >= n })
	time.Sleep(300 * time.Millisecond)
	stop()
	wg.Wait()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.total != n || len(sh.by) != n {
		t.Fatalf("%d events of %d distinct, want %d: %v", sh.total, len(sh.by), n, sh.per)
	}
	for i := range n {
		want := fmt.Sprintf("%s=o-%d", []string{"orders.eu", "orders.us.east"}[i%2], i)
		if len(sh.by[want]) != 1 {
			t.Fatalf("%s went to %v", want, sh.by[want])
		}
	}
}

// A broker that does not grant QUEUE_GROUPS: SubscribeGroup fails with
// ErrUnsupported and opens no stream, while a plain Subscribe goes through.
func TestQueueGroupNeedsTheFeature(t *testing.T) {
	t.Parallel()
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
	t.Cleanup(func() { _ = ln.Close() })
	subscribes := make(chan *wire.Subscribe, 8)
	go fakeBroker(ln, subscribes)

	trust, err := starling.TrustCAPEM(ca.PEM)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxT(t)
	c, err := starling.Connect(ctx, starling.Config{Server: ln.Addr().String(), Trust: trust,
		DisableClusterRouting: true, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.ServerInfo().Has(wire.FeatureQueueGroups) {
		t.Fatal("the fake broker granted QUEUE_GROUPS")
	}
	sub, err := c.Subscribe(ctx, "jobs", starling.Live())
	if err != nil {
		t.Fatalf("a plain subscription to the fake broker: %v", err)
	}
	defer sub.Close()
	if f := <-subscribes; f.Topic != "jobs" || f.Group != "" {
		t.Fatalf("the fake broker got %+v", f)
	}
	if _, err := c.SubscribeGroup(ctx, "jobs", "workers"); !errors.Is(err, starling.ErrUnsupported) {
		t.Fatalf("a group without QUEUE_GROUPS: %v, want ErrUnsupported", err)
	}
	select {
	case f := <-subscribes:
		t.Fatalf("a Subscribe was sent without QUEUE_GROUPS: %+v", f)
	case <-time.After(300 * time.Millisecond):
	}
}

// fakeBroker answers each connection's Hello granting what was asked but
// QUEUE_GROUPS, and each Subscribe with SubscribeOk (handing it to got).
func fakeBroker(ln *quic.Listener, got chan<- *wire.Subscribe) {
	for {
		q, err := ln.Accept(context.Background())
		if err != nil {
			return
		}
		go func() {
			for first := true; ; first = false {
				st, err := q.AcceptStream(context.Background())
				if err != nil {
					return
				}
				f, err := wire.NewReader(st, 1<<20).ReadFrame()
				if err != nil {
					return
				}
				switch f := f.(type) {
				case *wire.Hello:
					if !first {
						return
					}
					_ = wire.WriteFrame(st, &wire.HelloOk{Version: wire.ProtocolVersion,
						Features: f.Features &^ wire.FeatureQueueGroups, ServerID: "fake", MaxFrameBytes: 1 << 20})
					_ = st.Close()
				case *wire.Subscribe:
					got <- f
					_ = wire.WriteFrame(st, &wire.SubscribeOk{RequestID: f.RequestID, SubscriptionID: 1})
				default:
					return
				}
			}
		}()
	}
}
