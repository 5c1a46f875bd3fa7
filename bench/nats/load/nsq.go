// The nsqd side: one NSQ topic per workload topic, and every subscriber is
// its own channel on that topic with its own connection, so each subscriber
// gets every message (fan-out, as a NATS subscription does). Each producer
// has its own connection and sends one PUB per message, pipelined: it does
// not wait for nsqd's OK before the next PUB (go-nsq's PublishAsync), and
// flush waits for every OK. No MPUB.
package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nsqio/go-nsq"
)

// nsqName is nsqd's rule for topic and channel names (without #ephemeral:
// ephemeral channels drop what does not fit in memory, and a drop must
// count as a loss here, not vanish).
var nsqName = regexp.MustCompile(`^[.a-zA-Z0-9_-]{1,64}$`)

func validNSQName(s string) bool { return nsqName.MatchString(s) }

type nsqTransport struct {
	o         options
	prefix    string
	tls       *tls.Config
	logger    *log.Logger
	http      *http.Client
	consumers []*nsq.Consumer
	pubs      []*nsqPublisher
}

func newNSQTransport(o options) (*nsqTransport, error) {
	n := &nsqTransport{
		o:      o,
		prefix: fmt.Sprintf("bench.%d", time.Now().UnixNano()),
		logger: log.New(os.Stderr, "go-nsq ", log.LstdFlags),
		http:   &http.Client{Timeout: 10 * time.Second},
	}
	if o.ca != "" {
		pem, err := os.ReadFile(o.ca)
		if err != nil {
			return nil, fmt.Errorf("read --ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca %s holds no PEM certificate", o.ca)
		}
		n.tls = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return n, nil
}

func (n *nsqTransport) topic(t int) string { return fmt.Sprintf("%s.%d", n.prefix, t) }

// config is the go-nsq configuration of every connection of the run.
func (n *nsqTransport) config() *nsq.Config {
	c := nsq.NewConfig()
	c.MaxInFlight = n.o.nsqMaxInFlight
	c.OutputBufferTimeout = n.o.nsqOutputBufferTimeout
	c.OutputBufferSize = int64(n.o.nsqOutputBufferSize)
	if n.tls != nil {
		// Feature negotiation: IDENTIFY asks for tls_v1 and the connection
		// is upgraded before anything else is sent. bench/compare starts
		// nsqd with --tls-required=tcp-https, so a plaintext client fails.
		c.TlsV1 = true
		c.TlsConfig = n.tls.Clone()
	}
	return c
}

// createChannel makes the topic and the channel through nsqd's HTTP API,
// which answers only once they exist. SUB alone is not enough: go-nsq sends
// it without waiting for the answer, and a channel created after the first
// PUB would miss the messages before it.
func (n *nsqTransport) createChannel(topic, channel string) error {
	if err := n.post("/topic/create", url.Values{"topic": {topic}}); err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	if err := n.post("/channel/create", url.Values{"topic": {topic}, "channel": {channel}}); err != nil {
		return fmt.Errorf("create channel %s/%s: %w", topic, channel, err)
	}
	return nil
}

func (n *nsqTransport) post(path string, q url.Values) error {
	resp, err := n.http.Post(fmt.Sprintf("http://%s%s?%s", n.o.nsqdHTTP, path, q.Encode()), "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("nsqd HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	return nil
}

func (n *nsqTransport) subscribe(t, i int, handle func([]byte)) error {
	topic, channel := n.topic(t), fmt.Sprintf("sub-%d", i)
	if !validNSQName(topic) || !validNSQName(channel) {
		return fmt.Errorf("invalid NSQ topic or channel name %q/%q", topic, channel)
	}
	if err := n.createChannel(topic, channel); err != nil {
		return err
	}
	c, err := nsq.NewConsumer(topic, channel, n.config())
	if err != nil {
		return fmt.Errorf("nsq consumer: %w", err)
	}
	c.SetLogger(n.logger, nsq.LogLevelError)
	// One handler goroutine: deliveries are handled in arrival order. A nil
	// return makes go-nsq FIN the message.
	c.AddHandler(nsq.HandlerFunc(func(m *nsq.Message) error {
		handle(m.Body)
		return nil
	}))
	n.consumers = append(n.consumers, c)
	if err := c.ConnectToNSQD(n.o.nsqd); err != nil {
		return fmt.Errorf("connect to nsqd %s: %w", n.o.nsqd, err)
	}
	return nil
}

type nsqPublisher struct {
	n      *nsqTransport
	prod   *nsq.Producer
	done   chan *nsq.ProducerTransaction
	ended  chan struct{}
	issued uint64 // written by the producer goroutine only
	acked  atomic.Uint64
	failed atomic.Bool
	mu     sync.Mutex
	err    error
}

func (n *nsqTransport) publisher(p int) (publisher, error) {
	prod, err := nsq.NewProducer(n.o.nsqd, n.config())
	if err != nil {
		return nil, fmt.Errorf("nsq producer: %w", err)
	}
	prod.SetLogger(n.logger, nsq.LogLevelError)
	pub := &nsqPublisher{n: n, prod: prod, done: make(chan *nsq.ProducerTransaction, 1024), ended: make(chan struct{})}
	n.pubs = append(n.pubs, pub)
	go pub.collect()
	// Connect (IDENTIFY, TLS) now, so that a bad address fails before the run.
	if err := prod.Ping(); err != nil {
		return nil, fmt.Errorf("connect to nsqd %s: %w", n.o.nsqd, err)
	}
	return pub, nil
}

// verify asks nsqd, once everything is published, whether the run's
// connections are encrypted as the label says: a go-nsq client that asks for
// tls_v1 carries on in plaintext when nsqd has no TLS, and such a run must
// not be filed as nsq-tls. nsqd lists a connection as a producer only once
// it has published.
func (n *nsqTransport) verify() error {
	resp, err := n.http.Get(fmt.Sprintf("http://%s/stats?format=json", n.o.nsqdHTTP))
	if err != nil {
		return fmt.Errorf("nsqd stats: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("nsqd stats: HTTP %d", resp.StatusCode)
	}
	type client struct {
		TLS        bool   `json:"tls"`
		TLSVersion string `json:"tls_version"`
	}
	var stats struct {
		Topics []struct {
			Name     string `json:"topic_name"`
			Channels []struct {
				Clients []client `json:"clients"`
			} `json:"channels"`
		} `json:"topics"`
		Producers []client `json:"producers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		return fmt.Errorf("nsqd stats: %w", err)
	}
	conns := stats.Producers
	for _, t := range stats.Topics {
		if strings.HasPrefix(t.Name, n.prefix+".") {
			for _, c := range t.Channels {
				conns = append(conns, c.Clients...)
			}
		}
	}
	want := n.tls != nil
	versions := map[string]int{}
	for _, c := range conns {
		if c.TLS != want {
			return fmt.Errorf("nsqd reports a connection with tls=%v in a run with tls=%v", c.TLS, want)
		}
		versions[c.TLSVersion]++
	}
	if expected := len(n.pubs) + len(n.consumers); len(conns) != expected {
		return fmt.Errorf("nsqd reports %d connections of this run, expected %d", len(conns), expected)
	}
	if want {
		fmt.Fprintf(os.Stderr, "nsqd: connections by TLS version: %v\n", versions)
	}
	return nil
}

// collect counts nsqd's answers to the PUBs and keeps the first error.
func (p *nsqPublisher) collect() {
	defer close(p.ended)
	for t := range p.done {
		if t.Error != nil && !p.failed.Swap(true) {
			p.mu.Lock()
			p.err = t.Error
			p.mu.Unlock()
		}
		p.acked.Add(1)
	}
}

func (p *nsqPublisher) firstError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

func (p *nsqPublisher) publish(t int, msg []byte) error {
	if p.failed.Load() {
		return fmt.Errorf("nsqd refused a PUB: %w", p.firstError())
	}
	if err := p.prod.PublishAsync(p.n.topic(t), msg, p.done); err != nil {
		return err
	}
	p.issued++
	return nil
}

func (p *nsqPublisher) flush() error {
	deadline := time.Now().Add(p.n.o.drainTimeout)
	for p.acked.Load() < p.issued && !p.failed.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("nsqd answered %d of %d PUBs within %s", p.acked.Load(), p.issued, p.n.o.drainTimeout)
		}
		time.Sleep(100 * time.Microsecond)
	}
	if p.failed.Load() {
		return fmt.Errorf("nsqd refused a PUB: %w", p.firstError())
	}
	return nil
}

func (n *nsqTransport) close() {
	for _, c := range n.consumers {
		c.Stop()
	}
	for _, c := range n.consumers {
		select {
		case <-c.StopChan:
		case <-time.After(5 * time.Second):
		}
	}
	n.consumers = nil
	for _, p := range n.pubs {
		// Stop returns after go-nsq's router has ended, so nothing is
		// sent on done afterwards.
		p.prod.Stop()
		close(p.done)
		<-p.ended
	}
	n.pubs = nil
}
