package starling

// Queue groups (docs/queue-groups.md): SubscribeGroup joins a group of a
// topic or pattern, whose members share its messages, each message going to
// exactly one live member, while plain subscribers still get every message.

import (
	"context"
	"fmt"

	"starling.invalid/starling/wire"
)

// ValidateGroup checks a queue-group name: 1..64 bytes of A-Z a-z 0-9 - _ .
// It returns nil or an error matching ErrInvalidGroup.
func ValidateGroup(group string) error {
	if reason := wire.ValidateGroup(group); reason != "" {
		return fmt.Errorf("%w: %q: %s", ErrInvalidGroup, group, reason)
	}
	return nil
}

// SubscribeGroup joins the queue group named group of topicOrPattern: the
// broker gives each message of the topic (of every topic the pattern
// matches) to exactly one member of the group, the one with the most free
// room in its queue at the broker, so a member that reads slowly is offered
// less. Subscribers without a group, and other groups, still get every
// message. The group is named by topicOrPattern as given and group: the same
// name on another topic or pattern is another group.
//
// It returns the same Subscription as Subscribe, read with Next or All. A
// group subscription is live only: it starts with the messages published
// after it joined, and when its stream ends without Close it joins again,
// live. It is at most once: what the broker queued to a member that goes
// away is lost with it. Its events' positions have gaps, the other members'
// share, which DroppedEvents does not count.
//
// An invalid name gives ErrInvalidGroup (and an invalid topic
// ErrInvalidTopic) with nothing sent, as does a broker that does not grant
// QUEUE_GROUPS (ErrUnsupported). The broker refuses a group past its budgets
// (ErrLimitExceeded) and a topic the user may not subscribe to
// (ErrForbidden). In a cluster a group is served by its topic's owner: a
// routing client (the default) joins there, wherever it was bootstrapped, and
// joins again at the new owner when the topic moves; without cluster routing
// a group of a topic another member owns is refused (ErrInvalidRequest).
func (c *Client) SubscribeGroup(ctx context.Context, topicOrPattern, group string) (*Subscription, error) {
	if err := ValidateGroup(group); err != nil {
		return nil, err
	}
	return c.subscribe(ctx, topicOrPattern, Live(), group)
}
