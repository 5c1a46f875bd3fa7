// The JetStream transport: durable publishes and consumes against a
// nats-server with JetStream enabled (the store and its sync policy are the
// server's configuration, see bench/compare). One file-store stream per run
// takes every topic's subject; producers publish asynchronously and wait for
// JetStream's publish ack (the message is in the stream's store under the
// server's sync_interval), with at most --ack-window messages unacked per
// producer; each subscriber is an ephemeral pull consumer (AckNone, deliver
// all) of its topic's subject, read with Consume.
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jsTransport: one connection for the stream's administration, one per
// subscriber and one per producer.
type jsTransport struct {
	nats     *natsTransport
	admin    jetstream.JetStream
	stream   string
	consumes []jetstream.ConsumeContext
}

func newJetStreamTransport(o options) (*jsTransport, error) {
	n := newNATSTransport(o)
	nc, err := n.connect("admin")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		n.close()
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	t := &jsTransport{nats: n, admin: js, stream: fmt.Sprintf("BENCH_%d", time.Now().UnixNano())}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{
		Name:      t.stream,
		Subjects:  []string{n.prefix + ".>"},
		Storage:   jetstream.FileStorage,
		Replicas:  o.jsReplicas,
		Retention: jetstream.LimitsPolicy,
		Discard:   jetstream.DiscardOld,
	})
	if err != nil {
		n.close()
		return nil, fmt.Errorf("create stream %s: %w", t.stream, err)
	}
	return t, nil
}

func (t *jsTransport) subscribe(topic, i int, handle func([]byte)) error {
	nc, err := t.nats.connect(fmt.Sprintf("sub-%d-%d", topic, i))
	if err != nil {
		return err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cons, err := js.CreateConsumer(ctx, t.stream, jetstream.ConsumerConfig{
		AckPolicy:     jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		FilterSubject: t.nats.subject(topic),
	})
	if err != nil {
		return fmt.Errorf("create consumer: %w", err)
	}
	// The stream exists before any publish and the consumer delivers all of
	// it, so every message published to the topic from now on reaches it.
	cc, err := cons.Consume(func(m jetstream.Msg) { handle(m.Data()) },
		jetstream.PullMaxMessages(t.nats.o.jsPullMax))
	if err != nil {
		return fmt.Errorf("consume: %w", err)
	}
	t.consumes = append(t.consumes, cc)
	return nil
}

// jsPublisher keeps at most window messages unacked: a slot is taken before
// each PublishAsync and given back by the ack (or error) handler, which also
// records the publish→ack latency from the stamp in the message's header.
type jsPublisher struct {
	js    jetstream.JetStream
	t     *jsTransport
	slots chan struct{}
	start uint64 // measurement window start (ns since the epoch)
	now   func() uint64

	mu      sync.Mutex
	latency *hdrhistogram.Histogram
	err     error
}

func (t *jsTransport) publisher(p int) (publisher, error) {
	nc, err := t.nats.connect(fmt.Sprintf("pub-%d", p))
	if err != nil {
		return nil, err
	}
	window := t.nats.o.ackWindow
	pub := &jsPublisher{t: t, slots: make(chan struct{}, window), latency: newHistogram(),
		start: t.nats.o.measureStartNs, now: t.nats.o.nowNs}
	js, err := jetstream.New(nc,
		// Our slots bound the unacked messages; the library's own limit is
		// set above them so that it never stalls a publish.
		jetstream.WithPublishAsyncMaxPending(2*window+16),
		jetstream.WithPublishAsyncTimeout(30*time.Second),
		jetstream.WithPublishAsyncAckHandler(func(_ jetstream.JetStream, m *nats.Msg, _ *jetstream.PubAck) {
			pub.acked(m, nil)
		}),
		jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, m *nats.Msg, err error) {
			pub.acked(m, err)
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("jetstream: %w", err)
	}
	pub.js = js
	return pub, nil
}

func (p *jsPublisher) acked(m *nats.Msg, err error) {
	now := p.now()
	p.mu.Lock()
	if err != nil {
		if p.err == nil {
			p.err = fmt.Errorf("publish ack: %w", err)
		}
	} else if h, ok := decode(m.Data); ok && h.sendNs >= p.start {
		lat := int64(now) - int64(h.sendNs)
		if lat < 1 {
			lat = 1
		}
		_ = p.latency.RecordValue(lat)
	}
	p.mu.Unlock()
	<-p.slots
}

func (p *jsPublisher) publish(topic int, msg []byte) error {
	p.slots <- struct{}{}
	p.mu.Lock()
	err := p.err
	p.mu.Unlock()
	if err != nil {
		<-p.slots
		return err
	}
	if _, err := p.js.PublishAsync(p.t.nats.subject(topic), msg); err != nil {
		<-p.slots
		return fmt.Errorf("publish: %w", err)
	}
	return nil
}

// flush waits for every outstanding ack.
func (p *jsPublisher) flush() error {
	select {
	case <-p.js.PublishAsyncComplete():
	case <-time.After(60 * time.Second):
		return fmt.Errorf("publish acks: %d still pending after 60s", p.js.PublishAsyncPending())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// ackLatency returns the publish→ack histogram of measured messages.
func (p *jsPublisher) ackLatency() *hdrhistogram.Histogram {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.latency
}

// storeState reports the stream's messages and bytes and checks that it is
// a file-store stream: the proof that the run was durable on the server.
func (t *jsTransport) storeState() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := t.admin.Stream(ctx, t.stream)
	if err != nil {
		return "", fmt.Errorf("stream info: %w", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return "", fmt.Errorf("stream info: %w", err)
	}
	if info.Config.Storage != jetstream.FileStorage {
		return "", fmt.Errorf("stream %s is not a file-store stream (%s)", t.stream, info.Config.Storage)
	}
	return fmt.Sprintf("stream %s (file store): %d msgs, %d bytes", t.stream, info.State.Msgs, info.State.Bytes), nil
}

func (t *jsTransport) close() {
	for _, cc := range t.consumes {
		cc.Stop()
	}
	t.consumes = nil
	t.nats.close()
}
