// One subscriber's bookkeeping, the same rules as the Rust tracker
// (bench/src/tracker.rs): per-producer counts and next expected
// sequence (loss, reordering, duplicates), latency of messages sent at or
// after the window start, and deliveries received inside the window.
package main

import (
	"sync/atomic"

	"github.com/HdrHistogram/hdrhistogram-go"
)

type window struct {
	start, end uint64 // ns since the epoch; end is MaxUint64 in count mode
}

type tracker struct {
	next       []uint64
	received   []uint64
	reordered  uint64
	foreign    uint64
	measured   uint64
	inWindow   uint64
	lastRecvNs uint64
	latency    *hdrhistogram.Histogram
	win        window
	// total is read by producers (in-flight window) and the drain loop.
	total atomic.Uint64
}

func newHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, 100_000_000_000, 3)
}

func newTracker(producers int, w window) *tracker {
	return &tracker{
		next:     make([]uint64, producers),
		received: make([]uint64, producers),
		latency:  newHistogram(),
		win:      w,
	}
}

// observe records one delivery received at nowNs. Called from the
// subscription's handler goroutine only.
func (t *tracker) observe(payload []byte, nowNs uint64) {
	h, ok := decode(payload)
	if !ok || int(h.producer) >= len(t.next) {
		t.foreign++
		return
	}
	p := h.producer
	t.received[p]++
	if h.seq >= t.next[p] {
		t.next[p] = h.seq + 1
	} else {
		t.reordered++
	}
	if nowNs > t.lastRecvNs {
		t.lastRecvNs = nowNs
	}
	if nowNs >= t.win.start && nowNs <= t.win.end {
		t.inWindow++
	}
	if h.sendNs >= t.win.start {
		t.measured++
		lat := int64(nowNs) - int64(h.sendNs)
		if lat < 1 {
			lat = 1
		}
		_ = t.latency.RecordValue(lat)
	}
	t.total.Add(1)
}

// account returns expected, lost and duplicate deliveries given what each
// producer sent, over the producers of this subscriber's topic.
func (t *tracker) account(sent []uint64, producers []int) (expected, lost, dup uint64) {
	for _, p := range producers {
		s, got := sent[p], t.received[p]
		expected += s
		if s > got {
			lost += s - got
		} else {
			dup += got - s
		}
	}
	return
}
