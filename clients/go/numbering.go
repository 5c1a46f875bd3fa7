package starling

// Event numbering of a subscription: drops the events a replay sends twice
// (wire.SeenStreams), gives the rest one continuous sequence, and counts the
// events the broker dropped for a slow subscriber (gaps within a stream,
// except on a queue-group member, whose gaps are the other members' share).

import "starling.invalid/starling/wire"

// Position is where an event sits in its topic's streams, as numbered by the
// topic's owner; the same wherever the event is delivered.
type Position = wire.Position

// Event is one delivered message.
type Event struct {
	// Topic is the topic the message was published to: the subscribed
	// topic, or on a wildcard subscription the matching topic's name.
	Topic string
	// Seq is this subscription's own sequence number of the event:
	// consecutive, except for gaps where the broker dropped events for this
	// subscriber. It starts at the broker's number of the first event.
	Seq uint64
	// Subscription is the topic or pattern of the subscription that received
	// the event (Topic again on a plain subscription). Reply answers a
	// request through the broker the subscription is at, which knows the
	// request was delivered.
	Subscription string
	// Position is the event's position; one past it is the resume point.
	Position Position
	// Payload is the published message. It stays valid after later calls.
	Payload []byte
	// Headers are the message's headers (nil for none): on live events,
	// and on events a resuming subscriber is replayed from a durable
	// topic's log; events replayed from the retained tail in memory
	// (replay_window_ms) come without them.
	Headers []Header
}

// Header returns the value of the event's first header named name.
func (e Event) Header(name string) (string, bool) { return headerValue(e.Headers, name) }

// ReplyTo is the reply inbox of a request (its reply-to header), "" when
// the event is not a request.
func (e Event) ReplyTo() string {
	v, _ := headerValue(e.Headers, ReplyToHeader)
	return v
}

// MsgID is the message id its publisher gave the event (Message.WithMsgID),
// if any; where Headers are given, as every header.
func (e Event) MsgID() (string, bool) { return wire.MsgID(e.Headers) }

// Message is the event's payload and headers.
func (e Event) Message() Message { return Message{Payload: e.Payload, Headers: e.Headers} }

type numbering struct {
	topic   string
	seen    wire.SeenStreams
	last    Position
	hasLast bool
	nextSeq uint64
	started bool
	dropped uint64
	// shared: a queue-group member's numbering, whose gaps are the other
	// members' events: neither counted as dropped nor left in Seq.
	shared bool
}

// newNumbering counts everything before a resume point as received.
func newNumbering(resume Position) numbering {
	var n numbering
	if resume.Stream != 0 {
		n.seen.Skip(Position{Stream: resume.Stream}, int(min(resume.Seq, 1<<62)))
		n.last, n.hasLast = resume, true
	}
	return n
}

func (n *numbering) number(d delivery, out []Event) []Event {
	b := d.batch
	skip := n.seen.Skip(Position{Stream: b.Stream, Seq: b.FirstSeq}, len(b.Events))
	events := b.Events[min(skip, len(b.Events)):]
	if len(events) == 0 {
		return out
	}
	first := b.FirstSeq + uint64(skip)
	var gap uint64
	if n.hasLast && n.last.Stream == b.Stream && first > n.last.Seq && !n.shared {
		gap = first - n.last.Seq
	}
	n.dropped += gap
	seq0 := first
	if n.started {
		seq0 = n.nextSeq + gap
	}
	k := uint64(len(events))
	n.last, n.hasLast = Position{Stream: b.Stream, Seq: first + k}, true
	n.nextSeq, n.started = seq0+k, true
	base := len(out)
	for i, p := range events {
		out = append(out, Event{Topic: n.topic, Seq: seq0 + uint64(i), Position: Position{Stream: b.Stream, Seq: first + uint64(i)}, Payload: p})
	}
	for _, h := range d.headers {
		if i := int(h.Index) - skip; i >= 0 && i < len(events) {
			out[base+i].Headers = h.Headers
		}
	}
	return out
}

// resumePoint follows one past the last event relayed, in the newest stream
// seen (stream ids grow with their start time); a replay never moves it back.
type resumePoint struct {
	p Position
}

func (r *resumePoint) advance(stream, firstSeq uint64, n int) {
	end := firstSeq + uint64(n)
	switch {
	case r.p.Stream == stream:
		r.p.Seq = max(r.p.Seq, end)
	case r.p.Stream > stream:
	default:
		r.p = Position{Stream: stream, Seq: end}
	}
}
