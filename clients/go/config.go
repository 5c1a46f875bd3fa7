package starling

// Config: where to connect, whom to trust, who the client is, and the sizes
// of its pools, windows and buffers.

import (
	"net"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the broker's QUIC port.
const DefaultPort = 7400

// Defaults of the Config fields left zero.
const (
	DefaultConnectTimeout     = 5 * time.Second
	DefaultRequestTimeout     = 10 * time.Second
	DefaultPublishWindowBytes = 8 << 20
	MinPublishWindowBytes     = 64 << 10
	MaxPublishWindowBytes     = 1 << 30
	DefaultPublishStreams     = 4
	DefaultCacheConns         = 2
	DefaultCacheStreams       = 4
	DefaultCacheStreamDepth   = 64
	DefaultEventConns         = 2
	DefaultSubscriptionBuffer = 64
	DefaultClusterRefresh     = 5 * time.Second

	DefaultStreamReceiveWindow     = 16 << 20
	DefaultConnectionReceiveWindow = 64 << 20
)

// Config is everything Connect needs. Only Server and Trust are required.
type Config struct {
	// Server is the broker's host:port ([v6]:port, v4:port, name:port, or a
	// bare host for port 7400). Names are resolved on every (re)connect.
	Server string
	// ServerName is the TLS server name; default the host of Server, or
	// "localhost" when that is an IP address (as the Rust SDK).
	ServerName string
	// Trust decides whether the broker's certificate is believed. Required.
	Trust Trust
	// Credentials is the client's identity (zero: none).
	Credentials Credentials
	// ClientName is sent in Hello and shows up in the broker's logs.
	ClientName string
	// ConnectTimeout bounds dialling plus the handshake of one connection
	// when the caller's context has no earlier deadline.
	ConnectTimeout time.Duration
	// RequestTimeout bounds one request when the caller's context has no
	// earlier deadline; a subscription gives up resubscribing after three.
	RequestTimeout time.Duration
	// PublishWindowBytes bounds the fire-and-forget bytes one publish stream
	// has written that the broker has not acknowledged (0: 8 MiB; -1:
	// unbounded; else clamped to 64 KiB..1 GiB). One publish per quarter
	// window asks for an ack, whose answer releases the bytes before it.
	PublishWindowBytes int64
	// PublishStreams is the number of publish streams (0: 4); a topic always
	// uses the same one, so one client's publishes to a topic stay in order.
	PublishStreams int
	// EventConns is the number of subscription connections (0: 2).
	EventConns int
	// CacheConns × CacheStreams is the cache stream pool (0: 2 × 4).
	CacheConns, CacheStreams int
	// CacheStreamDepth is how many cache operations one stream carries
	// before the next stream is used (0: 64, at most 1024).
	CacheStreamDepth int
	// SubscriptionBuffer is how many event batches a subscription holds for
	// a slow reader before it stops reading from the broker, which then
	// applies its slow-subscriber policy (0: 64); and how many deliveries a
	// Consumer holds before it stops reading (the consumer's MaxAckPending
	// bounds what the broker sends ahead anyway).
	SubscriptionBuffer int
	// DisableClusterRouting sends every request to Server, which forwards
	// what it does not own. By default the client asks for the membership
	// and goes straight to each topic's or key's owner.
	DisableClusterRouting bool
	// ClusterRefresh is how often a routing client re-reads the membership.
	ClusterRefresh time.Duration
	// StreamReceiveWindow and ConnectionReceiveWindow are the most bytes the
	// broker may send ahead on one stream and one connection (QUIC flow
	// control; 0: 16 MiB and 64 MiB). With SubscriptionBuffer they bound what
	// a subscriber that does not keep up holds before the broker is pushed back.
	StreamReceiveWindow, ConnectionReceiveWindow int64
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if c.ClientName == "" {
		c.ClientName = "starling-go/" + Version
	}
	if c.ConnectTimeout <= 0 {
		c.ConnectTimeout = DefaultConnectTimeout
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	switch {
	case c.PublishWindowBytes == 0:
		c.PublishWindowBytes = DefaultPublishWindowBytes
	case c.PublishWindowBytes > 0:
		c.PublishWindowBytes = min(max(c.PublishWindowBytes, MinPublishWindowBytes), MaxPublishWindowBytes)
	}
	def(&c.PublishStreams, DefaultPublishStreams)
	def(&c.EventConns, DefaultEventConns)
	def(&c.CacheConns, DefaultCacheConns)
	def(&c.CacheStreams, DefaultCacheStreams)
	def(&c.CacheStreamDepth, DefaultCacheStreamDepth)
	c.CacheStreamDepth = min(c.CacheStreamDepth, 1024)
	def(&c.SubscriptionBuffer, DefaultSubscriptionBuffer)
	if c.ClusterRefresh <= 0 {
		c.ClusterRefresh = DefaultClusterRefresh
	}
	if c.StreamReceiveWindow <= 0 {
		c.StreamReceiveWindow = DefaultStreamReceiveWindow
	}
	if c.ConnectionReceiveWindow <= 0 {
		c.ConnectionReceiveWindow = DefaultConnectionReceiveWindow
	}
	return c
}

// Version is this client's version, sent in its default client name.
const Version = "0.1.0"

// splitHostPort splits a server address; a bare host gets DefaultPort.
func splitHostPort(server string) (string, int, error) {
	s := strings.TrimSpace(server)
	if s == "" {
		return "", 0, configErr("bad server address %q: empty", server)
	}
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		return s[1 : len(s)-1], DefaultPort, nil
	}
	if net.ParseIP(s) != nil {
		return s, DefaultPort, nil
	}
	if !strings.Contains(s, ":") {
		return s, DefaultPort, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil || host == "" {
		return "", 0, configErr("bad server address %q: expected host:port", server)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p > 65535 {
		return "", 0, configErr("bad server address %q: bad port", server)
	}
	return host, p, nil
}
