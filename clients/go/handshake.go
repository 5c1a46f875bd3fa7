package starling

// One connection to one broker: the QUIC dial and the Starling handshake
// (Hello up, HelloOk or Error down on the first bidirectional stream).

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/wire"
)

// handshakeMaxFrame bounds the handshake answer before the broker's own
// limit is known.
const handshakeMaxFrame = 64 << 10

// responseSlack is what a client accepts from the broker beyond its
// max_frame_bytes (as the Rust SDK does).
const responseSlack = 64 << 10

// ServerInfo is what a broker said about itself in HelloOk.
type ServerInfo struct {
	// Version is the negotiated protocol version (2).
	Version uint8
	// Features are the granted feature bits (wire.Feature*).
	Features uint64
	// ServerID identifies the broker.
	ServerID string
	// MaxFrameBytes is the largest frame payload the broker accepts.
	MaxFrameBytes uint32
	// Epoch is the cluster membership epoch (0 when not clustered).
	Epoch uint64
}

// Has reports whether the broker granted every bit of feature.
func (s ServerInfo) Has(feature uint64) bool { return s.Features&feature == feature }

// role is what a connection asks to be.
type role uint8

const (
	rolePlain  role = iota // the broker forwards what it does not own
	roleRouted             // the broker answers Moved for what it does not own
)

// conn is one handshaken QUIC connection.
type conn struct {
	q    *quic.Conn
	info ServerInfo
}

func (c *conn) alive() bool { return c.q.Context().Err() == nil }

// dialer opens connections to one broker address.
type dialer struct {
	cfg  Config
	tr   *quic.Transport
	addr string
	role role
}

func (d *dialer) quicConfig() *quic.Config {
	return &quic.Config{
		HandshakeIdleTimeout:           d.cfg.ConnectTimeout,
		MaxIdleTimeout:                 30 * time.Second,
		KeepAlivePeriod:                5 * time.Second,
		InitialStreamReceiveWindow:     uint64(min(d.cfg.StreamReceiveWindow, 1<<20)),
		MaxStreamReceiveWindow:         uint64(d.cfg.StreamReceiveWindow),
		InitialConnectionReceiveWindow: uint64(min(d.cfg.ConnectionReceiveWindow, 4<<20)),
		MaxConnectionReceiveWindow:     uint64(d.cfg.ConnectionReceiveWindow),
	}
}

// dial connects with ALPN alpn and runs the handshake, within the
// connect timeout and ctx.
func (d *dialer) dial(ctx context.Context, alpn string) (*conn, error) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.ConnectTimeout)
	defer cancel()
	host, port, err := splitHostPort(d.addr)
	if err != nil {
		return nil, err
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("starling: cannot resolve %q: %w", host, err)
	}
	udp := &net.UDPAddr{IP: ips[0].IP, Port: port, Zone: ips[0].Zone}
	tlsCfg, err := tlsConfig(d.cfg.Trust, d.cfg.Credentials, serverNameFor(d.cfg.ServerName, host), alpn)
	if err != nil {
		return nil, err
	}
	q, err := d.tr.Dial(ctx, udp, tlsCfg, d.quicConfig())
	if err != nil {
		return nil, fmt.Errorf("starling: cannot connect to %s: %w", net.JoinHostPort(host, strconv.Itoa(port)), err)
	}
	info, err := handshake(ctx, q, d.cfg, d.role)
	if err != nil {
		_ = q.CloseWithError(0, "handshake failed")
		return nil, err
	}
	return &conn{q: q, info: info}, nil
}

// hello is the Hello frame this client sends.
func hello(cfg Config, r role) *wire.Hello {
	features := wire.FeaturesClient
	if r == roleRouted {
		features |= wire.FeatureCluster
	}
	h := &wire.Hello{MinVersion: wire.ProtocolVersion, MaxVersion: wire.ProtocolVersion,
		Features: features, ClientName: cfg.ClientName}
	if cfg.Credentials.token != "" {
		h.Features |= wire.FeatureAuthToken
		h.HasAuthToken, h.AuthToken = true, []byte(cfg.Credentials.token)
	}
	return h
}

func handshake(ctx context.Context, q *quic.Conn, cfg Config, r role) (ServerInfo, error) {
	s, err := q.OpenStreamSync(ctx)
	if err != nil {
		return ServerInfo{}, fmt.Errorf("starling: opening the handshake stream: %w", err)
	}
	defer s.CancelRead(0)
	if dl, ok := ctx.Deadline(); ok {
		_ = s.SetDeadline(dl)
	}
	if err := wire.WriteFrame(s, hello(cfg, r)); err != nil {
		return ServerInfo{}, fmt.Errorf("starling: sending Hello: %w", err)
	}
	f, err := wire.NewReader(s, handshakeMaxFrame).ReadFrame()
	_ = s.Close()
	if err != nil {
		var appErr *quic.ApplicationError
		if errors.As(err, &appErr) && appErr.ErrorCode == 1 {
			return ServerInfo{}, &ServerError{Code: wire.CodeUnauthorized, Message: appErr.ErrorMessage}
		}
		return ServerInfo{}, fmt.Errorf("starling: reading the handshake answer: %w", err)
	}
	switch f := f.(type) {
	case *wire.HelloOk:
		if f.Version != wire.ProtocolVersion {
			return ServerInfo{}, protocolErr("the broker chose protocol version %d", f.Version)
		}
		return ServerInfo{Version: f.Version, Features: f.Features, ServerID: f.ServerID,
			MaxFrameBytes: f.MaxFrameBytes, Epoch: f.Epoch}, nil
	case *wire.Error:
		return ServerInfo{}, serverError(f)
	default:
		return ServerInfo{}, protocolErr("unexpected %s frame, expected hello_ok", f.Kind())
	}
}
