package starling_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"starling.invalid/starling"
)

// Which subscription topics are patterns (docs/subjects.md).
func ExampleIsPattern() {
	for _, t := range []string{"orders.eu", "orders.*", "orders.>", "ord*.eu", "a.*.b"} {
		fmt.Println(t, starling.IsPattern(t))
	}
	// Output:
	// orders.eu false
	// orders.* true
	// orders.> true
	// ord*.eu false
	// a.*.b true
}

// A request's reply inbox is its reply-to header.
func ExampleEvent_ReplyTo() {
	req := starling.Event{Topic: "svc.echo", Payload: []byte("ping"),
		Headers: []starling.Header{{Name: starling.ReplyToHeader, Value: "_INBOX.0123456789abcdef0123456789abcdef.1"}}}
	fmt.Println(req.ReplyTo())
	fmt.Println(starling.Event{Payload: []byte("plain")}.ReplyTo() == "")
	// Output:
	// _INBOX.0123456789abcdef0123456789abcdef.1
	// true
}

// A responder and a requester (needs a broker granting REQUEST).
func ExampleClient_Request() {
	ctx := context.Background()
	var client *starling.Client // from starling.Connect
	if client == nil {
		return
	}
	go func() {
		_ = client.Respond(ctx, "svc.echo", func(_ context.Context, req starling.Event) (starling.Message, error) {
			return starling.Message{Payload: req.Payload}, nil
		})
	}()
	reply, err := client.Request(ctx, "svc.echo", []byte("ping"))
	switch {
	case errors.Is(err, starling.ErrNoResponders):
		fmt.Println("nobody subscribes to svc.echo")
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Printf("%s\n", reply.Payload)
	}
}

// A message with headers, and a wildcard subscription reading them with
// each event's topic (needs a broker granting HEADERS and WILDCARDS).
func ExampleClient_PublishMessage() {
	ctx := context.Background()
	var client *starling.Client // from starling.Connect
	if client == nil {
		return
	}
	sub, err := client.Subscribe(ctx, "orders.*", starling.Live())
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	m := starling.Message{Payload: []byte("hello"),
		Headers: []starling.Header{{Name: "traceparent", Value: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}}
	if err := client.PublishMessage(ctx, "orders.eu", m, true); err != nil {
		log.Fatal(err)
	}
	e, err := sub.Next(ctx)
	if err != nil {
		log.Fatal(err)
	}
	trace, _ := e.Header("traceparent")
	fmt.Println(e.Topic, string(e.Payload), trace)
}

// Workers sharing a queue: each job goes to one member of the group
// "workers" (needs a broker granting QUEUE_GROUPS).
func ExampleClient_SubscribeGroup() {
	ctx := context.Background()
	var client *starling.Client // from starling.Connect
	if client == nil {
		return
	}
	jobs, err := client.SubscribeGroup(ctx, "jobs", "workers")
	if err != nil {
		log.Fatal(err)
	}
	defer jobs.Close()
	for job, err := range jobs.All(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("working on %s\n", job.Payload)
	}
}

// Group names are checked before anything is sent.
func ExampleValidateGroup() {
	for _, g := range []string{"workers", "billing.eu-1", "", "two words"} {
		fmt.Printf("%q %v\n", g, errors.Is(starling.ValidateGroup(g), starling.ErrInvalidGroup))
	}
	// Output:
	// "workers" false
	// "billing.eu-1" false
	// "" true
	// "two words" true
}

// A worker of the durable consumer "senders" of the durable topic
// jobs.email: each job goes to one worker, and a job not acked (its worker
// crashed, or it took longer than AckWait) goes to another (needs a broker
// granting CONSUMERS, and jobs.email among its durable_topics).
func ExampleClient_Consume() {
	ctx := context.Background()
	var client *starling.Client // from starling.Connect
	if client == nil {
		return
	}
	send := func([]byte) error { return nil }
	jobs, err := client.Consume(ctx, "jobs.email", "senders", starling.ConsumerOptions{
		AckWait:    time.Minute,
		MaxDeliver: 5,
		Backoff:    []time.Duration{time.Second, 10 * time.Second},
		DeadLetter: "jobs.email.dead",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer jobs.Close() // sends the last acks and waits for the broker to have them
	for job, err := range jobs.All(ctx) {
		if err != nil {
			log.Fatal(err) // the stream ended: Consume again to go on
		}
		if err := send(job.Payload); err != nil {
			_ = job.Nak(ctx, starling.NakBackoff) // again after the backoff schedule
			continue
		}
		_ = job.Ack(ctx)
	}
}

// A message id makes a retried publish safe: the topic stores a repeat of
// an id within its window once (needs a broker granting DEDUP).
func ExampleMessage_WithMsgID() {
	m := starling.Message{Payload: []byte("order 42")}.WithMsgID("order-42")
	id, _ := m.MsgID()
	fmt.Println(id, m.Headers[0].Name)
	var client *starling.Client // from starling.Connect
	if client != nil {
		ctx := context.Background()
		for range 3 { // the broker delivers it once
			_ = client.PublishMessage(ctx, "orders", m, true)
		}
	}
	// Output: order-42 Starling-Msg-Id
}
