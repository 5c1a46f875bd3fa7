package wire

// Header lists (FeatureHeaders): one message's headers and the indexed
// headers of a batch's messages, as Publish, PublishBatch and EventHeaders
// carry them (docs/protocol.md, section 5.2, Headers).

import "unicode"

const reasonHeadersEmpty = "header list is empty"

// ValidateHeaderName checks a header name: 1..=255 bytes with no control
// character, no whitespace and no ':'. It returns "" when the name is valid,
// else the reason, worded as the reference implementation words it.
func ValidateHeaderName(name string) string {
	if name == "" {
		return "header name is empty"
	}
	if len(name) > 255 {
		return "header name longer than 255 bytes"
	}
	for _, r := range name {
		if unicode.Is(unicode.Cc, r) {
			return "header name contains a control character"
		}
		if unicode.Is(unicode.White_Space, r) {
			return "header name contains whitespace"
		}
		if r == ':' {
			return "header name contains a colon"
		}
	}
	return ""
}

func headersLen(hs []Header) int {
	n := 4
	for _, h := range hs {
		n += strLen(h.Name) + strLen(h.Value)
	}
	return n
}

func indexedLen(es []IndexedHeaders) int {
	n := 4
	for _, e := range es {
		n += 4 + headersLen(e.Headers)
	}
	return n
}

func putHeaders(d []byte, hs []Header) []byte {
	d = putU32(d, uint32(len(hs)))
	for _, h := range hs {
		d = putStr(d, h.Name)
		d = putStr(d, h.Value)
	}
	return d
}

func putIndexed(d []byte, es []IndexedHeaders) []byte {
	d = putU32(d, uint32(len(es)))
	for _, e := range es {
		d = putU32(d, e.Index)
		d = putHeaders(d, e.Headers)
	}
	return d
}

// headers reads a header list: at least one header, each name valid.
func (b *body) headers() []Header {
	n := b.count(4)
	if b.err != nil {
		return nil
	}
	if n == 0 {
		b.fail(reasonHeadersEmpty)
		return nil
	}
	out := make([]Header, 0, n)
	for i := 0; i < n && b.err == nil; i++ {
		name := b.str()
		if b.err != nil {
			return nil
		}
		if reason := ValidateHeaderName(name); reason != "" {
			b.fail(reason)
			return nil
		}
		out = append(out, Header{Name: name, Value: b.str()})
	}
	return out
}

// indexed reads an indexed header list, indices strictly increasing.
func (b *body) indexed() []IndexedHeaders {
	n := b.count(8)
	if b.err != nil {
		return nil
	}
	out := make([]IndexedHeaders, 0, n)
	for i := 0; i < n && b.err == nil; i++ {
		index := b.u32()
		if b.err != nil {
			return nil
		}
		if len(out) > 0 && out[len(out)-1].Index >= index {
			b.fail("header indices not strictly increasing")
			return nil
		}
		out = append(out, IndexedHeaders{Index: index, Headers: b.headers()})
	}
	return out
}

// MsgID is the message id among hs (FeatureDedup): the value of the first
// header named exactly MsgIDHeader.
func MsgID(hs []Header) (string, bool) {
	for _, h := range hs {
		if h.Name == MsgIDHeader {
			return h.Value, true
		}
	}
	return "", false
}
