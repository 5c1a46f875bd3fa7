package starling

// Patterns and requests in a cluster against real brokers: a Go wildcard
// subscription receives the topics every member owns, once and in order; a
// Go request is answered by a Go responder bootstrapped at another broker
// (the reply goes through the broker that delivered the request:
// Event.Subscription), and a request nobody subscribes to is answered
// ErrNoResponders by the topic's owner.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/internal/testbroker"
)

var threeMembers = []string{"a", "b", "c"}

func TestClusterWildcardSubscriptionGetsEveryOwnersTopics(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, threeMembers, threeMembers)
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	sub := tc.client(t, "a")
	waitMembers(t, sub, 3)
	s, err := sub.Subscribe(ctx, "orders.>", Live())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	pub := tc.client(t, "b")
	var topics []string
	for _, owner := range threeMembers {
		topics = append(topics, ownedBy(placement.Topic, "orders.x", threeMembers, owner))
	}
	const per = 5
	for i := range per {
		for _, topic := range topics {
			if err := pub.PublishAcked(ctx, topic, []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	got := map[string][]string{}
	for range per * len(topics) {
		e, err := s.Next(ctx)
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if e.Subscription != "orders.>" {
			t.Fatalf("Event.Subscription = %q", e.Subscription)
		}
		got[e.Topic] = append(got[e.Topic], string(e.Payload))
	}
	for _, topic := range topics {
		if want := "[0 1 2 3 4]"; fmt.Sprint(got[topic]) != want {
			t.Fatalf("%s: got %v, want %s", topic, got[topic], want)
		}
	}
	// Nothing more: a duplicate would show here.
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	defer stop()
	if e, err := s.Next(short); err == nil {
		t.Fatalf("an extra event: %s %q", e.Topic, e.Payload)
	}
}

func TestClusterRequestIsAnsweredAcrossBrokers(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, threeMembers, threeMembers)
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	service := ownedBy(placement.Topic, "svc.echo", threeMembers, "c")
	responder, requester := tc.client(t, "b"), tc.client(t, "a")
	waitMembers(t, responder, 3)
	waitMembers(t, requester, 3)
	respondCtx, stopResponding := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- responder.Respond(respondCtx, "svc.*", func(_ context.Context, e Event) (Message, error) {
			return Message{Payload: append([]byte("re: "), e.Payload...)}, nil
		})
	}()
	deadline := time.Now().Add(testbroker.Soon)
	for i := 0; i < 3; {
		reply, err := requester.Request(ctx, service, []byte(fmt.Sprint("ping ", i)))
		if errors.Is(err, ErrNoResponders) && time.Now().Before(deadline) {
			// The responder's subscription is still being opened.
			time.Sleep(50 * time.Millisecond)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprint("re: ping ", i); string(reply.Payload) != want {
			t.Fatalf("reply %q, want %q", reply.Payload, want)
		}
		i++
	}
	nobody := ownedBy(placement.Topic, "none.svc", threeMembers, "b")
	if _, err := requester.Request(ctx, nobody, []byte("ping")); !errors.Is(err, ErrNoResponders) {
		t.Fatalf("a request nobody subscribes to: %v", err)
	}
	stopResponding()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
