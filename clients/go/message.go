package starling

// Messages with headers (the HEADERS feature, docs/protocol.md section 5.2):
// what a publisher sends and a subscriber receives besides the payload, the
// message id of publish de-duplication (the DEDUP feature, a reserved
// header), and the checks made before a header is sent.

import (
	"fmt"

	"starling.invalid/starling/wire"
)

// Header is one name/value header of a message. A name is 1 to 255 bytes
// with no control character, no whitespace and no ':' (compared exactly);
// a value is any UTF-8 text.
type Header = wire.Header

// ReplyToHeader is the reserved header naming a request's reply inbox
// (docs/subjects.md, Request and reply).
const ReplyToHeader = "reply-to"

// MsgIDHeader is the reserved header holding a message's id for publish
// de-duplication (Message.WithMsgID).
const MsgIDHeader = wire.MsgIDHeader

// Message is a payload with its headers, as PublishMessage sends it and a
// reply arrives.
type Message struct {
	// Payload is the message body.
	Payload []byte
	// Headers are the message's headers, in order; nil for none.
	Headers []Header
}

// Header returns the value of the first header named name.
func (m Message) Header(name string) (string, bool) { return headerValue(m.Headers, name) }

// WithMsgID returns the message with message id id (the MsgIDHeader header,
// replacing any the message has; m's own Headers are not modified). Its
// topic drops a repeat of an id it saw within its window (the broker's
// dedup_window_ms, 2 minutes by default) and answers the repeat with the
// original's ack, so a publish retried after a lost ack is delivered once;
// in a batch each message is checked on its own. Publishing it needs a
// broker that grants DEDUP (ErrUnsupported otherwise, nothing sent). The
// broker refuses an empty id (ErrInvalidRequest) and one longer than its
// max_msg_id_bytes (128 by default, ErrLimitExceeded). A durable topic keeps
// ids in its log and rebuilds its window from it when the log opens, so a
// repeat is dropped across a broker restart too. A replicated topic's window
// follows its committed log on every replica, so a retry after a leader change
// is dropped as well; there a retry of an id still being committed, or one
// reaching a leader elected a moment ago, is refused with ErrUnavailable
// (publish again).
func (m Message) WithMsgID(id string) Message {
	hs := make([]Header, 0, len(m.Headers)+1)
	for _, h := range m.Headers {
		if h.Name != MsgIDHeader {
			hs = append(hs, h)
		}
	}
	m.Headers = append(hs, Header{Name: MsgIDHeader, Value: id})
	return m
}

// MsgID is the message's id (its first MsgIDHeader header), if it has one.
func (m Message) MsgID() (string, bool) { return wire.MsgID(m.Headers) }

func headerValue(hs []Header, name string) (string, bool) {
	for _, h := range hs {
		if h.Name == name {
			return h.Value, true
		}
	}
	return "", false
}

// checkHeaders refuses a header name the broker would refuse.
func checkHeaders(hs []Header) error {
	for _, h := range hs {
		if reason := wire.ValidateHeaderName(h.Name); reason != "" {
			return fmt.Errorf("%w: %q: %s", ErrInvalidHeader, h.Name, reason)
		}
	}
	return nil
}
