// The pub/sub run: connect and subscribe, start producers (closed loop with
// a credit window, or open loop on a schedule), wait for every delivery,
// then compute the same figures as bench/src/pubsub.rs.
package main

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// drainIdle: after the producers stop, a subscriber silent this long gives up.
const drainIdle = 5 * time.Second

type producerReport struct {
	sent, measured, lastNs uint64
	err                    error
}

type sub struct {
	mu        sync.Mutex // held by the handler while it records; taken again to read the results
	t         *tracker
	producers []int
	topic     int
}

func run(o options) (*runResult, error) {
	epoch := time.Now()
	nowNs := func() uint64 { return uint64(time.Since(epoch).Nanoseconds()) }
	win := window{start: uint64(o.warmup.Nanoseconds()), end: math.MaxUint64}
	if o.count == 0 {
		win.end = win.start + uint64(o.duration.Nanoseconds())
	}
	o.measureStartNs, o.nowNs = win.start, nowNs
	cfg := config(o)
	r := newResult(o.system, o.ca != "", o.name, cfg)
	tr, err := newTransport(o)
	if err != nil {
		return nil, err
	}
	defer func() {
		if tr != nil {
			tr.close()
		}
	}()
	var subs []*sub
	subsOf := make([][]*sub, o.topics)
	for t := 0; t < o.topics; t++ {
		var producers []int
		for p := 0; p < o.producers; p++ {
			if p%o.topics == t {
				producers = append(producers, p)
			}
		}
		for i := 0; i < o.subscribers; i++ {
			s := &sub{t: newTracker(o.producers, win), producers: producers, topic: t}
			err := tr.subscribe(t, i, func(data []byte) {
				s.mu.Lock()
				s.t.observe(data, nowNs())
				s.mu.Unlock()
			})
			if err != nil {
				return nil, err
			}
			subs = append(subs, s)
			subsOf[t] = append(subsOf[t], s)
		}
	}

	sentToTopic := make([]atomic.Uint64, o.topics)
	window := uint64(o.maxInflightBytes / o.payload)
	if window < 64 {
		window = 64
	}
	slowest := func(t int) uint64 {
		m := uint64(math.MaxUint64)
		for _, s := range subsOf[t] {
			if v := s.t.total.Load(); v < m {
				m = v
			}
		}
		return m
	}
	perProducer := uint64(0)
	if o.count > 0 {
		perProducer = (o.count + uint64(o.producers) - 1) / uint64(o.producers)
	}
	filler := newFiller(o.payload)
	reports := make([]producerReport, o.producers)
	pubs := make([]publisher, o.producers)
	for p := range pubs {
		if pubs[p], err = tr.publisher(p); err != nil {
			return nil, err
		}
	}

	cpuBefore, cpuAfter := math.NaN(), math.NaN()
	selfBefore, selfAfter := math.NaN(), math.NaN()
	server := func() float64 {
		if o.serverPid > 0 {
			if v, err := processCPU(o.serverPid); err == nil {
				return v
			}
		}
		return math.NaN()
	}
	var cpuWG sync.WaitGroup
	cpuWG.Add(1)
	go func() {
		defer cpuWG.Done()
		time.Sleep(time.Until(epoch.Add(time.Duration(win.start))))
		cpuBefore, selfBefore = server(), selfCPU()
		if win.end != math.MaxUint64 {
			time.Sleep(time.Until(epoch.Add(time.Duration(win.end))))
			cpuAfter, selfAfter = server(), selfCPU()
		}
	}()

	var wg sync.WaitGroup
	for p := 0; p < o.producers; p++ {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			pub, t := pubs[p], p%o.topics
			rep := &reports[p]
			next := func(stampNs uint64) bool {
				if o.count == 0 {
					return stampNs < win.end
				}
				return stampNs < win.start || rep.measured < perProducer
			}
			interval := 0.0
			if o.rate > 0 {
				interval = 1e9 / (o.rate / float64(o.producers))
			}
			for {
				var stamp uint64
				if o.rate > 0 {
					stamp = uint64(float64(rep.sent) * interval)
					if !next(stamp) {
						break
					}
					if d := time.Duration(stamp) - time.Duration(nowNs()); d > 0 {
						time.Sleep(d)
					}
				} else {
					stamp = nowNs()
					if !next(stamp) {
						break
					}
					if rep.sent%16 == 0 {
						for sentToTopic[t].Load()-slowest(t) > window {
							time.Sleep(20 * time.Microsecond)
						}
					}
				}
				msg := encode(header{producer: uint32(p), seq: rep.sent, sendNs: stamp}, filler)
				if err := pub.publish(t, msg); err != nil {
					rep.err = err
					break
				}
				sentToTopic[t].Add(1)
				rep.sent++
				if stamp >= win.start {
					rep.measured++
					rep.lastNs = nowNs()
				}
			}
			if err := pub.flush(); err != nil && rep.err == nil {
				rep.err = err
			}
		}(p)
	}
	wg.Wait()
	sent := make([]uint64, o.producers)
	for p, rep := range reports {
		sent[p] = rep.sent
	}

	// Drain: wait until every subscriber has everything, or the limits pass.
	// JetStream under sync_interval: always serves a consumer's next pull only
	// after the stream's queued writes, each synced on its own: seconds with a
	// full ack window, so only the overall --drain-timeout applies.
	idle := drainIdle
	if o.kind == kindJetStream {
		idle = o.drainTimeout
	}
	deadline := time.Now().Add(o.drainTimeout)
	lastProgress, lastTotal := time.Now(), uint64(0)
	for time.Now().Before(deadline) {
		done, total := true, uint64(0)
		for _, s := range subs {
			s.mu.Lock()
			exp, _, _ := s.t.account(sent, s.producers)
			s.mu.Unlock()
			got := s.t.total.Load()
			total += got
			if got < exp {
				done = false
			}
		}
		if done {
			break
		}
		if total != lastTotal {
			lastProgress, lastTotal = time.Now(), total
		} else if time.Since(lastProgress) > idle {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	cpuWG.Wait()
	if win.end == math.MaxUint64 {
		cpuAfter, selfAfter = server(), selfCPU()
	}
	var errs []string
	// nsqd: were the connections encrypted as the label says?
	if v, ok := tr.(interface{ verify() error }); ok {
		if err := v.verify(); err != nil {
			errs = append(errs, err.Error())
		}
	}
	// JetStream: the stream is a file-store stream holding the run's messages.
	if v, ok := tr.(interface{ storeState() (string, error) }); ok {
		if s, err := v.storeState(); err != nil {
			errs = append(errs, err.Error())
		} else {
			r.store = s
		}
	}
	// Acked publishes: merge the producers' publish→ack histograms.
	var acks *hdrhistogram.Histogram
	for _, p := range pubs {
		if v, ok := p.(interface {
			ackLatency() *hdrhistogram.Histogram
		}); ok {
			if acks == nil {
				acks = newHistogram()
			}
			acks.Merge(v.ackLatency())
		}
	}
	if acks != nil {
		a := summarise(acks)
		r.AckLatencyUs = &a
	}
	// Stop the handlers before reading the trackers.
	tr.close()
	tr = nil

	for _, rep := range reports {
		if rep.err != nil {
			errs = append(errs, rep.err.Error())
		}
		r.Published += rep.measured
	}
	secs := func(end uint64) float64 {
		if end > win.end {
			end = win.end
		}
		if end <= win.start {
			return 0
		}
		return float64(end-win.start) / 1e9
	}
	var lastPub uint64
	for _, rep := range reports {
		if rep.lastNs > lastPub {
			lastPub = rep.lastNs
		}
	}
	pubSecs := secs(lastPub)
	hist := newHistogram()
	var lastRecv uint64
	for _, s := range subs {
		s.mu.Lock()
		exp, lost, dup := s.t.account(sent, s.producers)
		r.Expected += exp
		r.Lost += lost
		r.Duplicates += dup
		r.Reordered += s.t.reordered
		r.Delivered += s.t.inWindow
		if s.t.lastRecvNs > lastRecv {
			lastRecv = s.t.lastRecvNs
		}
		hist.Merge(s.t.latency)
		s.mu.Unlock()
	}
	delSecs := secs(lastRecv)
	r.ElapsedS = math.Max(pubSecs, delSecs)
	if pubSecs > 0 {
		r.PublishedMsgsPerS = float64(r.Published) / pubSecs
	}
	if delSecs > 0 {
		r.DeliveredMsgsPerS = float64(r.Delivered) / delSecs
	}
	r.DeliveredMBPerS = r.DeliveredMsgsPerS * float64(o.payload) / 1e6
	r.LatencyUs = summarise(hist)
	if !math.IsNaN(cpuBefore) && !math.IsNaN(cpuAfter) {
		v, src := math.Max(cpuAfter-cpuBefore, 0), "proc"
		r.BrokerCPUS, r.BrokerCPUSource = &v, &src
	}
	if !math.IsNaN(selfBefore) && !math.IsNaN(selfAfter) {
		v := math.Max(selfAfter-selfBefore, 0)
		r.ClientCPUS = &v
	}
	if r.Lost > 0 {
		errs = append(errs, fmt.Sprintf("lost %d of %d deliveries", r.Lost, r.Expected))
	}
	if r.Reordered > 0 {
		errs = append(errs, fmt.Sprintf("%d messages arrived out of order", r.Reordered))
	}
	if r.Duplicates > 0 {
		errs = append(errs, fmt.Sprintf("%d duplicate deliveries", r.Duplicates))
	}
	if len(errs) > 0 {
		f := strings.Join(errs, "; ")
		r.Failure = &f
	}
	return r, nil
}

func config(o options) runConfig {
	u := func(v int) *uint32 { x := uint32(v); return &x }
	f := func(v float64) *float64 { return &v }
	payload := o.payload
	policy := "inflight-window"
	c := runConfig{
		Producers:   u(o.producers),
		Subscribers: u(o.subscribers),
		Topics:      u(o.topics),
		Payload:     &payload,
		Batch:       u(o.batch),
		WarmupS:     f(o.warmup.Seconds()),
		Policy:      &policy,
	}
	if o.count > 0 {
		n := o.count
		c.Count = &n
	} else {
		c.DurationS = f(o.duration.Seconds())
	}
	if o.rate > 0 {
		c.Rate = f(o.rate)
	}
	if o.kind == kindJetStream {
		c.AckWindow = u(o.ackWindow)
	}
	return c
}
