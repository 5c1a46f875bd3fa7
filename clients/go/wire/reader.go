package wire

// body: the bounds-checked cursor every payload decoder reads its fields with.

import (
	"encoding/binary"
	"unicode/utf8"
)

// The reasons a payload is malformed, worded as the reference implementation
// words them (the vectors compare them).
const (
	reasonTruncatedInt  = "truncated integer field"
	reasonBadBool       = "boolean is neither 0 nor 1"
	reasonBadOption     = "option tag is neither 0 nor 1"
	reasonStringOverrun = "string overruns payload"
	reasonBadUTF8       = "string is not valid UTF-8"
	reasonKeyOverrun    = "key overruns payload"
	reasonBlobOverrun   = "byte blob overruns payload"
	reasonCount         = "element count exceeds remaining bytes"
	reasonTrailing      = "trailing bytes after last field"
)

// body is a bounds-checked cursor over one frame payload. The first failure
// is kept and every later read returns zero values, so a decoder reads its
// fields in order and checks err once at the end (or wherever a later field
// depends on an earlier one).
type body struct {
	buf   []byte
	frame string
	err   *DecodeError
}

func (b *body) fail(reason string) {
	if b.err == nil {
		b.err = &DecodeError{Kind: Malformed, Frame: b.frame, Reason: reason}
	}
}

func (b *body) take(n int, reason string) []byte {
	if b.err != nil {
		return nil
	}
	if n < 0 || len(b.buf) < n {
		b.fail(reason)
		return nil
	}
	out := b.buf[:n:n]
	b.buf = b.buf[n:]
	return out
}

func (b *body) u8() uint8 {
	p := b.take(1, reasonTruncatedInt)
	if p == nil {
		return 0
	}
	return p[0]
}

func (b *body) u16() uint16 {
	p := b.take(2, reasonTruncatedInt)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint16(p)
}

func (b *body) u32() uint32 {
	p := b.take(4, reasonTruncatedInt)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint32(p)
}

func (b *body) u64() uint64 {
	p := b.take(8, reasonTruncatedInt)
	if p == nil {
		return 0
	}
	return binary.BigEndian.Uint64(p)
}

// flag reads a strict 0/1 byte; reason names what it is.
func (b *body) flag(reason string) bool {
	v := b.u8()
	if b.err != nil {
		return false
	}
	switch v {
	case 0:
		return false
	case 1:
		return true
	}
	b.fail(reason)
	return false
}

func (b *body) boolean() bool { return b.flag(reasonBadBool) }
func (b *body) present() bool { return b.flag(reasonBadOption) }

func (b *body) str() string {
	n := int(b.u16())
	raw := b.take(n, reasonStringOverrun)
	if b.err != nil {
		return ""
	}
	if !utf8.Valid(raw) {
		b.fail(reasonBadUTF8)
		return ""
	}
	return string(raw)
}

func (b *body) topic() string {
	t := b.str()
	if b.err != nil {
		return ""
	}
	if reason := ValidateTopic(t); reason != "" {
		b.fail(reason)
		return ""
	}
	return t
}

func (b *body) key() []byte {
	n := int(b.u16())
	k := b.take(n, reasonKeyOverrun)
	if b.err != nil {
		return nil
	}
	if reason := ValidateKey(k); reason != "" {
		b.fail(reason)
		return nil
	}
	return k
}

// blob returns a zero-copy, capacity-limited slice of the payload; never nil
// on success, so an empty blob is distinguishable from a failed read.
func (b *body) blob() []byte {
	n := b.u32()
	if b.err != nil {
		return nil
	}
	if uint64(n) > uint64(len(b.buf)) {
		b.fail(reasonBlobOverrun)
		return nil
	}
	return b.take(int(n), reasonBlobOverrun)
}

// count reads a u32 element count and checks that count elements of at
// least minElem bytes each fit in what remains, so the count is safe to
// allocate for.
func (b *body) count(minElem int) int {
	n := b.u32()
	if b.err != nil {
		return 0
	}
	if uint64(n)*uint64(minElem) > uint64(len(b.buf)) {
		b.fail(reasonCount)
		return 0
	}
	return int(n)
}

func (b *body) blobs() [][]byte {
	n := b.count(4)
	if b.err != nil {
		return nil
	}
	out := make([][]byte, 0, n)
	for i := 0; i < n && b.err == nil; i++ {
		out = append(out, b.blob())
	}
	return out
}

func (b *body) atEnd() bool { return len(b.buf) == 0 }

func (b *body) finish() {
	if b.err == nil && len(b.buf) != 0 {
		b.fail(reasonTrailing)
	}
}

// position reads stream and seq; (0, 0) is none, (0, n) is malformed.
func (b *body) position() Position {
	p := Position{Stream: b.u64(), Seq: b.u64()}
	if b.err == nil && p.Stream == 0 && p.Seq != 0 {
		b.fail("seq set without a stream")
	}
	return p
}
