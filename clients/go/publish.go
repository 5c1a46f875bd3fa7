package starling

// Publishing: single messages and batches, acknowledged or fire-and-forget
// within the publish window.

import (
	"context"
	"fmt"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/wire"
)

func checkTopic(topic string) error {
	if reason := wire.ValidateTopic(topic); reason != "" {
		return fmt.Errorf("%w: %q: %s", ErrInvalidTopic, topic, reason)
	}
	return nil
}

// Publish sends one message without waiting for the broker's ack. It returns
// once the message is queued on its stream; it waits while the stream is
// backed up or its publish window is full, and fails with ctx's error when
// ctx ends first (the message was then not sent). A refusal by the broker is
// not reported to the caller; use PublishAcked to know.
func (c *Client) Publish(ctx context.Context, topic string, payload []byte) error {
	return c.publishSingle(ctx, topic, payload, nil, false)
}

// PublishAcked sends one message and waits for the broker's PublishAck, given
// at the broker's ack_level (received, committed or persisted).
func (c *Client) PublishAcked(ctx context.Context, topic string, payload []byte) error {
	return c.publishSingle(ctx, topic, payload, nil, true)
}

// PublishBatch sends several messages to one topic in one frame (one frame
// each when the broker did not grant BATCH_PUBLISH). With acked it waits for
// the ack of the whole batch; without, it waits as Publish does.
func (c *Client) PublishBatch(ctx context.Context, topic string, payloads [][]byte, acked bool) error {
	if len(payloads) == 0 {
		return nil
	}
	return c.publish(ctx, topic, payloads, nil, true, acked)
}

// PublishMessage sends one message with its headers; with acked it waits
// for the broker's ack, else it returns as Publish does. Headers need a
// broker that grants HEADERS (ErrUnsupported otherwise, nothing sent), and
// names are checked first (ErrInvalidHeader). A broker refuses headers
// beyond its max_headers_per_message or max_header_bytes_per_message
// (ErrLimitExceeded); a durable topic keeps them in its log, a replicated
// one in its Raft entries. When ctx holds a span context, its trace fields
// are added (traceparent and tracestate with the W3C propagator; see
// trace.go), as for every publish, request and reply. A message with a message id
// (Message.WithMsgID) is de-duplicated by its topic and needs a broker that
// grants DEDUP (ErrUnsupported otherwise, nothing sent).
func (c *Client) PublishMessage(ctx context.Context, topic string, m Message, acked bool) error {
	if err := checkHeaders(m.Headers); err != nil {
		return err
	}
	return c.publishSingle(ctx, topic, m.Payload, m.Headers, acked)
}

// PublishMessages sends several messages with their headers to one topic in
// one frame, as PublishBatch does; headers as for PublishMessage. Each
// message may have its own message id: the broker drops each repeat on its
// own (an id repeated within the batch too) and delivers the others, and an
// acked batch of repeats only is acked once the originals were.
func (c *Client) PublishMessages(ctx context.Context, topic string, ms []Message, acked bool) error {
	if len(ms) == 0 {
		return nil
	}
	payloads := make([][]byte, len(ms))
	var hs []wire.IndexedHeaders
	for i, m := range ms {
		if err := checkHeaders(m.Headers); err != nil {
			return err
		}
		payloads[i] = m.Payload
		if len(m.Headers) > 0 {
			hs = append(hs, wire.IndexedHeaders{Index: uint32(i), Headers: m.Headers})
		}
	}
	return c.publish(ctx, topic, payloads, hs, true, acked)
}

// headersOf returns the headers of message i among hs (sorted by index).
func headersOf(hs []wire.IndexedHeaders, i int) []Header {
	for _, h := range hs {
		if int(h.Index) == i {
			return h.Headers
		}
	}
	return nil
}

// headersSize is the encoded size of a frame's header lists.
func headersSize(hs []wire.IndexedHeaders) int {
	if len(hs) == 0 {
		return 0
	}
	n := 4
	for _, e := range hs {
		n += 8
		for _, h := range e.Headers {
			n += 4 + len(h.Name) + len(h.Value)
		}
	}
	return n
}

// checkPublish checks the client is open and topic valid (the last topic
// published to is known valid).
func (c *Client) checkPublish(topic string) error {
	if err := c.open(); err != nil {
		return err
	}
	if last := c.lastTopic.Load(); last == nil || *last != topic {
		if err := checkTopic(topic); err != nil {
			return err
		}
		valid := topic
		c.lastTopic.Store(&valid)
	}
	return nil
}

var errNoHeaders = fmt.Errorf("%w: message headers (the broker did not grant HEADERS)", ErrUnsupported)

var errNoDedup = fmt.Errorf("%w: publish de-duplication by message id (the broker did not grant DEDUP; it would deliver a repeat)", ErrUnsupported)

// checkGranted refuses headers the stream's broker did not grant: any
// header without HEADERS, a message id without DEDUP.
func checkGranted(info ServerInfo, hs []wire.IndexedHeaders) error {
	if len(hs) == 0 {
		return nil
	}
	if !info.Has(wire.FeatureHeaders) {
		return errNoHeaders
	}
	if !info.Has(wire.FeatureDedup) {
		for _, e := range hs {
			if _, ok := wire.MsgID(e.Headers); ok {
				return errNoDedup
			}
		}
	}
	return nil
}

// publishSingle sends one message in a Publish frame: the hot path, which
// allocates nothing per fire-and-forget message.
func (c *Client) publishSingle(ctx context.Context, topic string, payload []byte, hs []Header, acked bool) error {
	return c.publishSingleVia(ctx, topic, []byte(topic), payload, hs, acked)
}

// publishSingleVia is publishSingle sent to the member that owns the topic
// key via (a reply goes where its request's subscription is).
func (c *Client) publishSingleVia(ctx context.Context, topic string, via []byte, payload []byte, hs []Header, acked bool) error {
	if err := c.checkPublish(topic); err != nil {
		return err
	}
	if acked {
		var cancel context.CancelFunc
		ctx, cancel = c.requestContext(ctx)
		defer cancel()
	}
	timeout := c.cfg.RequestTimeout
	err := c.routed(ctx, placement.Topic, via, func(n *node) error {
		s, err := n.publishStream(ctx, topic)
		if err != nil {
			return err
		}
		hs := hs
		if s.info.Has(wire.FeatureHeaders) {
			hs = withTrace(ctx, hs)
		}
		if len(hs) > 0 {
			if err := checkGranted(s.info, []wire.IndexedHeaders{{Headers: hs}}); err != nil {
				return err
			}
		}
		return publishOne(ctx, timeout, s, topic, payload, hs, acked)
	})
	if err != nil {
		return inOperation(err, "publish", []byte(topic))
	}
	return nil
}

func (c *Client) publish(ctx context.Context, topic string, payloads [][]byte, hs []wire.IndexedHeaders, batch, acked bool) error {
	if err := c.checkPublish(topic); err != nil {
		return err
	}
	if acked {
		var cancel context.CancelFunc
		ctx, cancel = c.requestContext(ctx)
		defer cancel()
	}
	// A fire-and-forget publish makes its timer only when it has to wait.
	timeout := c.cfg.RequestTimeout
	err := c.routed(ctx, placement.Topic, []byte(topic), func(n *node) error {
		s, err := n.publishStream(ctx, topic)
		if err != nil {
			return err
		}
		hs := hs
		if s.info.Has(wire.FeatureHeaders) {
			hs = withTraceEach(ctx, len(payloads), hs)
		}
		if err := checkGranted(s.info, hs); err != nil {
			return err
		}
		if !batch || !s.info.Has(wire.FeatureBatchPublish) {
			for i, p := range payloads {
				if err := publishOne(ctx, timeout, s, topic, p, headersOf(hs, i), acked); err != nil {
					return err
				}
			}
			return nil
		}
		if !acked {
			size := 8 + 1 + 2 + len(topic) + 4 + headersSize(hs)
			for _, p := range payloads {
				size += 4 + len(p)
			}
			return s.send(ctx, timeout, size, func(dst []byte, id uint64, ack wire.AckMode) []byte {
				f := wire.PublishBatch{RequestID: id, Ack: ack, Topic: topic, Payloads: payloads, Headers: hs}
				return wire.AppendPublishBatch(dst, &f)
			})
		}
		f, err := s.call(ctx, func(id uint64) wire.Frame {
			return &wire.PublishBatch{RequestID: id, Ack: wire.Ack, Topic: topic, Payloads: payloads, Headers: hs}
		})
		return expectAck(f, err, len(payloads))
	})
	return inOperation(err, "publish", []byte(topic))
}

func publishOne(ctx context.Context, timeout time.Duration, s *rpcStream, topic string, payload []byte, hs []Header, acked bool) error {
	if !acked {
		size := 8 + 1 + 2 + len(topic) + 4 + len(payload)
		if len(hs) > 0 {
			size += headersSize([]wire.IndexedHeaders{{Headers: hs}}) - 8
		}
		return s.send(ctx, timeout, size, func(dst []byte, id uint64, ack wire.AckMode) []byte {
			f := wire.Publish{RequestID: id, Ack: ack, Topic: topic, Payload: payload, Headers: hs}
			return wire.AppendPublish(dst, &f)
		})
	}
	f, err := s.call(ctx, func(id uint64) wire.Frame {
		return &wire.Publish{RequestID: id, Ack: wire.Ack, Topic: topic, Payload: payload, Headers: hs}
	})
	return expectAck(f, err, 1)
}

func expectAck(f wire.Frame, err error, count int) error {
	if err != nil {
		return err
	}
	ack, ok := f.(*wire.PublishAck)
	if !ok {
		return protocolErr("unexpected %s frame, expected publish_ack", f.Kind())
	}
	if int(ack.Count) != count {
		return protocolErr("publish_ack counts %d messages, %d were sent", ack.Count, count)
	}
	return nil
}
