package starling

// Subscriptions: one stream each. A goroutine per subscription reads its
// EventBatch frames into a bounded channel (a slow reader stops it reading,
// so QUIC flow control pushes back on the broker, which then applies its
// slow-subscriber policy), answers Pings, and, when the stream ends without
// the user asking (the owner moved or drained, the connection broke),
// subscribes again at the topic's owner of the moment, resuming from one past
// the last event it received. A wildcard subscription (a pattern such as
// orders.* or orders.>, docs/subjects.md) is live only: each batch comes
// after a BatchTopic naming its topic, its events are numbered per topic, and
// it resubscribes live. A queue-group subscription (group.go) is live only
// too, and its positions' gaps are the other members' share, not drops.

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

// StartAt is where a subscription starts: Live, FromPosition or FromTime.
type StartAt = wire.StartAt

// Live takes only the events published after the subscription is registered.
func Live() StartAt { return StartAt{Kind: wire.StartLive} }

// FromPosition resumes at p, the next event wanted (a ResumePoint of an
// earlier subscription): the broker first replays what it still holds.
func FromPosition(p Position) StartAt {
	if p.Stream == 0 {
		return Live()
	}
	return StartAt{Kind: wire.StartPosition, Position: p}
}

// FromTime starts at the first event the topic's owner stamped at or after
// t (Unix milliseconds on the owner's clock), then continues live. Needs a
// broker that grants SUBSCRIBE_FROM_TIME.
func FromTime(t time.Time) StartAt {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	return StartAt{Kind: wire.StartTime, TimeMs: uint64(ms)}
}

// IsPattern reports whether topic is a subscription pattern: one of its
// '.'-separated tokens is `*` or `>` (docs/subjects.md).
func IsPattern(topic string) bool {
	for tok := range strings.SplitSeq(topic, ".") {
		if tok == "*" || tok == ">" {
			return true
		}
	}
	return false
}

// resubscribePause is the pause between resubscription attempts.
const resubscribePause = 200 * time.Millisecond

// subStream is one open subscription stream.
type subStream struct {
	s  *quic.Stream
	id uint64
	rd *wire.Reader
}

// delivery is one EventBatch with what preceded it on the stream: its topic
// (BatchTopic, wildcard subscriptions only) and its messages' headers
// (EventHeaders).
type delivery struct {
	batch   *wire.EventBatch
	topic   string
	headers []wire.IndexedHeaders
}

// Subscription is a subscription to one topic or pattern. Read it with Next
// or All; Close ends it. It is not safe for concurrent readers.
type Subscription struct {
	topic    string
	wildcard bool
	group    string // the queue group joined, "" for none
	batches  chan delivery
	stop     context.CancelFunc
	done     chan struct{}

	mu     sync.Mutex
	err    error
	id     uint64
	closed atomic.Bool

	ready   []Event // the numbered events of the last batch, reused
	readyAt int     // the next of them Next returns
	num     numbering
	resume  Position
	started StartAt
	// perTopic numbers a wildcard subscription's events, one numbering per
	// topic (its topics are those the broker delivers; each has streams of
	// its own).
	perTopic map[string]*numbering
	// forgotten is the dropped count of numberings cleared from perTopic.
	forgotten uint64
}

// maxTopicNumberings bounds a wildcard subscription's numberings: past it
// they are all forgotten (each topic's numbering restarts from the broker's
// sequence numbers), so a pattern matching ever new topics (a reply inbox
// gets one per request) does not grow without bound.
const maxTopicNumberings = 4096

// Topic is the subscribed topic or pattern.
func (s *Subscription) Topic() string { return s.topic }

// IsWildcard reports whether the subscription is to a pattern.
func (s *Subscription) IsWildcard() bool { return s.wildcard }

// Group is the queue group the subscription joined (SubscribeGroup), "" for
// a plain subscription.
func (s *Subscription) Group() string { return s.group }

// ID is the broker's id of the current subscription stream.
func (s *Subscription) ID() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// DroppedEvents is how many events the broker dropped for this subscriber so
// far (gaps within a stream; on a wildcard subscription, summed over its
// topics). A queue-group member's gaps are the other members' share: they
// are not counted, so it stays 0.
func (s *Subscription) DroppedEvents() uint64 {
	n := s.num.dropped + s.forgotten
	for _, t := range s.perTopic {
		n += t.dropped
	}
	return n
}

// ResumePoint is one past the last event Next returned (or the position the
// subscription was opened with); the zero Position before any event of a
// live or time subscription. Pass it to FromPosition to continue. A wildcard
// subscription cannot be resumed: its ResumePoint stays zero. A queue-group
// member's ResumePoint follows its own events but is of no use to
// FromPosition for the group: a group subscription is live only.
func (s *Subscription) ResumePoint() Position { return s.resume }

// Next returns the next event, waiting for it while ctx allows. After the
// subscription ended it returns the error that ended it; after Close,
// ErrClosed (events still buffered are dropped).
func (s *Subscription) Next(ctx context.Context) (Event, error) {
	if s.closed.Load() {
		return Event{}, ErrClosed
	}
	for s.readyAt == len(s.ready) {
		select {
		case d, ok := <-s.batches:
			if !ok {
				return Event{}, s.Err()
			}
			s.ready, s.readyAt = s.numberOf(d).number(d, s.ready[:0]), 0
		case <-ctx.Done():
			return Event{}, ctx.Err()
		}
	}
	e := s.ready[s.readyAt]
	s.ready[s.readyAt] = Event{}
	s.readyAt++
	e.Subscription = s.topic
	if !s.wildcard {
		s.resume = Position{Stream: e.Position.Stream, Seq: e.Position.Seq + 1}
	}
	return e, nil
}

// numberOf is the numbering of d's topic.
func (s *Subscription) numberOf(d delivery) *numbering {
	if !s.wildcard {
		return &s.num
	}
	n, ok := s.perTopic[d.topic]
	if !ok {
		if len(s.perTopic) >= maxTopicNumberings {
			for _, t := range s.perTopic {
				s.forgotten += t.dropped
			}
			clear(s.perTopic)
		}
		n = &numbering{topic: d.topic, shared: s.group != ""}
		s.perTopic[d.topic] = n
	}
	return n
}

// All iterates over the events until the subscription ends or ctx is done;
// the last pair carries the error that stopped it.
func (s *Subscription) All(ctx context.Context) iter.Seq2[Event, error] {
	return untilError(ctx, s.Next)
}

// untilError iterates over what next returns until it returns an error,
// which the last pair carries, or the caller stops.
func untilError[T any](ctx context.Context, next func(context.Context) (T, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			v, err := next(ctx)
			if !yield(v, err) || err != nil {
				return
			}
		}
	}
}

// Err is the error that ended the subscription, nil while it runs.
func (s *Subscription) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Close sends Unsubscribe, ends the stream and waits for the subscription's
// goroutine to finish.
func (s *Subscription) Close() error {
	s.closed.Store(true)
	s.stop()
	<-s.done
	return nil
}

// Subscribe subscribes to topic from start; it returns once a broker
// accepted the subscription. The subscription outlives its stream: when it
// ends without Close (the broker drained or restarted, the topic's owner
// moved, the connection broke) it subscribes again at the owner of the
// moment from one past the last event received, and ends with an error only
// when no broker accepted it within three request timeouts.
//
// topic may be a pattern (docs/subjects.md): `*` as a whole token matches
// exactly one token (orders.*), `>` as the last token one or more
// (orders.>). The subscription then receives the live events of every
// matching topic, existing or created later, each Event naming its topic.
// A pattern needs a broker that grants WILDCARDS (ErrUnsupported
// otherwise, nothing sent) and start Live (ErrInvalidTopic otherwise), and
// it resubscribes live. In a cluster the broker the subscription is at gets
// the matching topics from every member.
func (c *Client) Subscribe(ctx context.Context, topic string, start StartAt) (*Subscription, error) {
	return c.subscribe(ctx, topic, start, "")
}

// subscribe is Subscribe, joining group unless it is "" (then start must be
// Live: SubscribeGroup checked it and the name).
func (c *Client) subscribe(ctx context.Context, topic string, start StartAt, group string) (*Subscription, error) {
	if err := c.open(); err != nil {
		return nil, err
	}
	if reason := wire.ValidateTopic(topic); reason != "" {
		return nil, fmt.Errorf("%w: %q: %s", ErrInvalidTopic, topic, reason)
	}
	wildcard := IsPattern(topic)
	if wildcard && start.Kind != wire.StartLive {
		return nil, fmt.Errorf("%w: %q: a wildcard subscription is live only (no resume position or start time)", ErrInvalidTopic, topic)
	}
	first, err := c.subscribeRouted(ctx, topic, start, group)
	if err != nil {
		return nil, err
	}
	runCtx, stop := context.WithCancel(context.Background())
	s := &Subscription{topic: topic, wildcard: wildcard, group: group, batches: make(chan delivery, c.cfg.SubscriptionBuffer),
		stop: stop, done: make(chan struct{}), id: first.id, started: start,
		num: newNumbering(start.Position), resume: start.Position}
	s.num.topic, s.num.shared = topic, group != ""
	if wildcard {
		s.perTopic = map[string]*numbering{}
	}
	unhook := context.AfterFunc(c.ctx, stop)
	if !c.spawn(func() {
		defer unhook()
		s.run(runCtx, c, first)
	}) {
		stop()
		unhook()
		first.s.CancelRead(0)
		first.s.CancelWrite(0)
		return nil, ErrClosed
	}
	return s, nil
}

// SubscribeFunc subscribes to topic from start and calls fn with every event
// until ctx is done (it returns nil then), fn returns an error (returned), or
// the subscription fails (its error). fn runs on the caller's goroutine, one
// event at a time: while it runs no more events are read, which pushes back
// on the broker.
func (c *Client) SubscribeFunc(ctx context.Context, topic string, start StartAt, fn func(Event) error) error {
	sub, err := c.Subscribe(ctx, topic, start)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Close() }()
	for e, err := range sub.All(ctx) {
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return nil
}

// subscribeRouted opens a subscription stream at the topic's owner,
// following Moved and Unavailable answers.
func (c *Client) subscribeRouted(ctx context.Context, topic string, start StartAt, group string) (*subStream, error) {
	ctx, cancel := c.requestContext(ctx)
	defer cancel()
	var out *subStream
	err := c.routed(ctx, placement.Topic, []byte(topic), func(n *node) error {
		s, err := openSubscription(ctx, n, topic, start, group)
		out = s
		return err
	})
	return out, inOperation(err, "subscribe", []byte(topic))
}

func openSubscription(ctx context.Context, n *node, topic string, start StartAt, group string) (*subStream, error) {
	c, err := n.eventConn(ctx, topic)
	if err != nil {
		return nil, err
	}
	if start.Kind == wire.StartTime && !c.info.Has(wire.FeatureSubscribeFromTime) {
		return nil, fmt.Errorf("%w: subscribing from a time (the broker did not grant SUBSCRIBE_FROM_TIME)", ErrUnsupported)
	}
	if IsPattern(topic) && !c.info.Has(wire.FeatureWildcards) {
		return nil, fmt.Errorf("%w: wildcard subscription %q (the broker did not grant WILDCARDS)", ErrUnsupported, topic)
	}
	if group != "" && !c.info.Has(wire.FeatureQueueGroups) {
		return nil, fmt.Errorf("%w: queue group %q (the broker did not grant QUEUE_GROUPS)", ErrUnsupported, group)
	}
	st, err := c.q.OpenStreamSync(ctx)
	if err != nil {
		return nil, fmt.Errorf("starling: opening a stream: %w", err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = st.SetDeadline(dl)
	}
	fail := func(err error) (*subStream, error) {
		st.CancelRead(0)
		st.CancelWrite(0)
		return nil, err
	}
	if err := wire.WriteFrame(st, &wire.Subscribe{RequestID: 1, Topic: topic, Start: start, Group: group}); err != nil {
		return fail(fmt.Errorf("starling: sending Subscribe: %w", err))
	}
	rd := wire.NewReader(st, c.info.MaxFrameBytes+responseSlack)
	f, err := rd.ReadFrame()
	if err != nil {
		return fail(fmt.Errorf("starling: reading subscribe_ok: %w", err))
	}
	_ = st.SetDeadline(time.Time{})
	switch f := f.(type) {
	case *wire.SubscribeOk:
		return &subStream{s: st, id: f.SubscriptionID, rd: rd}, nil
	case *wire.Error:
		return fail(serverError(f))
	case *wire.Moved:
		return fail(movedError(f))
	}
	return fail(protocolErr("unexpected %s frame, expected subscribe_ok", f.Kind()))
}

// run relays the subscription's batches until ctx is cancelled, resubscribing
// when a stream ends on its own.
func (s *Subscription) run(ctx context.Context, c *Client, cur *subStream) {
	defer close(s.done)
	defer close(s.batches)
	var rp resumePoint
	if s.started.Kind == wire.StartPosition {
		rp.p = s.started.Position
	}
	for {
		err := s.pump(ctx, cur, &rp)
		if ctx.Err() != nil {
			s.finish(ErrClosed)
			return
		}
		if !transient(err) {
			s.finish(inOperation(err, "subscribe", []byte(s.topic)))
			return
		}
		from := s.started
		if rp.p.Stream != 0 && !s.wildcard && s.group == "" {
			from = FromPosition(rp.p)
		}
		deadline := time.Now().Add(3 * c.cfg.RequestTimeout)
		for cur = nil; cur == nil; {
			next, err := c.subscribeRouted(ctx, s.topic, from, s.group)
			switch {
			case err == nil:
				cur = next
				s.mu.Lock()
				s.id = next.id
				s.mu.Unlock()
			case ctx.Err() != nil:
				s.finish(ErrClosed)
				return
			case !transient(err) || time.Now().After(deadline):
				s.finish(err)
				return
			default:
				select {
				case <-time.After(resubscribePause):
				case <-ctx.Done():
				}
			}
		}
	}
}

func (s *Subscription) finish(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

// pump reads one stream until it ends (the error says why) or ctx is
// cancelled (then it unsubscribes).
func (s *Subscription) pump(ctx context.Context, cur *subStream, rp *resumePoint) error {
	stopRead := context.AfterFunc(ctx, func() { _ = cur.s.SetReadDeadline(time.Now()) })
	defer stopRead()
	defer func() {
		if ctx.Err() != nil {
			_ = cur.s.SetWriteDeadline(time.Now().Add(time.Second))
			_ = wire.WriteFrame(cur.s, &wire.Unsubscribe{RequestID: 2, SubscriptionID: cur.id})
			_ = cur.s.Close()
		}
		cur.s.CancelRead(0)
	}()
	var next delivery
	for {
		f, err := cur.rd.ReadFrame()
		if err != nil {
			return linkErr(err)
		}
		switch f := f.(type) {
		case *wire.EventBatch:
			if s.wildcard && next.topic == "" {
				return protocolErr("an event_batch without its batch_topic on a wildcard subscription")
			}
			if n := len(next.headers); n > 0 && int(next.headers[n-1].Index) >= len(f.Events) {
				return protocolErr("event_headers index %d past the batch's %d events", next.headers[n-1].Index, len(f.Events))
			}
			next.batch = f
			select {
			case s.batches <- next:
				if !s.wildcard {
					rp.advance(f.Stream, f.FirstSeq, len(f.Events))
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			next = delivery{}
		case *wire.BatchTopic:
			if !s.wildcard {
				return protocolErr("a batch_topic on a subscription to one topic")
			}
			next.topic = f.Topic
		case *wire.EventHeaders:
			next.headers = f.Entries
		case *wire.Ping:
			if err := wire.WriteFrame(cur.s, &wire.Pong{Nonce: f.Nonce}); err != nil {
				return err
			}
		case *wire.Pong:
		case *wire.Error:
			return serverError(f)
		case *wire.Moved:
			return movedError(f)
		default:
			return protocolErr("unexpected %s frame on a subscription", f.Kind())
		}
	}
}

// transient reports whether a subscription that ended with err may be
// resumed elsewhere: a broken link, or the broker moving or draining it.
func transient(err error) bool {
	var se *ServerError
	if errors.As(err, &se) {
		switch se.Code {
		case wire.CodeMoved, wire.CodeUnavailable, wire.CodeOverloaded, wire.CodeInternal:
			return true
		}
		return false
	}
	var de *wire.DecodeError
	if errors.As(err, &de) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrConfig) ||
		errors.Is(err, ErrUnsupported) || errors.Is(err, ErrInvalidTopic) || errors.Is(err, ErrInvalidGroup) {
		return false
	}
	return true
}
