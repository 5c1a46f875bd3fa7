package starling

// rpcStream: one bidirectional request/response stream (a publish stream or
// a cache stream). Callers hand encoded frames to a writer goroutine through
// a bounded queue, so a slow broker pushes back on callers and a cancelled
// caller never leaves half a frame on the wire. A reader goroutine hands
// each answer to its waiter by request id and answers Pings.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/wire"
)

const (
	// rpcQueueDepth is how many frames a stream queues before callers wait.
	rpcQueueDepth = 1024
	// coalesceBytes is the most the writer gathers into one write.
	coalesceBytes = 256 << 10
)

type answer struct {
	frame wire.Frame
	err   error
}

type rpcStream struct {
	s       *quic.Stream
	info    ServerInfo
	queue   chan []byte
	closing chan struct{}
	dead    chan struct{}
	done    sync.WaitGroup

	mu      sync.Mutex
	pending map[uint64]func(answer)
	deadErr error

	nextID   atomic.Uint64
	inflight atomic.Int64
	window   *window
	closeMu  sync.Once
	log      func(msg string, err error)
}

// openRPC opens a stream on c and starts its goroutines. window is nil for
// an unbounded stream.
func openRPC(ctx context.Context, c *conn, w *window, log func(string, error)) (*rpcStream, error) {
	s, err := c.q.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("starling: opening a stream: %w", err)
	}
	r := &rpcStream{s: s, info: c.info, queue: make(chan []byte, rpcQueueDepth),
		closing: make(chan struct{}), dead: make(chan struct{}),
		pending: map[uint64]func(answer){}, window: w, log: log}
	r.done.Add(2)
	go r.writeLoop()
	go r.readLoop()
	return r, nil
}

func (r *rpcStream) alive() bool {
	select {
	case <-r.dead:
		return false
	case <-r.closing:
		return false
	default:
		return true
	}
}

// fail ends the stream with err: every waiter gets it.
func (r *rpcStream) fail(err error) {
	err = linkErr(err)
	r.mu.Lock()
	if r.deadErr != nil {
		r.mu.Unlock()
		return
	}
	r.deadErr = err
	pending := r.pending
	r.pending = map[uint64]func(answer){}
	close(r.dead)
	r.mu.Unlock()
	r.s.CancelRead(0)
	r.s.CancelWrite(0)
	for _, cb := range pending {
		cb(answer{err: err})
	}
}

func (r *rpcStream) encode(f wire.Frame) ([]byte, error) {
	if n := wire.PayloadLen(f); n > int(r.info.MaxFrameBytes) {
		return nil, &FrameTooLargeError{Len: n, Max: int(r.info.MaxFrameBytes)}
	}
	return wire.Encode(f), nil
}

func (r *rpcStream) register(id uint64, cb func(answer)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deadErr != nil {
		return r.deadErr
	}
	r.pending[id] = cb
	r.inflight.Add(1)
	return nil
}

func (r *rpcStream) forget(id uint64) {
	r.mu.Lock()
	if _, ok := r.pending[id]; ok {
		delete(r.pending, id)
		r.inflight.Add(-1)
	}
	r.mu.Unlock()
}

func (r *rpcStream) enqueue(ctx context.Context, b []byte) error {
	select {
	case r.queue <- b:
		return nil
	case <-r.dead:
		return r.err()
	case <-r.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *rpcStream) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.deadErr == nil {
		return ErrClosed
	}
	return r.deadErr
}

// call sends the frame built for a fresh request id and waits for its answer;
// an Error (or Moved) answer comes back as a *ServerError.
func (r *rpcStream) call(ctx context.Context, build func(id uint64) wire.Frame) (wire.Frame, error) {
	id := r.nextID.Add(1)
	b, err := r.encode(build(id))
	if err != nil {
		return nil, err
	}
	ch := make(chan answer, 1)
	if err := r.register(id, func(a answer) { ch <- a }); err != nil {
		return nil, err
	}
	if err := r.enqueue(ctx, b); err != nil {
		r.forget(id)
		return nil, err
	}
	select {
	case a := <-ch:
		return a.frame, a.err
	case <-ctx.Done():
		r.forget(id)
		return nil, ctx.Err()
	}
}

// send queues a fire-and-forget request of about size bytes. On a windowed
// stream it first takes credit; when it is the window's mark it is built
// with an ack, whose answer gives the credit back. It waits (for credit or
// room in the queue) at most timeout, or until ctx's earlier deadline; the
// timer is made only when it has to wait.
func (r *rpcStream) send(ctx context.Context, timeout time.Duration, size int, build func(id uint64, ack wire.AckMode) wire.Frame) error {
	var bounded context.Context
	var cancel context.CancelFunc
	wait := func() context.Context {
		if bounded == nil {
			bounded, cancel = boundedContext(ctx, timeout)
		}
		return bounded
	}
	defer func() {
		if cancel != nil {
			cancel()
		}
	}()
	var mark int64
	if r.window != nil {
		var ok bool
		if mark, ok = r.window.tryReserve(int64(size)); !ok {
			var err error
			if mark, err = r.window.reserve(wait(), int64(size)); err != nil {
				return err
			}
		}
	}
	id := r.nextID.Add(1)
	ack := wire.AckNone
	if mark > 0 {
		ack = wire.Ack
	}
	b, err := r.encode(build(id, ack))
	if err == nil && mark > 0 {
		err = r.register(id, func(a answer) {
			if a.err != nil && r.log != nil {
				r.log("a publish window mark was refused", a.err)
			}
			r.window.release(mark)
		})
	}
	if err == nil {
		select {
		case r.queue <- b:
		default:
			if err = r.enqueue(wait(), b); err != nil && mark > 0 {
				r.forget(id)
			}
		}
	}
	if err != nil && mark > 0 {
		r.window.release(mark)
	}
	return err
}

// boundedContext bounds ctx by timeout unless it has an earlier deadline.
func boundedContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= timeout {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

func (r *rpcStream) writeLoop() {
	defer r.done.Done()
	var buf []byte
	for {
		var first []byte
		select {
		case first = <-r.queue:
		case <-r.dead:
			return
		case <-r.closing:
			// Write what is queued, then finish the stream.
			buf = buf[:0]
			for more := true; more; {
				select {
				case b := <-r.queue:
					buf = append(buf, b...)
				default:
					more = false
				}
			}
			if len(buf) > 0 {
				if _, err := r.s.Write(buf); err != nil {
					r.fail(err)
					return
				}
			}
			_ = r.s.Close()
			return
		}
		buf = append(buf[:0], first...)
	gather:
		for len(buf) < coalesceBytes {
			select {
			case b := <-r.queue:
				buf = append(buf, b...)
			default:
				break gather
			}
		}
		if _, err := r.s.Write(buf); err != nil {
			r.fail(fmt.Errorf("starling: stream write: %w", err))
			return
		}
		if cap(buf) > 4*coalesceBytes {
			buf = nil
		}
	}
}

func (r *rpcStream) readLoop() {
	defer r.done.Done()
	rd := wire.NewReader(r.s, r.info.MaxFrameBytes+responseSlack)
	for {
		f, err := rd.ReadFrame()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrClosed
			}
			r.fail(err)
			return
		}
		if err := r.dispatch(f); err != nil {
			r.fail(err)
			return
		}
	}
}

// dispatch hands one answer to its waiter; stream-level errors end the stream.
func (r *rpcStream) dispatch(f wire.Frame) error {
	var id uint64
	var a answer
	switch f := f.(type) {
	case *wire.Ping:
		select {
		case r.queue <- wire.Encode(&wire.Pong{Nonce: f.Nonce}):
		default: // a full queue: the broker's Ping waits for the next one
		}
		return nil
	case *wire.Pong:
		return nil
	case *wire.Error:
		if f.RequestID == 0 {
			return serverError(f)
		}
		id, a = f.RequestID, answer{err: serverError(f)}
	case *wire.Moved:
		id, a = f.RequestID, answer{err: movedError(f)}
	case *wire.PublishAck:
		id, a = f.RequestID, answer{frame: f}
	case *wire.CacheOk:
		id, a = f.RequestID, answer{frame: f}
	case *wire.CacheValue:
		id, a = f.RequestID, answer{frame: f}
	default:
		return protocolErr("unexpected %s frame on a request stream", f.Kind())
	}
	r.mu.Lock()
	cb, ok := r.pending[id]
	if ok {
		delete(r.pending, id)
		r.inflight.Add(-1)
	}
	r.mu.Unlock()
	if ok {
		cb(a)
	} else if a.err != nil && r.log != nil {
		r.log("the broker refused a fire-and-forget request", a.err)
	}
	return nil
}

// close writes what is queued, finishes the stream and waits (at most
// timeout) for the broker to end its side.
func (r *rpcStream) close(timeout time.Duration) {
	r.closeMu.Do(func() { close(r.closing) })
	finished := make(chan struct{})
	go func() { r.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(timeout):
		r.fail(ErrClosed)
		<-finished
	}
}
