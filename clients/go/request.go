package starling

// Request/reply (the REQUEST feature, docs/subjects.md "Request and reply"):
// the client's reply inbox and the requests waiting on it, Reply and the
// Respond loop.
//
// A client has one inbox, _INBOX.<token>.> with a random 128-bit token,
// subscribed on its first request. Request n names _INBOX.<token>.<n> in
// its reply-to header; a reply published there arrives on the inbox
// subscription and goes to the request its last token numbers. A reply to a
// request no longer waiting (it timed out) is dropped.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"starling.invalid/starling/wire"
)

// inboxPrefix is the first token of every reply inbox topic.
const inboxPrefix = "_INBOX"

// inbox is a client's reply inbox.
type inbox struct {
	token string
	next  atomic.Uint64

	mu      sync.Mutex
	sub     *Subscription
	waiting map[uint64]chan Message
}

func newInbox() *inbox {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go >= 1.24)
	return &inbox{token: hex.EncodeToString(b[:]), waiting: map[uint64]chan Message{}}
}

// ensure subscribes the inbox on first use (again when its subscription
// ended) and starts the goroutine routing its replies.
func (in *inbox) ensure(ctx context.Context, c *Client) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.sub != nil && in.sub.Err() == nil {
		return nil
	}
	sub, err := c.Subscribe(ctx, inboxPrefix+"."+in.token+".>", Live())
	if err != nil {
		return err
	}
	if !c.spawn(func() { in.route(c.ctx, sub) }) {
		_ = sub.Close()
		return ErrClosed
	}
	in.sub = sub
	return nil
}

// route hands each reply to the request its topic's last token numbers,
// until the subscription ends.
func (in *inbox) route(ctx context.Context, sub *Subscription) {
	defer func() { _ = sub.Close() }()
	for {
		e, err := sub.Next(ctx)
		if err != nil {
			return
		}
		n, err := strconv.ParseUint(e.Topic[strings.LastIndexByte(e.Topic, '.')+1:], 10, 64)
		if err != nil {
			continue
		}
		in.mu.Lock()
		ch, ok := in.waiting[n]
		delete(in.waiting, n)
		in.mu.Unlock()
		if ok {
			ch <- e.Message()
		}
	}
}

// open numbers a new request: its inbox topic and the channel of its reply.
func (in *inbox) open() (uint64, string, chan Message) {
	n := in.next.Add(1)
	ch := make(chan Message, 1)
	in.mu.Lock()
	in.waiting[n] = ch
	in.mu.Unlock()
	return n, inboxPrefix + "." + in.token + "." + strconv.FormatUint(n, 10), ch
}

// close forgets request n (answered, refused or given up).
func (in *inbox) close(n uint64) {
	in.mu.Lock()
	delete(in.waiting, n)
	in.mu.Unlock()
}

// Request sends payload to topic as a request and waits for the first
// reply, as RequestMessage does.
func (c *Client) Request(ctx context.Context, topic string, payload []byte) (Message, error) {
	return c.RequestMessage(ctx, topic, Message{Payload: payload})
}

// RequestMessage publishes m to topic with a reply-to header naming this
// client's reply inbox (subscribed on the first request) and waits for the
// first reply published there, until ctx is done, or, when ctx has no
// deadline, for the request timeout (ctx's error then). It fails at once
// with an error matching ErrNoResponders when nothing subscribes to topic.
// Needs a broker that grants REQUEST (ErrUnsupported otherwise, nothing
// sent). In a cluster the topic's owner decides ErrNoResponders, and the
// inbox is fed from every member, so requester and responder may be at
// different brokers.
func (c *Client) RequestMessage(ctx context.Context, topic string, m Message) (Message, error) {
	if err := c.open(); err != nil {
		return Message{}, err
	}
	if !c.bootstrap.info.Has(wire.FeatureRequest) {
		return Message{}, fmt.Errorf("%w: request/reply (the broker did not grant REQUEST)", ErrUnsupported)
	}
	if err := checkTopic(topic); err != nil {
		return Message{}, err
	}
	if err := checkHeaders(m.Headers); err != nil {
		return Message{}, err
	}
	ctx, cancel := c.requestContext(ctx)
	defer cancel()
	if err := c.inbox.ensure(ctx, c); err != nil {
		return Message{}, err
	}
	n, topicOfReply, reply := c.inbox.open()
	defer c.inbox.close(n)
	hs := make([]Header, 0, len(m.Headers)+1)
	hs = append(hs, m.Headers...)
	hs = append(hs, Header{Name: ReplyToHeader, Value: topicOfReply})
	if err := c.PublishMessage(ctx, topic, Message{Payload: m.Payload, Headers: hs}, true); err != nil {
		return Message{}, err
	}
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		return Message{}, ctx.Err()
	}
}

// Reply answers request req (an event with a reply-to header, as Request
// sends) with payload: it publishes to the request's inbox through the
// broker that delivered req (in a cluster, the one its subscription is at:
// Event.Subscription) and waits for the broker's ack. The broker allows it when req was delivered to this
// user recently (its max_reply_inboxes_per_user latest requests) or the
// user may publish there; else ErrForbidden. ErrNotARequest for an event
// without reply-to.
func (c *Client) Reply(ctx context.Context, req Event, payload []byte) error {
	return c.ReplyMessage(ctx, req, Message{Payload: payload})
}

// ReplyMessage answers request req with m, headers included, as Reply does.
func (c *Client) ReplyMessage(ctx context.Context, req Event, m Message) error {
	to := req.ReplyTo()
	if to == "" {
		return ErrNotARequest
	}
	if err := checkHeaders(m.Headers); err != nil {
		return err
	}
	via := req.Subscription
	if via == "" {
		via = to
	}
	return c.publishSingleVia(ctx, to, []byte(via), m.Payload, m.Headers, true)
}

// Respond answers every request on topic (or pattern) with what handler
// returns, one request at a time on the caller's goroutine, until ctx is
// done (it returns nil then), the subscription fails or a reply is refused
// (that error). Events without reply-to are skipped; when handler returns
// an error the request gets no reply (its requester times out).
func (c *Client) Respond(ctx context.Context, topic string, handler func(context.Context, Event) (Message, error)) error {
	return c.SubscribeFunc(ctx, topic, Live(), func(e Event) error {
		if e.ReplyTo() == "" {
			return nil
		}
		m, err := handler(ctx, e)
		if err != nil {
			return nil
		}
		if err := c.ReplyMessage(ctx, e, m); err != nil && ctx.Err() == nil {
			return err
		}
		return nil
	})
}
