package starling

import (
	"fmt"
	"testing"

	"starling.invalid/starling/wire"
)

func batch(stream, first uint64, n int) delivery {
	b := &wire.EventBatch{Stream: stream, FirstSeq: first}
	for i := range n {
		b.Events = append(b.Events, []byte{byte(i)})
	}
	return delivery{batch: b}
}

func seqs(es []Event) [][2]uint64 {
	var out [][2]uint64
	for _, e := range es {
		out = append(out, [2]uint64{e.Seq, e.Position.Seq})
	}
	return out
}

func equal(a, b [][2]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestNumberingFromTheFirstEventReceived(t *testing.T) {
	var n numbering
	if got := seqs(n.number(batch(7, 10, 2), nil)); !equal(got, [][2]uint64{{10, 10}, {11, 11}}) {
		t.Fatal(got)
	}
	if got := seqs(n.number(batch(7, 12, 1), nil)); !equal(got, [][2]uint64{{12, 12}}) || n.dropped != 0 {
		t.Fatal(got, n.dropped)
	}
}

func TestNumberingCountsGapsAsDrops(t *testing.T) {
	var n numbering
	n.number(batch(7, 5, 3), nil)
	if got := seqs(n.number(batch(7, 12, 1), nil)); !equal(got, [][2]uint64{{12, 12}}) || n.dropped != 4 {
		t.Fatal(got, n.dropped)
	}
}

func TestNumberingAcrossStreamsDropsReplayedRepeats(t *testing.T) {
	var n numbering
	n.number(batch(1, 0, 5), nil)
	if got := seqs(n.number(batch(2, 0, 2), nil)); !equal(got, [][2]uint64{{5, 0}, {6, 1}}) {
		t.Fatal(got)
	}
	if got := seqs(n.number(batch(2, 0, 4), nil)); !equal(got, [][2]uint64{{7, 2}, {8, 3}}) {
		t.Fatal(got)
	}
	if got := n.number(batch(1, 2, 3), nil); len(got) != 0 || n.dropped != 0 {
		t.Fatal(got, n.dropped)
	}
}

func TestNumberingFromAResumePoint(t *testing.T) {
	n := newNumbering(Position{Stream: 3, Seq: 10})
	if got := seqs(n.number(batch(3, 8, 4), nil)); !equal(got, [][2]uint64{{10, 10}, {11, 11}}) {
		t.Fatal(got)
	}
}

func TestResumePointFollowsTheNewestStream(t *testing.T) {
	var r resumePoint
	r.advance(1, 10, 2)
	r.advance(1, 5, 3) // a replay never moves it back
	if r.p != (Position{Stream: 1, Seq: 12}) {
		t.Fatal(r.p)
	}
	r.advance(2, 0, 4)
	r.advance(1, 12, 1) // a late batch of the older stream
	if r.p != (Position{Stream: 2, Seq: 4}) {
		t.Fatal(r.p)
	}
}

func TestHelloAsksForTheRoleAndTheToken(t *testing.T) {
	h := hello(Config{ClientName: "me"}, rolePlain)
	const asked = wire.FeaturesClient
	if h.MinVersion != 2 || h.MaxVersion != 2 || h.Features != asked || h.HasAuthToken {
		t.Fatalf("%+v", h)
	}
	h = hello(Config{Credentials: TokenCredentials("s3cret")}, roleRouted)
	if h.Features != asked|wire.FeatureCluster|wire.FeatureAuthToken || string(h.AuthToken) != "s3cret" {
		t.Fatalf("%+v", h)
	}
	if s := TokenCredentials("s3cret").String(); s != "token(<redacted>)" {
		t.Fatal(s)
	}
}

// Headers go to the events their indexes name, counted from the batch's
// first event even when a replay's first events are skipped.
func TestNumberingAttachesHeaders(t *testing.T) {
	n := newNumbering(Position{Stream: 4, Seq: 11})
	d := batch(4, 10, 3)
	d.headers = []wire.IndexedHeaders{
		{Index: 0, Headers: []Header{{Name: "skipped", Value: "x"}}},
		{Index: 2, Headers: []Header{{Name: "a", Value: "1"}}},
	}
	n.topic = "t"
	got := n.number(d, nil)
	if len(got) != 2 || got[0].Headers != nil || got[0].Topic != "t" {
		t.Fatalf("events %+v", got)
	}
	if v, ok := got[1].Header("a"); !ok || v != "1" || got[1].Position.Seq != 12 {
		t.Fatalf("event %+v", got[1])
	}
}

// A wildcard subscription numbers each topic on its own, and forgets its
// numberings (keeping their drop counts) past maxTopicNumberings topics.
func TestWildcardNumberingIsPerTopicAndBounded(t *testing.T) {
	s := &Subscription{wildcard: true, perTopic: map[string]*numbering{}}
	number := func(topic string, first uint64) []Event {
		d := batch(9, first, 1)
		d.topic = topic
		return s.numberOf(d).number(d, nil)
	}
	number("a", 0)
	number("b", 5)
	if got := number("a", 3); got[0].Seq != 3 || got[0].Topic != "a" || s.DroppedEvents() != 2 {
		t.Fatalf("%+v, dropped %d", got, s.DroppedEvents())
	}
	for i := range maxTopicNumberings {
		number(fmt.Sprintf("t%d", i), 0)
	}
	if len(s.perTopic) > maxTopicNumberings || s.DroppedEvents() != 2 {
		t.Fatalf("%d numberings, dropped %d", len(s.perTopic), s.DroppedEvents())
	}
}

// A queue-group member's gaps are the other members' share: not drops, and
// its own Seq stays consecutive.
func TestSharedNumberingCountsNoGaps(t *testing.T) {
	n := numbering{shared: true}
	var got [][2]uint64
	got = append(got, seqs(n.number(batch(3, 10, 2), nil))...)
	got = append(got, seqs(n.number(batch(3, 20, 1), nil))...)
	got = append(got, seqs(n.number(batch(3, 31, 2), nil))...)
	want := [][2]uint64{{10, 10}, {11, 11}, {12, 20}, {13, 31}, {14, 32}}
	if !equal(got, want) || n.dropped != 0 {
		t.Fatalf("got %v dropped %d, want %v and 0", got, n.dropped, want)
	}
	plain := numbering{}
	plain.number(batch(3, 10, 2), nil)
	plain.number(batch(3, 20, 1), nil)
	if plain.dropped != 8 {
		t.Fatalf("a plain subscription's gap: dropped %d, want 8", plain.dropped)
	}
}
