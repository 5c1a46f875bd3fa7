package starling

// Cluster routing: the membership learned with ClusterInfo, the owner of
// each topic and cache key (internal/placement, the brokers' own function),
// one node per member opened in the background (never in a request's path),
// and the fallback to the bootstrap broker, which forwards, while a member's
// connection is not up or its address cannot be reached from here.

import (
	"context"
	"sync"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

const (
	// leftMemberGrace is how long a member that left the view keeps its
	// connections for the subscriptions still on them.
	leftMemberGrace = 10 * time.Second
	retryFirst      = 10 * time.Second
	retryMax        = 5 * time.Minute
	warmUpWait      = 2 * time.Second
)

type link struct {
	addr       string
	node       *node
	connecting bool
	retryAt    time.Time
	failures   int
	ready      chan struct{}
}

type router struct {
	c     *Client
	mu    sync.Mutex
	epoch uint64
	ids   []string
	addrs map[string]string
	links map[string]*link
}

func newRouter(c *Client, info *wire.ClusterInfo) *router {
	r := &router{c: c, links: map[string]*link{}}
	r.setView(info)
	return r
}

func (r *router) setView(info *wire.ClusterInfo) {
	r.epoch = info.Epoch
	r.ids = r.ids[:0]
	r.addrs = map[string]string{}
	for _, m := range info.Members {
		r.ids = append(r.ids, m.ID)
		r.addrs[m.ID] = m.Addr
	}
}

// RoutingEpoch is the membership epoch the client routes on (0: not routing).
func (c *Client) RoutingEpoch() uint64 {
	if c.router == nil {
		return 0
	}
	c.router.mu.Lock()
	defer c.router.mu.Unlock()
	return c.router.epoch
}

// target is the node owning key and its member id, or nil to go through
// the bootstrap broker. It never waits for a connection.
func (r *router) target(kind placement.Kind, key []byte) (*node, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.ids) <= 1 {
		return nil, ""
	}
	i := placement.Owner(r.ids, kind, key)
	if i < 0 {
		return nil, ""
	}
	id := r.ids[i]
	l := r.linkLocked(id)
	if l.node != nil {
		return l.node, id
	}
	r.connectLocked(id, l)
	return nil, ""
}

func (r *router) linkLocked(id string) *link {
	l, ok := r.links[id]
	if !ok {
		l = &link{addr: r.addrs[id]}
		r.links[id] = l
	}
	return l
}

// connectLocked starts a background connection to member id unless one is
// running or its retry pause has not passed.
func (r *router) connectLocked(id string, l *link) {
	if l.connecting || time.Now().Before(l.retryAt) || r.c.closed.Load() {
		return
	}
	l.connecting = true
	l.ready = make(chan struct{})
	ready := l.ready
	cfg := r.c.cfg
	cfg.Server = l.addr
	started := r.c.spawn(func() {
		defer close(ready)
		ctx, cancel := context.WithTimeout(r.c.ctx, cfg.ConnectTimeout)
		defer cancel()
		n, err := connectNode(ctx, cfg, &dialer{cfg: cfg, tr: r.c.tr, addr: l.addr, role: roleRouted}, r.c.logf)
		r.mu.Lock()
		l.connecting = false
		if err != nil {
			l.retryAt = time.Now().Add(retryPause(l.failures))
			l.failures++
			r.mu.Unlock()
			r.c.logf("member "+id+" unreachable; going through the bootstrap broker", err)
			return
		}
		keep := r.links[id] == l && !r.c.closed.Load()
		if keep {
			l.node, l.failures, l.retryAt = n, 0, time.Time{}
		}
		r.mu.Unlock()
		if !keep {
			n.close(time.Second)
		}
	})
	if !started {
		l.connecting = false
		close(ready)
	}
}

func retryPause(failures int) time.Duration {
	return min(retryFirst<<min(failures, 5), retryMax)
}

// warmUp connects to every member, waiting at most 2 s, so a client inside
// the cluster routes directly from its first request.
func (r *router) warmUp(ctx context.Context) {
	r.mu.Lock()
	var waits []chan struct{}
	if len(r.ids) > 1 {
		for _, id := range r.ids {
			l := r.linkLocked(id)
			if l.node == nil {
				r.connectLocked(id, l)
				if l.ready != nil {
					waits = append(waits, l.ready)
				}
			}
		}
	}
	r.mu.Unlock()
	timer := time.NewTimer(warmUpWait)
	defer timer.Stop()
	for _, w := range waits {
		select {
		case <-w:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// failed forgets member id's node after a link failure.
func (r *router) failed(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	l, ok := r.links[id]
	if !ok || l.node == nil {
		return
	}
	n := l.node
	l.node = nil
	l.retryAt = time.Now().Add(retryPause(0))
	if !r.c.spawn(func() { n.close(time.Second) }) {
		n.close(time.Second)
	}
}

// refresh re-reads the membership from the bootstrap broker.
func (r *router) refresh(ctx context.Context) {
	ctx, cancel := r.c.requestContext(ctx)
	defer cancel()
	info, err := r.c.bootstrap.clusterInfo(ctx)
	if err != nil {
		r.c.logf("cluster membership refresh failed", err)
		return
	}
	r.mu.Lock()
	if info.Epoch == r.epoch {
		r.mu.Unlock()
		return
	}
	r.setView(info)
	var gone []*node
	for id, l := range r.links {
		if r.addrs[id] != l.addr {
			delete(r.links, id)
			if l.node != nil {
				gone = append(gone, l.node)
			}
		}
	}
	r.mu.Unlock()
	for _, n := range gone {
		r.c.spawn(func() {
			// Not at once: a member that left may still own topics until it
			// learns of the change; its subscriptions end with Moved then.
			select {
			case <-time.After(leftMemberGrace):
			case <-r.c.ctx.Done():
			}
			n.close(time.Second)
		})
	}
	r.warmUp(ctx)
}

func (c *Client) refreshLoop() {
	t := time.NewTicker(c.cfg.ClusterRefresh)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			c.router.refresh(c.ctx)
		case <-c.ctx.Done():
			return
		}
	}
}

// close closes every member node.
func (r *router) close(timeout time.Duration) {
	r.mu.Lock()
	var nodes []*node
	for id, l := range r.links {
		if l.node != nil {
			nodes = append(nodes, l.node)
		}
		delete(r.links, id)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { n.close(timeout) })
	}
	wg.Wait()
}
