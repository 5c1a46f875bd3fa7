// The Starling transport (--starling ADDR): the Go client of clients/go, one
// client per subscriber and per producer, so the same producers, trackers,
// credit window and figures drive Starling as they drive NATS and nsqd.
// Producers publish fire-and-forget within the client's publish window; a
// flush is an acked publish to a topic of the producer's own on the same
// publish stream (the broker reads a stream in order, so its ack means every
// publish before it was taken).
package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"starling.invalid/starling"
)

const kindStarling = "starling"

type starlingTransport struct {
	o      options
	prefix string
	mu     sync.Mutex
	subs   []*starling.Subscription
	conns  []*starling.Client
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

func newStarlingTransport(o options) (*starlingTransport, error) {
	if !strings.HasPrefix(o.system, "starling") {
		return nil, fmt.Errorf("--system %s is not a Starling label but --starling is set", o.system)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &starlingTransport{o: o, prefix: fmt.Sprintf("bench.%d", time.Now().UnixNano()), ctx: ctx, cancel: cancel}, nil
}

func (s *starlingTransport) topic(t int) string { return fmt.Sprintf("%s.%d", s.prefix, t) }

func (s *starlingTransport) connect(name string) (*starling.Client, error) {
	cfg := starling.Config{Server: s.o.starling, ClientName: name, PublishStreams: 1, DisableClusterRouting: true}
	var err error
	switch {
	case s.o.starlingCredentials != "":
		dir, derr := starling.LoadCredentialsDir(s.o.starlingCredentials)
		if derr != nil {
			return nil, derr
		}
		cfg.Credentials = dir.Credentials
		if dir.HasTrust {
			cfg.Trust = dir.Trust
		}
	case s.o.starlingToken != "":
		cfg.Credentials = starling.TokenCredentials(s.o.starlingToken)
	}
	switch {
	case s.o.ca != "":
		cfg.Trust, err = starling.TrustCAFile(s.o.ca)
	case s.o.starlingFingerprint != "":
		cfg.Trust, err = starling.TrustFingerprint(s.o.starlingFingerprint)
	case s.o.starlingCredentials == "":
		cfg.Trust = starling.InsecureTrustAnyServer()
	}
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	c, err := starling.Connect(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", s.o.starling, err)
	}
	s.mu.Lock()
	s.conns = append(s.conns, c)
	s.mu.Unlock()
	return c, nil
}

func (s *starlingTransport) subscribe(t, i int, handle func([]byte)) error {
	c, err := s.connect(fmt.Sprintf("sub-%d-%d", t, i))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	// Subscribe returns once the broker registered the subscription.
	sub, err := c.Subscribe(ctx, s.topic(t), starling.Live())
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			e, err := sub.Next(s.ctx)
			if err != nil {
				return
			}
			handle(e.Payload)
		}
	}()
	return nil
}

type starlingPublisher struct {
	s          *starlingTransport
	c          *starling.Client
	flushTopic string
}

func (s *starlingTransport) publisher(p int) (publisher, error) {
	c, err := s.connect(fmt.Sprintf("pub-%d", p))
	if err != nil {
		return nil, err
	}
	return starlingPublisher{s: s, c: c, flushTopic: fmt.Sprintf("%s.flush.%d", s.prefix, p)}, nil
}

func (p starlingPublisher) publish(t int, msg []byte) error {
	// Returns once msg is encoded and queued, within the client's publish window.
	return p.c.Publish(p.s.ctx, p.s.topic(t), msg)
}

func (p starlingPublisher) flush() error {
	ctx, cancel := context.WithTimeout(p.s.ctx, 30*time.Second)
	defer cancel()
	return p.c.PublishAcked(ctx, p.flushTopic, nil)
}

func (s *starlingTransport) close() {
	s.cancel()
	s.mu.Lock()
	subs, conns := s.subs, s.conns
	s.subs, s.conns = nil, nil
	s.mu.Unlock()
	for _, sub := range subs {
		_ = sub.Close()
	}
	s.wg.Wait()
	for _, c := range conns {
		_ = c.Close()
	}
}
