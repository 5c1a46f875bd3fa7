package wire

// Error codes of the Error frame, and DecodeError: why received bytes are not a frame.

import (
	"errors"
	"fmt"
)

// ErrorCode is the u16 code of an Error frame (docs/protocol.md, section 8.1).
// Values other than 1..14 are kept as they are and mean "other".
type ErrorCode uint16

// The assigned error codes.
const (
	CodeBadFrame           ErrorCode = 1
	CodeUnsupportedVersion ErrorCode = 2
	CodeFrameTooLarge      ErrorCode = 3
	CodeUnknownFrameType   ErrorCode = 4
	CodeInvalidRequest     ErrorCode = 5
	CodeUnauthorized       ErrorCode = 6
	CodeNotFound           ErrorCode = 7
	CodeOverloaded         ErrorCode = 8
	CodeUnavailable        ErrorCode = 9
	CodeMoved              ErrorCode = 10
	CodeInternal           ErrorCode = 11
	CodeLimitExceeded      ErrorCode = 12
	CodeForbidden          ErrorCode = 13
	CodeNoResponders       ErrorCode = 14
)

var codeNames = [...]string{
	"", "bad_frame", "unsupported_version", "frame_too_large", "unknown_frame_type",
	"invalid_request", "unauthorized", "not_found", "overloaded", "unavailable", "moved",
	"internal", "limit_exceeded", "forbidden", "no_responders",
}

// Assigned reports whether c is one of the codes 1..14.
func (c ErrorCode) Assigned() bool { return c >= 1 && int(c) < len(codeNames) }

// String is the code's snake_case name, or "other(N)".
func (c ErrorCode) String() string {
	if c.Assigned() {
		return codeNames[c]
	}
	return fmt.Sprintf("other(%d)", uint16(c))
}

// DecodeErrorKind says which of the four decode failures happened.
type DecodeErrorKind uint8

// The four kinds of decode error (docs/protocol.md, section 8.2).
const (
	// UnsupportedVersion: the header's version byte is not FramingVersion.
	UnsupportedVersion DecodeErrorKind = iota + 1
	// UnknownFrameType: the header's frame type is unassigned.
	UnknownFrameType
	// FrameTooLarge: the header announces a payload above the limit.
	FrameTooLarge
	// Malformed: the payload does not match the frame's layout.
	Malformed
)

// String names the kind as the vectors file does.
func (k DecodeErrorKind) String() string {
	switch k {
	case UnsupportedVersion:
		return "unsupported_version"
	case UnknownFrameType:
		return "unknown_frame_type"
	case FrameTooLarge:
		return "frame_too_large"
	case Malformed:
		return "malformed"
	}
	return "unknown"
}

// DecodeError is why bytes from a peer could not be decoded. After one, the
// rest of the stream cannot be parsed.
type DecodeError struct {
	// Kind is which failure it is.
	Kind DecodeErrorKind
	// Version is the bad version byte (UnsupportedVersion).
	Version uint8
	// Type is the unknown frame type byte (UnknownFrameType).
	Type uint8
	// Len and Max are the announced payload length and the limit (FrameTooLarge).
	Len, Max uint32
	// Frame is the name of the frame being decoded (Malformed).
	Frame string
	// Reason says what was wrong (Malformed).
	Reason string
}

// ErrDecode is matched by every *DecodeError with errors.Is.
var ErrDecode = errors.New("starling: frame decode error")

// Is makes errors.Is(err, ErrDecode) true for every decode error.
func (e *DecodeError) Is(target error) bool { return target == ErrDecode }

// Error renders the error exactly as the reference implementation does.
func (e *DecodeError) Error() string {
	switch e.Kind {
	case UnsupportedVersion:
		return fmt.Sprintf("unsupported framing version %d in a frame header", e.Version)
	case UnknownFrameType:
		return fmt.Sprintf("unknown frame type 0x%02x", e.Type)
	case FrameTooLarge:
		return fmt.Sprintf("frame payload of %d bytes exceeds the limit of %d bytes", e.Len, e.Max)
	default:
		return fmt.Sprintf("malformed %s frame: %s", e.Frame, e.Reason)
	}
}

// Code is the error code to report to the peer for this decode error.
func (e *DecodeError) Code() ErrorCode {
	switch e.Kind {
	case UnsupportedVersion:
		return CodeUnsupportedVersion
	case UnknownFrameType:
		return CodeUnknownFrameType
	case FrameTooLarge:
		return CodeFrameTooLarge
	default:
		return CodeBadFrame
	}
}
