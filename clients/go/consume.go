package starling

// Durable consumers (docs/consumers.md): Consume joins a named consumer of a
// durable topic as one member, on a stream of its own (docs/protocol.md,
// section 5.8). The broker keeps the consumer's progress (its ack floor and
// pending set), shares its messages among its members and redelivers what a
// member does not ack within the ack wait, or at once when the member's
// stream ends. A reader goroutine hands each ConsumerMessage to a bounded
// channel (a slow reader stops it reading, so QUIC flow control and the
// consumer's max_ack_pending push back on the broker); a writer goroutine
// writes the answers (ack, nak, in progress, term) from a bounded buffer, so
// an answer given while the broker is not reading waits instead of piling up.
// Unlike a Subscription, a Consumer does not reopen itself when its stream
// ends: Next returns the error, and the caller consumes again (what this
// member held is redelivered).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

// The defaults of the ConsumerOptions fields left zero (those of the Rust
// SDK's ConsumerConfig, so members of both agree on them).
const (
	DefaultAckWait       = 30 * time.Second
	DefaultMaxAckPending = 1000
)

// MaxBackoffSteps is the most entries of ConsumerOptions.Backoff.
const MaxBackoffSteps = wire.MaxBackoffSteps

// NakBackoff is the Nak delay that waits the consumer's backoff schedule
// (ConsumerOptions.Backoff; at once when it has none). Any negative delay
// means the same.
const NakBackoff time.Duration = -1

// consumerPendingBytes bounds the encoded answers a Consumer holds for its
// writer (about a thousand); past it an answer waits for the writer.
const consumerPendingBytes = 32 << 10

// ConsumerStart is where a new durable consumer starts reading its topic's
// log: ConsumeFirst (the zero value), ConsumeLast, ConsumeFromPosition or
// ConsumeFromTime. It is read only when the consumer is created; an existing
// consumer resumes at its ack floor.
type ConsumerStart = wire.ConsumerStart

// ConsumeFirst starts at the oldest message the topic's log holds.
func ConsumeFirst() ConsumerStart { return ConsumerStart{Kind: wire.ConsumerStartFirst} }

// ConsumeLast starts at the newest message the topic's log holds, and
// everything after it.
func ConsumeLast() ConsumerStart { return ConsumerStart{Kind: wire.ConsumerStartLast} }

// ConsumeFromPosition starts at position p (a record holding earlier events
// is read from p on); the zero Position is ConsumeFirst.
func ConsumeFromPosition(p Position) ConsumerStart {
	if p.Stream == 0 {
		return ConsumeFirst()
	}
	return ConsumerStart{Kind: wire.ConsumerStartPosition, Position: p}
}

// ConsumeFromTime starts at the first message the topic's owner stamped at
// or after t (Unix milliseconds on the owner's clock).
func ConsumeFromTime(t time.Time) ConsumerStart {
	return ConsumerStart{Kind: wire.ConsumerStartTime, TimeMs: uint64(max(t.UnixMilli(), 0))}
}

// ConsumerOptions are a durable consumer's settings; zero fields take the
// defaults. Every member of one consumer must give the same AckWait,
// MaxDeliver, MaxAckPending, Backoff and DeadLetter: the broker refuses a
// member whose settings differ from the consumer's (ErrInvalidRequest).
type ConsumerOptions struct {
	// AckWait is how long a delivery may stay unanswered before it is
	// redelivered; InProgress restarts it (0: DefaultAckWait, 30 s). It is
	// sent in whole milliseconds, at least one.
	AckWait time.Duration
	// MaxDeliver is the most deliveries of one message (0: no limit). Past
	// it the message is published to DeadLetter, if set, and resolved.
	MaxDeliver int
	// MaxAckPending is the most messages the consumer holds from its ack
	// floor on, pending or resolved out of order above the floor: its window
	// (0: DefaultMaxAckPending, 1000; at most the broker's
	// max_consumer_ack_pending, ErrLimitExceeded otherwise).
	MaxAckPending int
	// Backoff are the delays before a redelivery after the 1st, 2nd, …
	// failed delivery, the last repeating (none: at once); at most
	// MaxBackoffSteps, sent in whole milliseconds. A Nak with NakBackoff
	// uses it too.
	Backoff []time.Duration
	// DeadLetter is the topic messages past MaxDeliver are published to
	// ("": none); the user needs publish permission on it (ErrForbidden).
	DeadLetter string
	// Start is where a new consumer starts (zero: ConsumeFirst).
	Start ConsumerStart
}

// ValidateConsumer checks a durable consumer name: 1..64 bytes of
// A-Z a-z 0-9 - _ . (the queue-group rule). It returns nil or an error
// matching ErrInvalidConsumer.
func ValidateConsumer(name string) error {
	if reason := wire.ValidateConsumer(name); reason != "" {
		return fmt.Errorf("%w: %q: %s", ErrInvalidConsumer, name, reason)
	}
	return nil
}

// frame is the ConsumerOpen of consumer name of topic with these options,
// or an ErrInvalidConsumer error saying what is wrong.
func (o ConsumerOptions) frame(topic, name string) (*wire.ConsumerOpen, error) {
	if err := ValidateConsumer(name); err != nil {
		return nil, err
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: consumer %q: %s", ErrInvalidConsumer, name, fmt.Sprintf(format, args...))
	}
	f := &wire.ConsumerOpen{RequestID: 1, Topic: topic, Consumer: name, Start: o.Start, DeadLetter: o.DeadLetter}
	switch {
	case o.AckWait < 0:
		return nil, invalid("negative AckWait %s", o.AckWait)
	case o.AckWait == 0:
		f.AckWaitMs = uint64(DefaultAckWait.Milliseconds())
	default:
		f.AckWaitMs = uint64(max(o.AckWait.Milliseconds(), 1))
	}
	if o.MaxDeliver < 0 || uint64(o.MaxDeliver) > math.MaxUint32 {
		return nil, invalid("MaxDeliver %d is not within 0..%d", o.MaxDeliver, uint32(math.MaxUint32))
	}
	f.MaxDeliver = uint32(o.MaxDeliver)
	switch {
	case o.MaxAckPending < 0 || uint64(o.MaxAckPending) > math.MaxUint32:
		return nil, invalid("MaxAckPending %d is not within 0..%d", o.MaxAckPending, uint32(math.MaxUint32))
	case o.MaxAckPending == 0:
		f.MaxAckPending = DefaultMaxAckPending
	default:
		f.MaxAckPending = uint32(o.MaxAckPending)
	}
	if len(o.Backoff) > MaxBackoffSteps {
		return nil, invalid("%d backoff steps, at most %d", len(o.Backoff), MaxBackoffSteps)
	}
	for _, d := range o.Backoff {
		if d < 0 {
			return nil, invalid("negative backoff step %s", d)
		}
		f.BackoffMs = append(f.BackoffMs, uint64(d.Milliseconds()))
	}
	if o.DeadLetter != "" {
		if reason := wire.ValidateTopic(o.DeadLetter); reason != "" {
			return nil, invalid("dead-letter topic %q: %s", o.DeadLetter, reason)
		}
		if o.DeadLetter == topic {
			return nil, invalid("the dead-letter topic is the consumer's own topic")
		}
	}
	switch o.Start.Kind {
	case wire.ConsumerStartFirst, wire.ConsumerStartLast, wire.ConsumerStartTime:
	case wire.ConsumerStartPosition:
		if o.Start.Position.Stream == 0 {
			return nil, invalid("a start position with stream 0")
		}
	default:
		return nil, invalid("unknown start kind %d", o.Start.Kind)
	}
	return f, nil
}

// Delivery is one delivery of a consumer's message. Answer it once, with
// Ack, Nak or Term (InProgress first, any number of times, to keep it);
// unanswered, it is redelivered after the ack wait, or at once when the
// consumer's stream ends. A Delivery may be answered from any goroutine.
type Delivery struct {
	// Topic is the consumer's topic.
	Topic string
	// Position is the message's position in the topic.
	Position Position
	// DeliveryCount is which delivery of the message this is: 1 for the
	// first, more when it was redelivered (a member must be ready to see a
	// message twice).
	DeliveryCount uint32
	// Timestamp is when the message was written to the topic's log (the
	// owner's clock, millisecond precision).
	Timestamp time.Time
	// Payload is the message. It stays valid after later calls.
	Payload []byte
	// Headers are the message's headers as it was published, in order (nil
	// for none), on every delivery of it. The broker sends them only on a
	// connection it granted HEADERS; a message id (Message.WithMsgID) is
	// among them.
	Headers []Header

	consumer *Consumer
}

// Header returns the value of the message's first header named name.
func (d Delivery) Header(name string) (string, bool) { return headerValue(d.Headers, name) }

// MsgID is the message id its publisher gave the message
// (Message.WithMsgID), if any.
func (d Delivery) MsgID() (string, bool) { return wire.MsgID(d.Headers) }

// Ack says the message was processed: it is never delivered again. Like
// every answer it returns once the answer is queued for the stream (it
// waits, while ctx allows, only when the broker is not reading answers);
// nothing comes back from the broker, and Consumer.Close waits until the
// broker has read what was queued. An ack counts whichever member sends it,
// also after the message was redelivered to another member.
func (d Delivery) Ack(ctx context.Context) error { return d.answer(ctx, wire.OpAck, 0) }

// Nak asks for the message to be delivered again after delay (0: at once;
// NakBackoff or any negative delay: after the consumer's backoff schedule),
// counting as a failed delivery toward MaxDeliver. It counts only while this
// member still holds the delivery.
func (d Delivery) Nak(ctx context.Context, delay time.Duration) error {
	ms := wire.BackoffDelay
	if delay >= 0 {
		ms = uint64(delay.Milliseconds())
	}
	return d.answer(ctx, wire.OpNak, ms)
}

// InProgress says the member is still working on the message: its deadline
// is the ack wait from now again. It counts only while this member still
// holds the delivery.
func (d Delivery) InProgress(ctx context.Context) error {
	return d.answer(ctx, wire.OpInProgress, 0)
}

// Term says the message must never be delivered again, unprocessed (it is
// not dead-lettered).
func (d Delivery) Term(ctx context.Context) error { return d.answer(ctx, wire.OpTerm, 0) }

func (d Delivery) answer(ctx context.Context, op wire.ConsumerAckOp, delayMs uint64) error {
	if d.consumer == nil {
		return ErrClosed
	}
	return d.consumer.answer(ctx, &wire.ConsumerAck{Position: d.Position, Op: op, DelayMs: delayMs})
}

// memberStream is one consumer stream the broker accepted.
type memberStream struct {
	s  *quic.Stream
	rd *wire.Reader
	id uint64
}

// Consumer is one member of a durable consumer: its deliveries, in the order
// the broker sends them. Read it with Next or All, answer each Delivery, and
// Close it when done. It is safe for concurrent use: several goroutines may
// call Next and answer deliveries.
type Consumer struct {
	topic    string
	name     string
	memberID uint64
	st       *quic.Stream
	rd       *wire.Reader
	timeout  time.Duration

	deliveries chan Delivery
	closing    chan struct{} // Close was called
	aborted    chan struct{} // the stream was cancelled
	ended      chan struct{} // the reader finished (err is set)
	finished   chan struct{} // both goroutines finished
	closed     atomic.Bool
	closeOnce  sync.Once
	abortOnce  sync.Once
	unhook     func() bool

	mu  sync.Mutex
	err error

	// The answers not yet written: wmu guards wbuf, which the writer takes
	// whole; callers wait on drained while it is over consumerPendingBytes.
	wmu     sync.Mutex
	wbuf    []byte
	wspare  []byte
	wdone   bool
	werr    error
	wake    chan struct{}
	drained chan struct{}
}

// Consume joins the durable consumer name of the durable topic topic as a
// new member, creating the consumer (at opts.Start) if it does not exist,
// and returns once the broker accepted the member: a work queue with
// at-least-once delivery (docs/consumers.md). Each message goes to one
// member at a time and stays pending until a member acks (or terms) it; a
// message not answered within opts.AckWait, nak'd, or held by a member whose
// stream ended is delivered again, up to opts.MaxDeliver times, then goes to
// opts.DeadLetter. The consumer's ack floor survives broker restarts, so a
// later Consume of the same name continues after what was acked.
//
// The member is opened at the topic's owner; its stream does not reopen
// itself (see Consumer.Next). A consumer name or options breaking the rules
// give ErrInvalidConsumer, an invalid topic or a pattern ErrInvalidTopic,
// and a broker that does not grant CONSUMERS ErrUnsupported, all with
// nothing sent. The broker refuses a topic that is not durable, a replicated
// one, and settings that differ from the consumer's (ErrInvalidRequest), a
// topic the user may not subscribe to or a dead-letter topic it may not
// publish to (ErrForbidden), and its consumer budgets (ErrLimitExceeded).
func (c *Client) Consume(ctx context.Context, topic, name string, opts ConsumerOptions) (*Consumer, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if err := checkTopic(topic); err != nil {
		return nil, err
	}
	if IsPattern(topic) {
		return nil, fmt.Errorf("%w: %q: a consumer reads one durable topic, not a pattern", ErrInvalidTopic, topic)
	}
	open, err := opts.frame(topic, name)
	if err != nil {
		return nil, err
	}
	rctx, cancel := c.requestContext(ctx)
	defer cancel()
	var ms *memberStream
	err = c.routed(rctx, placement.Topic, []byte(topic), func(n *node) error {
		var err error
		ms, err = openConsumer(rctx, n, open, c.cfg.RequestTimeout)
		return err
	})
	if err != nil {
		return nil, inOperation(err, "consume", []byte(topic))
	}
	m := &Consumer{topic: topic, name: name, memberID: ms.id, st: ms.s, rd: ms.rd, timeout: c.cfg.RequestTimeout,
		deliveries: make(chan Delivery, c.cfg.SubscriptionBuffer),
		closing:    make(chan struct{}), aborted: make(chan struct{}), ended: make(chan struct{}),
		finished: make(chan struct{}), wake: make(chan struct{}, 1)}
	m.unhook = context.AfterFunc(c.ctx, m.abort)
	if !c.spawn(m.run) {
		m.unhook()
		m.abort()
		return nil, ErrClosed
	}
	return m, nil
}

// openConsumer opens a member stream on one of n's event connections and
// waits for the broker's ConsumerOk.
func openConsumer(ctx context.Context, n *node, open *wire.ConsumerOpen, timeout time.Duration) (*memberStream, error) {
	c, err := n.eventConn(ctx, open.Topic)
	if err != nil {
		return nil, err
	}
	if !c.info.Has(wire.FeatureConsumers) {
		return nil, fmt.Errorf("%w: durable consumers (the broker did not grant CONSUMERS)", ErrUnsupported)
	}
	st, err := c.q.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("starling: opening a stream: %w", err)
	}
	dl, ok := ctx.Deadline()
	if !ok {
		dl = time.Now().Add(timeout)
	}
	_ = st.SetDeadline(dl)
	stop := context.AfterFunc(ctx, func() { _ = st.SetDeadline(time.Now()) })
	defer stop()
	fail := func(err error) (*memberStream, error) {
		st.CancelRead(0)
		st.CancelWrite(0)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if err := wire.WriteFrame(st, open); err != nil {
		return fail(fmt.Errorf("starling: sending consumer_open: %w", linkErr(err)))
	}
	rd := wire.NewReader(st, c.info.MaxFrameBytes+responseSlack)
	f, err := rd.ReadFrame()
	if err != nil {
		return fail(fmt.Errorf("starling: reading consumer_ok: %w", linkErr(err)))
	}
	switch f := f.(type) {
	case *wire.ConsumerOk:
		if !stop() {
			return fail(ctx.Err())
		}
		_ = st.SetDeadline(time.Time{})
		return &memberStream{s: st, rd: rd, id: f.MemberID}, nil
	case *wire.Error:
		return fail(serverError(f))
	case *wire.Moved:
		return fail(movedError(f))
	}
	return fail(protocolErr("unexpected %s frame, expected consumer_ok", f.Kind()))
}

// Topic is the consumer's topic.
func (m *Consumer) Topic() string { return m.topic }

// Name is the consumer's name.
func (m *Consumer) Name() string { return m.name }

// MemberID is the broker's number for this member (in its logs and errors).
func (m *Consumer) MemberID() uint64 { return m.memberID }

// Next returns the next delivery, waiting for it while ctx allows. Once the
// consumer's stream ended it returns the deliveries still buffered (their
// answers fail: they are redelivered to other members), then the error that
// ended it (the broker's as a *ServerError, such as ErrUnavailable when the
// broker stops owning the topic; a broken connection; or ErrClosed when the
// broker finished the stream): consume again to go on. After Close it
// returns ErrClosed.
func (m *Consumer) Next(ctx context.Context) (Delivery, error) {
	if m.closed.Load() {
		return Delivery{}, ErrClosed
	}
	select {
	case d, ok := <-m.deliveries:
		if !ok {
			return Delivery{}, m.Err()
		}
		return d, nil
	case <-m.closing:
		return Delivery{}, ErrClosed
	case <-ctx.Done():
		return Delivery{}, ctx.Err()
	}
}

// All iterates over the deliveries until the consumer ends or ctx is done;
// the last pair carries the error that stopped it.
func (m *Consumer) All(ctx context.Context) iter.Seq2[Delivery, error] {
	return untilError(ctx, m.Next)
}

// Err is the error that ended the consumer's stream, nil while it runs.
func (m *Consumer) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Close leaves the consumer: it sends the answers already given, finishes
// the stream and waits (at most the request timeout) until the broker has
// read them and ended its side, so an ack given just before is not lost to
// a process that exits right after. What this member was delivered and did
// not answer is redelivered to the other members at once; deliveries still
// buffered are dropped, and answering one afterwards gives ErrClosed. Close
// returns an error only when the broker did not confirm in time (the answers
// may then be lost, and their messages redelivered).
func (m *Consumer) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		close(m.closing)
	})
	timer := time.NewTimer(m.timeout)
	defer timer.Stop()
	var err error
	select {
	case <-m.finished:
	case <-timer.C:
		m.abort()
		<-m.finished
		err = fmt.Errorf("%w: the broker did not confirm the consumer's answers within %s", ErrClosed, m.timeout)
	}
	m.unhook()
	return err
}

// abort cancels the stream: both goroutines end without waiting for the
// broker.
func (m *Consumer) abort() {
	m.abortOnce.Do(func() {
		close(m.aborted)
		m.st.CancelRead(0)
		m.st.CancelWrite(0)
	})
}

func (m *Consumer) run() {
	defer close(m.finished)
	var wg sync.WaitGroup
	wg.Go(m.writeLoop)
	m.readLoop()
	wg.Wait()
}

// readLoop hands each delivery to the channel until the stream ends. After
// Close it drops them (they are redelivered) and reads on until the broker
// ends its side.
func (m *Consumer) readLoop() {
	end := func(err error) {
		m.mu.Lock()
		m.err = err
		m.mu.Unlock()
		close(m.deliveries)
		close(m.ended)
	}
	for {
		f, err := m.rd.ReadFrame()
		if err != nil {
			switch {
			case errors.Is(err, io.EOF):
				err = fmt.Errorf("%w: the broker ended the consumer's stream", ErrClosed)
			default:
				err = inOperation(linkErr(err), "consume", []byte(m.topic))
			}
			end(err)
			return
		}
		switch f := f.(type) {
		case *wire.ConsumerMessage:
			d := Delivery{Topic: m.topic, Position: f.Position, DeliveryCount: f.Delivery,
				Timestamp: time.UnixMilli(int64(min(f.TimestampMs, math.MaxInt64))), Payload: f.Payload,
				Headers: f.Headers, consumer: m}
			select {
			case <-m.closing:
				continue
			default:
			}
			select {
			case m.deliveries <- d:
			case <-m.closing:
			case <-m.aborted:
			}
		case *wire.Ping:
			m.put(&wire.Pong{Nonce: f.Nonce})
		case *wire.Pong:
		case *wire.Error:
			end(inOperation(serverError(f), "consume", []byte(m.topic)))
			return
		case *wire.Moved:
			end(inOperation(movedError(f), "consume", []byte(m.topic)))
			return
		default:
			end(protocolErr("unexpected %s frame on a consumer stream", f.Kind()))
			return
		}
	}
}

// answer queues one answer for the writer, waiting (while ctx allows) while
// the queue is full.
func (m *Consumer) answer(ctx context.Context, a *wire.ConsumerAck) error {
	for {
		if m.closed.Load() {
			return ErrClosed
		}
		select {
		case <-m.ended:
			return m.Err()
		default:
		}
		m.wmu.Lock()
		if m.wdone {
			err := m.werr
			m.wmu.Unlock()
			if err == nil {
				err = ErrClosed
			}
			return err
		}
		if len(m.wbuf) < consumerPendingBytes {
			m.appendLocked(a)
			m.wmu.Unlock()
			return nil
		}
		if m.drained == nil {
			m.drained = make(chan struct{})
		}
		drained := m.drained
		m.wmu.Unlock()
		select {
		case <-drained:
		case <-m.closing:
			return ErrClosed
		case <-m.ended:
			return m.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put queues a frame of the client's own (a Pong) whatever the queue holds.
func (m *Consumer) put(f wire.Frame) {
	m.wmu.Lock()
	if !m.wdone {
		m.appendLocked(f)
	}
	m.wmu.Unlock()
}

func (m *Consumer) appendLocked(f wire.Frame) {
	first := len(m.wbuf) == 0
	m.wbuf = wire.Append(m.wbuf, f)
	if first {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
}

// take hands the writer the queued answers (and wakes waiting callers);
// last marks the writer finished, so later answers fail.
func (m *Consumer) take(last bool) []byte {
	m.wmu.Lock()
	defer m.wmu.Unlock()
	buf := m.wbuf
	m.wbuf, m.wspare = m.wspare[:0], nil
	if last {
		m.wdone = true
	}
	if m.drained != nil {
		close(m.drained)
		m.drained = nil
	}
	return buf
}

// writeLoop writes the queued answers until Close (then it writes what is
// queued and finishes the stream) or the end of the stream.
func (m *Consumer) writeLoop() {
	for {
		last := false
		select {
		case <-m.wake:
		case <-m.closing:
			last = true
		case <-m.ended:
			last = true
		case <-m.aborted:
			m.take(true)
			return
		}
		buf := m.take(last)
		if len(buf) > 0 {
			if _, err := m.st.Write(buf); err != nil {
				m.wmu.Lock()
				m.wdone, m.werr = true, fmt.Errorf("starling: consumer stream write: %w", linkErr(err))
				m.wmu.Unlock()
				return
			}
		}
		if last {
			_ = m.st.Close()
			return
		}
		m.wmu.Lock()
		if cap(buf) <= 4*consumerPendingBytes {
			m.wspare = buf[:0]
		}
		m.wmu.Unlock()
	}
}
