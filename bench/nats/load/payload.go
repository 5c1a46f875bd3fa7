// The benchmark message header, byte for byte the one `starling bench`
// writes (bench/src/payload.rs): big-endian
// magic u32 "STB1" | producer u32 | seq u64 | send_ns u64, then filler.
package main

import "encoding/binary"

const (
	magic     uint32 = 0x53544231
	headerLen        = 24
)

type header struct {
	producer uint32
	seq      uint64
	sendNs   uint64
}

// newFiller returns the filler that follows the header in size-byte payloads.
func newFiller(size int) []byte {
	n := size - headerLen
	if n < 0 {
		n = 0
	}
	f := make([]byte, n)
	for i := range f {
		f[i] = 'a' + byte(i%26)
	}
	return f
}

// encode writes h and filler into a fresh buffer.
func encode(h header, filler []byte) []byte {
	b := make([]byte, headerLen+len(filler))
	binary.BigEndian.PutUint32(b[0:], magic)
	binary.BigEndian.PutUint32(b[4:], h.producer)
	binary.BigEndian.PutUint64(b[8:], h.seq)
	binary.BigEndian.PutUint64(b[16:], h.sendNs)
	copy(b[headerLen:], filler)
	return b
}

// decode reads the header; ok is false for foreign or short payloads.
func decode(b []byte) (h header, ok bool) {
	if len(b) < headerLen || binary.BigEndian.Uint32(b[0:]) != magic {
		return header{}, false
	}
	return header{
		producer: binary.BigEndian.Uint32(b[4:]),
		seq:      binary.BigEndian.Uint64(b[8:]),
		sendNs:   binary.BigEndian.Uint64(b[16:]),
	}, true
}
