package wire_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"testing"

	"starling.invalid/starling/wire"
)

var errEOF = io.EOF

// FuzzDecode feeds arbitrary bytes to the decoder, whole and through the
// streaming Reader in small pieces. It checks that nothing panics, that both
// ways agree, and that every decoded frame re-encodes to its input bytes
// (the header's reserved flags aside). Its seed corpus is every vector of
// proto/vectors/frames.json (queue-group Subscribe frames and their malformed
// variants among them), so `go test` runs them as regression cases.
func FuzzDecode(f *testing.F) {
	v := loadVectors(f)
	for _, c := range v.Valid {
		raw, _ := hex.DecodeString(c.Hex)
		f.Add(raw)
	}
	for _, c := range v.Invalid {
		raw, _ := hex.DecodeString(c.Hex)
		f.Add(raw)
	}
	const limit = 1 << 16
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := wire.Decoder{MaxFrameBytes: limit}
		var whole []wire.Frame
		var wholeErr error
		rest := data
		for len(rest) > 0 {
			fr, n, err := dec.Decode(rest)
			if err != nil {
				var de *wire.DecodeError
				if !errors.As(err, &de) {
					t.Fatalf("not a DecodeError: %v", err)
				}
				wholeErr = err
				break
			}
			if fr == nil {
				break
			}
			got := wire.Encode(fr)
			want := append([]byte(nil), rest[:n]...)
			want[2], want[3] = 0, 0 // reserved flags are written as 0
			if !bytes.Equal(got, want) {
				t.Fatalf("%s re-encodes to %x, input %x", fr.Kind(), got, want)
			}
			whole = append(whole, fr)
			rest = rest[n:]
		}
		r := wire.NewReader(&pieces{data: data, size: 3}, limit)
		for i := 0; ; i++ {
			fr, err := r.ReadFrame()
			if err != nil {
				if i != len(whole) {
					t.Fatalf("reader stopped after %d frames, decoder read %d: %v", i, len(whole), err)
				}
				if wholeErr != nil && err.Error() != wholeErr.Error() {
					t.Fatalf("reader error %v, decoder error %v", err, wholeErr)
				}
				break
			}
			if i >= len(whole) || !bytes.Equal(wire.Encode(fr), wire.Encode(whole[i])) {
				t.Fatalf("frame %d differs between the decoder and the reader", i)
			}
			if r.Capacity() > 2*len(data)+wire.DefaultReadChunk+wire.GrowFloor {
				t.Fatalf("reader buffer %d for %d input bytes", r.Capacity(), len(data))
			}
		}
	})
}

type pieces struct {
	data []byte
	size int
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(b), p.size, len(p.data))
	copy(b, p.data[:n])
	p.data = p.data[n:]
	return n, nil
}
