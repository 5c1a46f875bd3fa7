package wire

// Length-prefixed field writers; over-long fields are cut so a frame stays parseable.

import "encoding/binary"

const (
	maxU16 = 1<<16 - 1
	maxU32 = 1<<32 - 1
)

// fitStr cuts s to what a u16 length can carry, on a UTF-8 character
// boundary, so an over-long string still encodes to a parseable frame.
func fitStr(s string) string {
	if len(s) <= maxU16 {
		return s
	}
	end := maxU16
	for end > 0 && !isCharStart(s[end]) {
		end--
	}
	return s[:end]
}

func isCharStart(c byte) bool { return c&0xC0 != 0x80 }

func fitBytes(p []byte, max int) []byte {
	if len(p) > max {
		return p[:max]
	}
	return p
}

func strLen(s string) int  { return 2 + len(fitStr(s)) }
func keyLen(k []byte) int  { return 2 + len(fitBytes(k, maxU16)) }
func blobLen(p []byte) int { return 4 + len(fitBytes(p, maxU32)) }
func blobsLen(ps [][]byte) int {
	n := 4
	for _, p := range ps {
		n += blobLen(p)
	}
	return n
}

func putU8(dst []byte, v uint8) []byte   { return append(dst, v) }
func putU16(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func putU32(dst []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(dst, v) }
func putU64(dst []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(dst, v) }

func putBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func putStr(dst []byte, s string) []byte {
	s = fitStr(s)
	dst = putU16(dst, uint16(len(s)))
	return append(dst, s...)
}

func putKey(dst []byte, k []byte) []byte {
	k = fitBytes(k, maxU16)
	dst = putU16(dst, uint16(len(k)))
	return append(dst, k...)
}

func putBlob(dst []byte, p []byte) []byte {
	p = fitBytes(p, maxU32)
	dst = putU32(dst, uint32(len(p)))
	return append(dst, p...)
}

func putBlobs(dst []byte, ps [][]byte) []byte {
	dst = putU32(dst, uint32(len(ps)))
	for _, p := range ps {
		dst = putBlob(dst, p)
	}
	return dst
}

func putPosition(dst []byte, p Position) []byte {
	return putU64(putU64(dst, p.Stream), p.Seq)
}
