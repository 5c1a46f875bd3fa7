package wire

// Decoder (frames off a byte slice) and Reader (frames off a byte stream), both
// checking the header before reserving anything for a payload.

import (
	"encoding/binary"
	"errors"
	"io"
)

// GrowFloor is the least a partial frame's buffer grows by. Above it, growth
// follows the bytes already received (the buffer at most doubles), never the
// length the header announces.
const GrowFloor = 4096

// Decoder splits frames off the front of a byte slice, accepting payloads of
// at most MaxFrameBytes bytes (the 8-byte header is not counted).
type Decoder struct {
	// MaxFrameBytes is the payload limit.
	MaxFrameBytes uint32
}

// header validates the header at the start of src. ok is false when fewer
// than HeaderLen bytes are there.
func (d Decoder) header(src []byte) (k Kind, payloadLen uint32, ok bool, err error) {
	if len(src) < HeaderLen {
		return 0, 0, false, nil
	}
	if src[0] != FramingVersion {
		return 0, 0, false, &DecodeError{Kind: UnsupportedVersion, Version: src[0]}
	}
	k = Kind(src[1])
	if !k.Known() {
		return 0, 0, false, &DecodeError{Kind: UnknownFrameType, Type: src[1]}
	}
	payloadLen = binary.BigEndian.Uint32(src[4:8])
	if payloadLen > d.MaxFrameBytes {
		return 0, 0, false, &DecodeError{Kind: FrameTooLarge, Len: payloadLen, Max: d.MaxFrameBytes}
	}
	return k, payloadLen, true, nil
}

// Decode splits one frame off the front of src. It returns the frame and
// the bytes it took; (nil, 0, nil) when src holds an incomplete frame (read
// more and call again); an error when the stream is corrupt. The header is
// checked (version, type, length against MaxFrameBytes) before the payload
// is looked at. Blob fields of the frame are slices of src.
func (d Decoder) Decode(src []byte) (Frame, int, error) {
	k, n, ok, err := d.header(src)
	if err != nil || !ok {
		return nil, 0, err
	}
	total := HeaderLen + int(n)
	if len(src) < total {
		return nil, 0, nil
	}
	f, err := DecodePayload(k, src[HeaderLen:total:total])
	if err != nil {
		return nil, total, err
	}
	return f, total, nil
}

// DefaultReadChunk is how many bytes a [Reader] asks its source for at most
// once per read when it is not waiting for the rest of a large frame.
const DefaultReadChunk = 64 * 1024

// Reader reads frames from a byte stream with a [Decoder]. Its buffer grows
// with the bytes received, never with a length a header announces, so a peer
// announcing a maximal frame and sending nothing costs a few KiB. A decoded
// frame's blobs alias memory the Reader never writes again, so frames stay
// valid after later reads.
type Reader struct {
	src   io.Reader
	dec   Decoder
	buf   []byte
	start int
	end   int
	chunk int
}

// NewReader reads frames of at most maxFrameBytes payload bytes from src.
func NewReader(src io.Reader, maxFrameBytes uint32) *Reader {
	return &Reader{src: src, dec: Decoder{MaxFrameBytes: maxFrameBytes}, chunk: DefaultReadChunk}
}

// SetMaxFrameBytes changes the payload limit for the frames read next.
func (r *Reader) SetMaxFrameBytes(max uint32) { r.dec.MaxFrameBytes = max }

// Buffered is the number of bytes read from the source and not yet decoded.
func (r *Reader) Buffered() int { return r.end - r.start }

// Capacity is the size of the Reader's current buffer (for tests of its
// allocation bound).
func (r *Reader) Capacity() int { return len(r.buf) }

// ReadFrame returns the next frame. At the end of the source it returns
// io.EOF when no partial frame was pending, io.ErrUnexpectedEOF otherwise;
// a *DecodeError when the bytes are not a valid frame.
func (r *Reader) ReadFrame() (Frame, error) {
	for {
		avail := r.buf[r.start:r.end]
		f, n, err := r.dec.Decode(avail)
		if err != nil {
			r.start += n
			return nil, err
		}
		if f != nil {
			r.start += n
			return f, nil
		}
		want := r.chunk
		if len(avail) >= HeaderLen {
			total := HeaderLen + int(binary.BigEndian.Uint32(avail[4:8]))
			grow := min(total-len(avail), max(len(avail), GrowFloor))
			want = max(grow, min(want, total-len(avail)))
		}
		r.ensure(want)
		m, err := r.src.Read(r.buf[r.end:])
		r.end += m
		if m > 0 {
			continue
		}
		if errors.Is(err, io.EOF) {
			if r.end > r.start {
				return nil, io.ErrUnexpectedEOF
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
	}
}

// ensure makes room to read into: the free space after end is used while it
// holds at least min(want, GrowFloor) bytes; otherwise the buffer is replaced
// by one with want bytes free. Bytes before start were handed out in frames
// and are never written again: a buffer is replaced, never compacted.
func (r *Reader) ensure(want int) {
	if free := len(r.buf) - r.end; free > 0 && free >= min(want, GrowFloor) {
		return
	}
	pending := r.end - r.start
	fresh := make([]byte, pending+want)
	copy(fresh, r.buf[r.start:r.end])
	r.buf, r.start, r.end = fresh, 0, pending
}

// Writer helpers.

// WriteFrame encodes f and writes it to w in one Write call.
func WriteFrame(w io.Writer, f Frame) error {
	_, err := w.Write(Encode(f))
	return err
}
