package starling

// rpcStream: one bidirectional request/response stream (a publish stream or
// a cache stream). Callers encode their frames, whole, into the stream's
// pending buffer (bounded: past pendingBytes they wait, so a slow broker
// pushes back on callers, and a cancelled caller never leaves half a frame
// on the wire); a writer goroutine swaps the buffer out and writes it in one
// call, so a burst of publishes costs one write and no allocation per
// message. A reader goroutine hands each answer to its waiter by request id
// and answers Pings.

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

// pendingBytes is how many encoded bytes a stream holds for its writer
// before callers wait (one frame is always taken, whatever its size).
const pendingBytes = 256 << 10

type answer struct {
	frame wire.Frame
	err   error
}

type rpcStream struct {
	s    *quic.Stream
	info ServerInfo

	// wmu guards the pending buffer the writer takes whole.
	wmu     sync.Mutex
	wbuf    []byte
	wspare  []byte
	wdone   bool          // the writer finished: nothing more is written
	wake    chan struct{} // (1 slot) wbuf became non-empty
	drained chan struct{} // closed when the writer takes wbuf; nil until a caller waits
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
	r := &rpcStream{s: s, info: c.info, wake: make(chan struct{}, 1),
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

// appendFn appends one encoded frame, whole, to dst.
type appendFn func(dst []byte) []byte

// put appends the frame app encodes to the pending buffer, waiting (while
// ctx allows; the one bounded returns, when not nil, made only then) when
// the buffer is over pendingBytes. A frame whose payload is over the
// broker's max_frame_bytes is refused, nothing written.
func (r *rpcStream) put(ctx context.Context, bounded func() context.Context, app appendFn) error {
	select {
	case <-r.dead:
		return r.err()
	default:
	}
	for {
		r.wmu.Lock()
		if r.wdone {
			r.wmu.Unlock()
			return r.err()
		}
		if len(r.wbuf) < pendingBytes {
			start := len(r.wbuf)
			r.wbuf = app(r.wbuf)
			if n := len(r.wbuf) - start - wire.HeaderLen; n > int(r.info.MaxFrameBytes) {
				r.wbuf = r.wbuf[:start]
				r.wmu.Unlock()
				return &FrameTooLargeError{Len: n, Max: int(r.info.MaxFrameBytes)}
			}
			first := start == 0
			r.wmu.Unlock()
			if first {
				select {
				case r.wake <- struct{}{}:
				default:
				}
			}
			return nil
		}
		if r.drained == nil {
			r.drained = make(chan struct{})
		}
		drained := r.drained
		r.wmu.Unlock()
		if bounded != nil {
			ctx, bounded = bounded(), nil
		}
		select {
		case <-drained:
		case <-r.dead:
			return r.err()
		case <-r.closing:
			return ErrClosed
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// take hands the writer the pending buffer (and wakes waiting callers);
// last marks the writer finished.
func (r *rpcStream) take(last bool) []byte {
	r.wmu.Lock()
	buf := r.wbuf
	r.wbuf, r.wspare = r.wspare[:0], nil
	if last {
		r.wdone = true
	}
	if r.drained != nil {
		close(r.drained)
		r.drained = nil
	}
	r.wmu.Unlock()
	return buf
}

// giveBack returns a written buffer for reuse (a very large one is dropped).
func (r *rpcStream) giveBack(buf []byte) {
	if cap(buf) > 4*pendingBytes {
		return
	}
	r.wmu.Lock()
	r.wspare = buf[:0]
	r.wmu.Unlock()
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
	f := build(id)
	ch := make(chan answer, 1)
	if err := r.register(id, func(a answer) { ch <- a }); err != nil {
		return nil, err
	}
	if err := r.put(ctx, nil, func(dst []byte) []byte { return wire.Append(dst, f) }); err != nil {
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
func (r *rpcStream) send(ctx context.Context, timeout time.Duration, size int, build func(dst []byte, id uint64, ack wire.AckMode) []byte) error {
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
	var err error
	if mark > 0 {
		err = r.register(id, func(a answer) {
			if a.err != nil && r.log != nil {
				r.log("a publish window mark was refused", a.err)
			}
			r.window.release(mark)
		})
	}
	if err == nil {
		err = r.put(ctx, wait, func(dst []byte) []byte { return build(dst, id, ack) })
		if err != nil && mark > 0 {
			r.forget(id)
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
	for {
		last := false
		select {
		case <-r.wake:
		case <-r.dead:
			return
		case <-r.closing:
			// Write what is pending, then finish the stream.
			last = true
		}
		buf := r.take(last)
		if len(buf) > 0 {
			if _, err := r.s.Write(buf); err != nil {
				r.fail(fmt.Errorf("starling: stream write: %w", err))
				return
			}
		}
		if last {
			_ = r.s.Close()
			return
		}
		r.giveBack(buf)
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
		pong := &wire.Pong{Nonce: f.Nonce}
		r.wmu.Lock()
		if !r.wdone {
			r.wbuf = wire.Append(r.wbuf, pong)
		}
		r.wmu.Unlock()
		select {
		case r.wake <- struct{}{}:
		default:
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
