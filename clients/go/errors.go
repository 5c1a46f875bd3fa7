package starling

// Errors: every failure the client returns works with errors.Is and
// errors.As. A broker's Error frame is a *ServerError whose Is matches the
// sentinel of its code (ErrForbidden, ErrUnavailable, …); client-side
// failures have sentinels of their own.

import (
	"errors"
	"fmt"

	"github.com/quic-go/quic-go"

	"starling.invalid/starling/wire"
)

// Sentinels for the broker's error codes (docs/protocol.md, section 8.1).
// errors.Is(err, ErrForbidden) is true for a *ServerError of that code.
var (
	ErrBadFrame           = errors.New("starling: the broker could not decode a frame")
	ErrUnsupportedVersion = errors.New("starling: no common protocol version")
	ErrFrameTooLarge      = errors.New("starling: frame larger than the receiver accepts")
	ErrUnknownFrameType   = errors.New("starling: unknown frame type")
	ErrInvalidRequest     = errors.New("starling: invalid request")
	ErrUnauthorized       = errors.New("starling: unauthorized")
	ErrNotFound           = errors.New("starling: not found")
	ErrOverloaded         = errors.New("starling: broker overloaded")
	ErrUnavailable        = errors.New("starling: broker unavailable")
	ErrMoved              = errors.New("starling: owned by another cluster member")
	ErrInternal           = errors.New("starling: internal broker error")
	ErrLimitExceeded      = errors.New("starling: broker limit exceeded")
	ErrForbidden          = errors.New("starling: forbidden")
	// ErrNoResponders: a request found no subscriber on its topic, so
	// nobody can answer it (code 14, the REQUEST feature).
	ErrNoResponders = errors.New("starling: no responders")
)

var codeSentinels = map[wire.ErrorCode]error{
	wire.CodeBadFrame:           ErrBadFrame,
	wire.CodeUnsupportedVersion: ErrUnsupportedVersion,
	wire.CodeFrameTooLarge:      ErrFrameTooLarge,
	wire.CodeUnknownFrameType:   ErrUnknownFrameType,
	wire.CodeInvalidRequest:     ErrInvalidRequest,
	wire.CodeUnauthorized:       ErrUnauthorized,
	wire.CodeNotFound:           ErrNotFound,
	wire.CodeOverloaded:         ErrOverloaded,
	wire.CodeUnavailable:        ErrUnavailable,
	wire.CodeMoved:              ErrMoved,
	wire.CodeInternal:           ErrInternal,
	wire.CodeLimitExceeded:      ErrLimitExceeded,
	wire.CodeForbidden:          ErrForbidden,
	wire.CodeNoResponders:       ErrNoResponders,
}

// Client-side failures.
var (
	// ErrClosed: the client (or the stream a request was on) was closed.
	ErrClosed = errors.New("starling: closed")
	// ErrInvalidHeader: a header name breaks the header rules; nothing was
	// sent.
	ErrInvalidHeader = errors.New("starling: invalid header")
	// ErrNotARequest: Reply was given an event without a reply-to header.
	ErrNotARequest = errors.New("starling: the event is not a request (no reply-to header)")
	// ErrInvalidTopic: a topic breaks the topic rules; nothing was sent.
	ErrInvalidTopic = errors.New("starling: invalid topic")
	// ErrInvalidGroup: a queue-group name is empty, longer than 64 bytes or
	// holds a character other than A-Z a-z 0-9 - _ .; nothing was sent.
	ErrInvalidGroup = errors.New("starling: invalid queue group name")
	// ErrInvalidConsumer: a durable consumer name is empty, longer than 64
	// bytes or holds a character other than A-Z a-z 0-9 - _ ., or its
	// ConsumerOptions break the protocol's rules; nothing was sent.
	ErrInvalidConsumer = errors.New("starling: invalid durable consumer")
	// ErrInvalidKey: a cache key is empty or longer than 1024 bytes.
	ErrInvalidKey = errors.New("starling: invalid cache key")
	// ErrUnsupported: the broker did not grant a feature the call needs.
	ErrUnsupported = errors.New("starling: not supported by the broker")
	// ErrProtocol: the broker sent something the protocol does not allow.
	ErrProtocol = errors.New("starling: protocol violation")
	// ErrConfig: the Config, credentials or trust settings are unusable.
	ErrConfig = errors.New("starling: invalid configuration")
)

// ServerError is an Error frame from the broker (or a Moved redirect). Op and
// Name say which operation on which topic or key it refused, when known.
type ServerError struct {
	// Code is the protocol's error code.
	Code wire.ErrorCode
	// Message is the broker's human-readable detail.
	Message string
	// Op is "publish", "subscribe", "consume" (a durable consumer member),
	// "cache_read" or "cache_write" ("" for the handshake and stream-level
	// errors).
	Op string
	// Name is the topic or cache key.
	Name string
	// Owner is the owning member's host:port of a Moved redirect.
	Owner string
}

// Error renders the code, the operation and the broker's message.
func (e *ServerError) Error() string {
	where := ""
	if e.Op != "" {
		where = fmt.Sprintf(" (%s %q)", e.Op, e.Name)
	}
	return fmt.Sprintf("starling: broker error %s%s: %s", e.Code, where, e.Message)
}

// Is matches the sentinel of the error's code.
func (e *ServerError) Is(target error) bool {
	s, ok := codeSentinels[e.Code]
	return ok && s == target
}

func serverError(f *wire.Error) *ServerError {
	return &ServerError{Code: f.Code, Message: f.Message}
}

func movedError(f *wire.Moved) *ServerError {
	return &ServerError{Code: wire.CodeMoved, Owner: f.Owner,
		Message: fmt.Sprintf("owned by the member at %s (membership epoch %#x)", f.Owner, f.Epoch)}
}

// inOperation names the operation and topic or key on a broker's refusal.
func inOperation(err error, op string, name []byte) error {
	var se *ServerError
	if errors.As(err, &se) && se.Op == "" {
		c := *se
		c.Op, c.Name = op, string(name)
		return &c
	}
	return err
}

func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

func configErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, args...))
}

// FrameTooLargeError is a request the client refused to send because it is
// larger than the broker's max_frame_bytes. errors.Is(err, ErrFrameTooLarge)
// is true for it.
type FrameTooLargeError struct {
	// Len is the payload length of the request; Max the broker's limit.
	Len, Max int
}

// Error says how large the request was.
func (e *FrameTooLargeError) Error() string {
	return fmt.Sprintf("starling: request of %d bytes exceeds the broker's frame limit of %d bytes", e.Len, e.Max)
}

// Is matches ErrFrameTooLarge.
func (e *FrameTooLargeError) Is(target error) bool { return target == ErrFrameTooLarge }

// retryable reports whether a request may succeed at the topic's owner of
// the moment: a Moved redirect, Unavailable from a draining broker, or a
// connection the broker closed because it is shutting down (application
// close code 0). An acked publish retried after its connection closed may
// have been accepted before: delivery is at least once then.
func retryable(err error) bool {
	return errors.Is(err, ErrMoved) || errors.Is(err, ErrUnavailable) || shuttingDown(err)
}

// closeRevoked is the application close code of a connection whose user was
// removed from the broker's users document.
const closeRevoked = 2

// linkErr turns a connection the broker closed because the user was revoked
// into an Unauthorized *ServerError; other errors are returned as they are.
func linkErr(err error) error {
	var app *quic.ApplicationError
	if errors.As(err, &app) && app.Remote && app.ErrorCode == closeRevoked {
		return &ServerError{Code: wire.CodeUnauthorized, Message: "user revoked: " + app.ErrorMessage}
	}
	return err
}

// shuttingDown reports whether the broker closed the connection with code 0.
func shuttingDown(err error) bool {
	var app *quic.ApplicationError
	return errors.As(err, &app) && app.Remote && app.ErrorCode == 0
}
