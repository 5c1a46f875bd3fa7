package starling

// Messages with headers (the HEADERS feature, docs/protocol.md section 5.2):
// what a publisher sends and a subscriber receives besides the payload, and
// the checks made before a header is sent.

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
