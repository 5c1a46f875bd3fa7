// The broker side of a run, behind one small interface so that the same
// producers, trackers, credit window and figures drive NATS core and nsqd.
package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// transport connects one run's subscribers and producers to a broker.
type transport interface {
	// subscribe opens subscriber i of topic t on its own connection; handle
	// is called for every delivery, one at a time, in arrival order. When
	// subscribe returns, the broker keeps every message published to t from
	// then on for this subscriber.
	subscribe(t, i int, handle func(payload []byte)) error
	// publisher opens producer p's own connection.
	publisher(p int) (publisher, error)
	// close ends all deliveries and closes every connection.
	close()
}

type publisher interface {
	// publish sends one message to topic t.
	publish(t int, msg []byte) error
	// flush returns once the broker has taken every message published so far.
	flush() error
}

// Transports the load program drives.
const (
	kindNATS      = "nats"
	kindNSQ       = "nsq"
	kindJetStream = "jetstream"
)

// transportKind picks the broker from the options: nsqd when --nsqd is set
// or the system label names NSQ, NATS otherwise. The label and the address
// must agree, so that a result is never filed under the wrong system.
func transportKind(system, nsqd string, js bool) (string, error) {
	nsqLabel := strings.HasPrefix(system, "nsq")
	natsLabel := strings.HasPrefix(system, "nats")
	jsLabel := strings.HasPrefix(system, "jetstream")
	switch {
	case js && nsqd != "":
		return "", fmt.Errorf("--jetstream and --nsqd exclude each other")
	case js && (nsqLabel || natsLabel):
		return "", fmt.Errorf("--system %s is not a JetStream label but --jetstream is set", system)
	case !js && jsLabel:
		return "", fmt.Errorf("--system %s needs --jetstream", system)
	case js:
		return kindJetStream, nil
	case nsqd != "" && natsLabel:
		return "", fmt.Errorf("--system %s is a NATS label but --nsqd is set", system)
	case nsqd == "" && nsqLabel:
		return "", fmt.Errorf("--system %s needs --nsqd (the nsqd TCP address)", system)
	case nsqd != "":
		return kindNSQ, nil
	}
	return kindNATS, nil
}

// natsTransport: NATS core, one connection per subscriber and per producer.
type natsTransport struct {
	o      options
	prefix string
	conns  []*nats.Conn
}

func newNATSTransport(o options) *natsTransport {
	return &natsTransport{o: o, prefix: fmt.Sprintf("bench.%d", time.Now().UnixNano())}
}

func (n *natsTransport) subject(t int) string { return fmt.Sprintf("%s.%d", n.prefix, t) }

func (n *natsTransport) connect(name string) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name(name),
		nats.ReconnectBufSize(-1),
		nats.MaxReconnects(0),
		nats.FlusherTimeout(30 * time.Second),
	}
	if n.o.ca != "" {
		opts = append(opts, nats.RootCAs(n.o.ca))
	}
	nc, err := nats.Connect(n.o.server, opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", n.o.server, err)
	}
	n.conns = append(n.conns, nc)
	return nc, nil
}

func (n *natsTransport) subscribe(t, i int, handle func([]byte)) error {
	nc, err := n.connect(fmt.Sprintf("sub-%d-%d", t, i))
	if err != nil {
		return err
	}
	ns, err := nc.Subscribe(n.subject(t), func(m *nats.Msg) { handle(m.Data) })
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	_ = ns.SetPendingLimits(-1, -1)
	// The server has the subscription once it answers the PING of Flush.
	if err := nc.Flush(); err != nil {
		return fmt.Errorf("flush: %w", err)
	}
	return nil
}

type natsPublisher struct {
	n  *natsTransport
	nc *nats.Conn
}

func (n *natsTransport) publisher(p int) (publisher, error) {
	nc, err := n.connect(fmt.Sprintf("pub-%d", p))
	if err != nil {
		return nil, err
	}
	return natsPublisher{n, nc}, nil
}

func (p natsPublisher) publish(t int, msg []byte) error { return p.nc.Publish(p.n.subject(t), msg) }
func (p natsPublisher) flush() error                    { return p.nc.Flush() }

func (n *natsTransport) close() {
	for _, c := range n.conns {
		c.Close()
	}
	n.conns = nil
}

func newTransport(o options) (transport, error) {
	if o.kind == kindStarling {
		s, err := newStarlingTransport(o)
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	if o.kind == kindJetStream {
		t, err := newJetStreamTransport(o)
		if err != nil {
			return nil, err
		}
		return t, nil
	}
	if o.kind == kindNSQ {
		n, err := newNSQTransport(o)
		if err != nil {
			return nil, err
		}
		return n, nil
	}
	return newNATSTransport(o), nil
}
