package starling

// Client: the entry point. It sends each request to the right broker: the
// bootstrap broker (Config.Server) for a single node, or, in a cluster, the
// member that owns the topic or cache key (see cluster.go), falling back to
// the bootstrap broker, which forwards, when a member cannot be reached.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

// Client is a connection to a Starling broker or cluster. It is safe for
// concurrent use; Close releases everything it holds.
type Client struct {
	cfg       Config
	tr        *quic.Transport
	bootstrap *node
	router    *router
	ctx       context.Context
	cancel    context.CancelFunc
	closed    atomic.Bool
	wg        sync.WaitGroup
	spawnMu   sync.Mutex
	closeOnce sync.Once
	// inbox is the reply inbox of this client's requests.
	inbox *inbox
	// lastTopic is the last topic published to, already validated.
	lastTopic atomic.Pointer[string]
}

// spawn runs f on a goroutine Close waits for; false (and f not run) once
// the client is closing.
func (c *Client) spawn(f func()) bool {
	c.spawnMu.Lock()
	defer c.spawnMu.Unlock()
	if c.closed.Load() {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

// Connect connects and handshakes one connection right away, so a bad
// address, certificate, credentials or protocol version fail here. Unless
// DisableClusterRouting is set it then asks for the cluster's membership and
// keeps it fresh; every other connection and stream opens on first use.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if _, err := tlsConfig(cfg.Trust, cfg.Credentials, "x", wire.ALPNEvents); err != nil {
		return nil, err
	}
	udp, err := net.ListenUDP("udp", nil)
	if err != nil {
		return nil, fmt.Errorf("starling: opening a UDP socket: %w", err)
	}
	tr := &quic.Transport{Conn: udp}
	cctx, cancel := context.WithCancel(context.Background())
	c := &Client{cfg: cfg, tr: tr, ctx: cctx, cancel: cancel, inbox: newInbox()}
	boot, err := connectNode(ctx, cfg, &dialer{cfg: cfg, tr: tr, addr: cfg.Server, role: rolePlain}, c.logf)
	if err != nil {
		cancel()
		_ = tr.Close()
		_ = udp.Close()
		return nil, err
	}
	c.bootstrap = boot
	if !cfg.DisableClusterRouting {
		rctx, rcancel := c.requestContext(ctx)
		info, err := boot.clusterInfo(rctx)
		rcancel()
		if err == nil {
			c.router = newRouter(c, info)
			c.router.warmUp(ctx)
			c.spawn(c.refreshLoop)
		}
	}
	return c, nil
}

// ServerInfo is what the bootstrap broker said about itself.
func (c *Client) ServerInfo() ServerInfo { return c.bootstrap.info }

// logf reports failures nobody waits for (a refused fire-and-forget publish).
func (c *Client) logf(msg string, err error) {
	slog.Debug("starling: "+msg, "error", err)
}

func (c *Client) open() error {
	if c.closed.Load() {
		return ErrClosed
	}
	return nil
}

// requestContext bounds ctx by the request timeout when it has no earlier
// deadline.
func (c *Client) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return boundedContext(ctx, c.cfg.RequestTimeout)
}

// routed runs op on the node owning key, re-reading the membership and
// trying again while members answer Moved or (draining) Unavailable, as long
// as ctx allows.
func (c *Client) routed(ctx context.Context, kind placement.Kind, key []byte, op func(*node) error) error {
	for attempt := 1; ; attempt++ {
		n, member := c.nodeFor(kind, key)
		err := op(n)
		if err == nil {
			return nil
		}
		lostMember := member != "" && c.router != nil && linkFailure(err)
		if lostMember {
			// Its requests go through the bootstrap broker until a background
			// attempt reconnects.
			c.router.failed(member)
		}
		if !(retryable(err) || lostMember) || c.router == nil || ctx.Err() != nil || attempt >= 20 {
			return err
		}
		if errors.Is(err, ErrUnavailable) {
			select {
			case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
			case <-ctx.Done():
				return err
			}
		}
		c.router.refresh(ctx)
	}
}

func (c *Client) nodeFor(kind placement.Kind, key []byte) (*node, string) {
	if c.router != nil {
		if n, id := c.router.target(kind, key); n != nil {
			return n, id
		}
	}
	return c.bootstrap, ""
}

// linkFailure reports whether err means the connection to a member is gone.
func linkFailure(err error) bool {
	var se *ServerError
	if errors.As(err, &se) || errors.Is(err, ErrFrameTooLarge) || errors.Is(err, context.Canceled) {
		return false
	}
	return true
}

// Close flushes queued publishes (waiting up to the request timeout for the
// brokers to read them), ends every subscription and closes every
// connection. Later calls fail with ErrClosed.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.spawnMu.Lock()
		c.closed.Store(true)
		c.spawnMu.Unlock()
		c.cancel()
		c.wg.Wait()
		if c.router != nil {
			c.router.close(c.cfg.RequestTimeout)
		}
		c.bootstrap.close(c.cfg.RequestTimeout)
		_ = c.tr.Close()
		_ = c.tr.Conn.Close()
	})
	return nil
}
