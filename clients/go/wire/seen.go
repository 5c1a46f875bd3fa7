package wire

// Dropping the events a replay sends twice.

// SeenStreams remembers, for the last few streams, one past the highest
// sequence number received, so a subscriber can drop the events a replay
// sends it twice.
type SeenStreams struct {
	next []seenStream
}

type seenStream struct{ stream, next uint64 }

// SeenStreamsKept is how many streams a SeenStreams remembers.
const SeenStreamsKept = 8

// Skip records a run of n events starting at first and returns how many of
// its leading events were already received (0..n): duplicates to drop.
func (s *SeenStreams) Skip(first Position, n int) int {
	end := satAdd(first.Seq, uint64(n))
	for i := range s.next {
		e := &s.next[i]
		if e.stream != first.Stream {
			continue
		}
		skip := uint64(0)
		if e.next > first.Seq {
			skip = min(e.next-first.Seq, uint64(n))
		}
		e.next = max(e.next, end)
		return int(skip)
	}
	if len(s.next) == SeenStreamsKept {
		copy(s.next, s.next[1:])
		s.next = s.next[:len(s.next)-1]
	}
	s.next = append(s.next, seenStream{stream: first.Stream, next: end})
	return 0
}

func satAdd(a, b uint64) uint64 {
	if a+b < a {
		return ^uint64(0)
	}
	return a + b
}
