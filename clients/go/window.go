package starling

// window: the bound on the bytes of fire-and-forget publishes one publish
// stream has written that the broker has not acknowledged
// (Config.PublishWindowBytes). Every publish takes credit for its bytes and
// waits while there is none; one publish in each quarter window (a mark)
// asks for the broker's ack, and the mark's answer (an ack, a refusal, or the
// stream's end) gives back the credit of the mark and of every publish since
// the mark before it. The same scheme as the Rust SDK (client/src/window.rs).

import (
	"context"
	"sync"
)

type window struct {
	mu       sync.Mutex
	credit   int64
	changed  chan struct{}
	unmarked int64
	chunk    int64
	maxCost  int64
}

func newWindow(size int64) *window {
	chunk := size / 4
	return &window{credit: size, changed: make(chan struct{}), chunk: chunk, maxCost: size - chunk}
}

// reserve waits for credit for a publish of n bytes. A positive result makes
// this publish a mark: it asks for an ack, and release(result) must follow
// its answer. Never waits forever while the broker answers: at most a quarter
// window is unmarked, so once every mark is answered maxCost is free.
func (w *window) reserve(ctx context.Context, n int64) (int64, error) {
	cost := min(n, w.maxCost)
	for {
		w.mu.Lock()
		if w.credit >= cost {
			w.credit -= cost
			w.unmarked += cost
			var mark int64
			if w.unmarked >= w.chunk {
				mark, w.unmarked = w.unmarked, 0
			}
			w.mu.Unlock()
			return mark, nil
		}
		ch := w.changed
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}

// tryReserve is reserve without waiting: ok is false when the window has
// no credit for n bytes now.
func (w *window) tryReserve(n int64) (mark int64, ok bool) {
	cost := min(n, w.maxCost)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.credit < cost {
		return 0, false
	}
	w.credit -= cost
	w.unmarked += cost
	if w.unmarked >= w.chunk {
		mark, w.unmarked = w.unmarked, 0
	}
	return mark, true
}

// release gives n bytes of credit back.
func (w *window) release(n int64) {
	w.mu.Lock()
	w.credit += n
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// available is the credit free now (tests).
func (w *window) available() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.credit
}
