package starling

// The cache: put with a TTL, get, delete, each routed to the key's owner and
// pipelined on the cache stream pool.

import (
	"context"
	"fmt"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

func checkKey(key []byte) error {
	if reason := wire.ValidateKey(key); reason != "" {
		return fmt.Errorf("%w: %s", ErrInvalidKey, reason)
	}
	return nil
}

func (c *Client) cacheCall(ctx context.Context, op string, key []byte, build func(id uint64) wire.Frame) (wire.Frame, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := checkKey(key); err != nil {
		return nil, err
	}
	ctx, cancel := c.requestContext(ctx)
	defer cancel()
	var out wire.Frame
	err := c.routed(ctx, placement.CacheKey, key, func(n *node) error {
		s, err := n.cacheStream(ctx)
		if err != nil {
			return err
		}
		if !s.info.Has(wire.FeatureCache) {
			return fmt.Errorf("%w: the broker did not grant CACHE", ErrUnsupported)
		}
		out, err = s.call(ctx, build)
		return err
	})
	return out, inOperation(err, op, key)
}

// CachePut stores value under key, expiring after ttl (0: never); it reports
// whether a live value was replaced.
func (c *Client) CachePut(ctx context.Context, key, value []byte, ttl time.Duration) (bool, error) {
	ms := uint64(0)
	if ttl > 0 {
		ms = max(uint64(ttl.Milliseconds()), 1)
	}
	f, err := c.cacheCall(ctx, "cache_write", key, func(id uint64) wire.Frame {
		return &wire.CachePut{RequestID: id, Key: key, Value: value, TTLMs: ms}
	})
	return cacheOk(f, err)
}

// CacheGet is the value under key; found is false when it is absent or
// expired (an empty value is found).
func (c *Client) CacheGet(ctx context.Context, key []byte) (value []byte, found bool, err error) {
	f, err := c.cacheCall(ctx, "cache_read", key, func(id uint64) wire.Frame {
		return &wire.CacheGet{RequestID: id, Key: key}
	})
	if err != nil {
		return nil, false, err
	}
	v, ok := f.(*wire.CacheValue)
	if !ok {
		return nil, false, protocolErr("unexpected %s frame, expected cache_value", f.Kind())
	}
	return v.Value, v.Found, nil
}

// CacheDelete removes key; it reports whether a live value existed.
func (c *Client) CacheDelete(ctx context.Context, key []byte) (bool, error) {
	f, err := c.cacheCall(ctx, "cache_write", key, func(id uint64) wire.Frame {
		return &wire.CacheDelete{RequestID: id, Key: key}
	})
	return cacheOk(f, err)
}

func cacheOk(f wire.Frame, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	ok, is := f.(*wire.CacheOk)
	if !is {
		return false, protocolErr("unexpected %s frame, expected cache_ok", f.Kind())
	}
	return ok.Existed, nil
}
