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
	return c.publish(ctx, topic, [][]byte{payload}, false, false)
}

// PublishAcked sends one message and waits for the broker's PublishAck, given
// at the broker's ack_level (received, committed or persisted).
func (c *Client) PublishAcked(ctx context.Context, topic string, payload []byte) error {
	return c.publish(ctx, topic, [][]byte{payload}, false, true)
}

// PublishBatch sends several messages to one topic in one frame (one frame
// each when the broker did not grant BATCH_PUBLISH). With acked it waits for
// the ack of the whole batch; without, it waits as Publish does.
func (c *Client) PublishBatch(ctx context.Context, topic string, payloads [][]byte, acked bool) error {
	if len(payloads) == 0 {
		return nil
	}
	return c.publish(ctx, topic, payloads, true, acked)
}

func (c *Client) publish(ctx context.Context, topic string, payloads [][]byte, batch, acked bool) error {
	if err := c.open(); err != nil {
		return err
	}
	if last := c.lastTopic.Load(); last == nil || *last != topic {
		if err := checkTopic(topic); err != nil {
			return err
		}
		c.lastTopic.Store(&topic)
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
		if !batch || !s.info.Has(wire.FeatureBatchPublish) {
			for _, p := range payloads {
				if err := publishOne(ctx, timeout, s, topic, p, acked); err != nil {
					return err
				}
			}
			return nil
		}
		build := func(id uint64, ack wire.AckMode) wire.Frame {
			return &wire.PublishBatch{RequestID: id, Ack: ack, Topic: topic, Payloads: payloads}
		}
		if !acked {
			size := 8 + 1 + 2 + len(topic) + 4
			for _, p := range payloads {
				size += 4 + len(p)
			}
			return s.send(ctx, timeout, size, build)
		}
		f, err := s.call(ctx, func(id uint64) wire.Frame { return build(id, wire.Ack) })
		return expectAck(f, err, len(payloads))
	})
	return inOperation(err, "publish", []byte(topic))
}

func publishOne(ctx context.Context, timeout time.Duration, s *rpcStream, topic string, payload []byte, acked bool) error {
	build := func(id uint64, ack wire.AckMode) wire.Frame {
		return &wire.Publish{RequestID: id, Ack: ack, Topic: topic, Payload: payload}
	}
	if !acked {
		return s.send(ctx, timeout, 8+1+2+len(topic)+4+len(payload), build)
	}
	f, err := s.call(ctx, func(id uint64) wire.Frame { return build(id, wire.Ack) })
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
