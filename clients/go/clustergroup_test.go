package starling

// A queue group in a cluster against real brokers: the topic's owner serves
// the group, so Go members bootstrapped at different brokers share one copy
// of the topic's events, each event reaching one member once.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/internal/testbroker"
)

func TestClusterQueueGroupIsSharedAcrossBrokers(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, []string{"a", "b"}, []string{"a", "b"})
	two := []string{"a", "b"}
	topic := ownedBy(placement.Topic, "jobs", two, "b")
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	atA, atB := tc.client(t, "a"), tc.client(t, "b")
	routedTo(t, atA, placement.Topic, topic)

	var mu sync.Mutex
	got := map[string][]string{} // payload -> members
	var wg sync.WaitGroup
	readCtx, stop := context.WithCancel(ctx)
	defer stop()
	for name, c := range map[string]*Client{"a": atA, "b": atB} {
		sub, err := c.SubscribeGroup(ctx, topic, "workers")
		if err != nil {
			t.Fatalf("join via %s: %v", name, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = sub.Close() }()
			for e, err := range sub.All(readCtx) {
				if err != nil {
					return
				}
				mu.Lock()
				got[string(e.Payload)] = append(got[string(e.Payload)], name)
				mu.Unlock()
			}
		}()
	}
	const n = 40
	for i := range n {
		if err := atA.PublishAcked(ctx, topic, []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(testbroker.Soon)
	for {
		mu.Lock()
		have := len(got)
		mu.Unlock()
		if have >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d events arrived", have, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // a duplicate would show by now
	stop()
	wg.Wait()
	for i := range n {
		if members := got[fmt.Sprint(i)]; len(members) != 1 {
			t.Fatalf("event %d reached %v", i, members)
		}
	}
}
