package starling

// node: the pools of connections and streams to ONE broker: publish streams
// (a topic always hashes to the same one), subscription connections (one
// stream per subscription, round-robin), and cache streams (pipelined,
// filled in order), plus the ClusterInfo query. A Client routes over one
// node per cluster member.

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

// lazy is a pool entry opened on first use and reopened once it died.
type lazy[T any] struct {
	mu sync.Mutex
	v  T
	ok bool
}

func (l *lazy[T]) get(ctx context.Context, alive func(T) bool, open func(context.Context) (T, error)) (T, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ok && alive(l.v) {
		return l.v, nil
	}
	v, err := open(ctx)
	if err != nil {
		var zero T
		return zero, err
	}
	l.v, l.ok = v, true
	return v, nil
}

func (l *lazy[T]) peek() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.v, l.ok
}

func (l *lazy[T]) take() (T, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.v, l.ok
	var zero T
	l.v, l.ok = zero, false
	return v, ok
}

func connAlive(c *conn) bool        { return c.alive() }
func streamAlive(s *rpcStream) bool { return s.alive() }

type node struct {
	cfg  Config
	d    *dialer
	info ServerInfo
	log  func(string, error)

	control      lazy[*conn]
	pubConn      lazy[*conn]
	pubStreams   []lazy[*rpcStream]
	eventConns   []lazy[*conn]
	nextEvents   atomic.Uint64
	cacheConns   []lazy[*conn]
	cacheStreams []lazy[*rpcStream]
}

// connectNode dials the broker once (so a bad address, certificate or
// credentials fail here) and prepares the empty pools.
func connectNode(ctx context.Context, cfg Config, d *dialer, log func(string, error)) (*node, error) {
	first, err := d.dial(ctx, wire.ALPNEvents)
	if err != nil {
		return nil, err
	}
	n := &node{cfg: cfg, d: d, info: first.info, log: log,
		pubStreams:   make([]lazy[*rpcStream], cfg.PublishStreams),
		eventConns:   make([]lazy[*conn], cfg.EventConns),
		cacheConns:   make([]lazy[*conn], cfg.CacheConns),
		cacheStreams: make([]lazy[*rpcStream], cfg.CacheConns*cfg.CacheStreams)}
	n.control.v, n.control.ok = first, true
	n.pubConn.v, n.pubConn.ok = first, true
	return n, nil
}

func (n *node) dialer(alpn string) func(context.Context) (*conn, error) {
	return func(ctx context.Context) (*conn, error) { return n.d.dial(ctx, alpn) }
}

// publishStream is the stream topic's publishes go on.
func (n *node) publishStream(ctx context.Context, topic string) (*rpcStream, error) {
	i := placement.FNV1a(placement.FNVOffset, []byte(topic)) % uint64(len(n.pubStreams))
	return n.pubStreams[i].get(ctx, streamAlive, func(ctx context.Context) (*rpcStream, error) {
		ctx, cancel := boundedContext(ctx, n.cfg.RequestTimeout)
		defer cancel()
		c, err := n.pubConn.get(ctx, connAlive, n.dialer(wire.ALPNEvents))
		if err != nil {
			return nil, err
		}
		var w *window
		if n.cfg.PublishWindowBytes > 0 {
			w = newWindow(n.cfg.PublishWindowBytes)
		}
		return openRPC(ctx, c, w, n.log)
	})
}

// eventConn is the connection for the next subscription (round-robin),
// except that a reply inbox's subscription always takes the first: the
// broker binds an inbox token to the connection that first subscribed to it
// (docs/subjects.md), so a resubscription must come from the same one.
func (n *node) eventConn(ctx context.Context, topic string) (*conn, error) {
	i := n.nextEvents.Add(1) % uint64(len(n.eventConns))
	if strings.HasPrefix(topic, inboxPrefix+".") {
		i = 0
	}
	return n.eventConns[i].get(ctx, connAlive, n.dialer(wire.ALPNEvents))
}

// cacheStream picks a cache stream: the first with fewer than
// CacheStreamDepth operations in flight (opening it if needed), else the
// least loaded open one.
func (n *node) cacheStream(ctx context.Context) (*rpcStream, error) {
	var best *rpcStream
	for i := range n.cacheStreams {
		s, ok := n.cacheStreams[i].peek()
		if ok && s.alive() {
			if s.inflight.Load() < int64(n.cfg.CacheStreamDepth) {
				return s, nil
			}
			if best == nil || s.inflight.Load() < best.inflight.Load() {
				best = s
			}
			continue
		}
		return n.cacheStreams[i].get(ctx, streamAlive, func(ctx context.Context) (*rpcStream, error) {
			c, err := n.cacheConns[i/n.cfg.CacheStreams].get(ctx, connAlive, n.dialer(wire.ALPNCache))
			if err != nil {
				return nil, err
			}
			return openRPC(ctx, c, nil, n.log)
		})
	}
	return best, nil
}

// clusterInfo asks the broker for the membership on a short-lived stream of
// the control connection.
func (n *node) clusterInfo(ctx context.Context) (*wire.ClusterInfo, error) {
	c, err := n.control.get(ctx, connAlive, n.dialer(wire.ALPNEvents))
	if err != nil {
		return nil, err
	}
	s, err := c.q.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("starling: opening a stream: %w", err)
	}
	defer s.CancelRead(0)
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := wire.WriteFrame(s, &wire.ClusterInfoRequest{RequestID: 1}); err != nil {
		return nil, err
	}
	f, err := wire.NewReader(s, c.info.MaxFrameBytes+responseSlack).ReadFrame()
	_ = s.Close()
	if err != nil {
		return nil, fmt.Errorf("starling: reading cluster_info: %w", err)
	}
	switch f := f.(type) {
	case *wire.ClusterInfo:
		return f, nil
	case *wire.Error:
		return nil, serverError(f)
	}
	return nil, protocolErr("unexpected %s frame, expected cluster_info", f.Kind())
}

// close flushes the publish streams (up to timeout), then closes every
// connection of the node.
func (n *node) close(timeout time.Duration) {
	var wg sync.WaitGroup
	for i := range n.pubStreams {
		if s, ok := n.pubStreams[i].take(); ok {
			wg.Go(func() { s.close(timeout) })
		}
	}
	wg.Wait()
	for i := range n.cacheStreams {
		if s, ok := n.cacheStreams[i].take(); ok {
			s.fail(ErrClosed)
			s.done.Wait()
		}
	}
	conns := []*lazy[*conn]{&n.control, &n.pubConn}
	for i := range n.eventConns {
		conns = append(conns, &n.eventConns[i])
	}
	for i := range n.cacheConns {
		conns = append(conns, &n.cacheConns[i])
	}
	for _, l := range conns {
		if c, ok := l.take(); ok {
			_ = c.q.CloseWithError(0, "client closed")
		}
	}
}
