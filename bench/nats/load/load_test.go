// Checks that the header and the bookkeeping follow the same rules as the
// Rust harness (bench/src/payload.rs and tracker.rs).
package main

import (
	"math"
	"strings"
	"testing"
)

func TestHeaderRoundTripsAndMatchesTheRustLayout(t *testing.T) {
	h := header{producer: 7, seq: 1 << 40, sendNs: 123456789}
	b := encode(h, newFiller(256))
	if len(b) != 256 {
		t.Fatalf("len %d", len(b))
	}
	if string(b[:4]) != "STB1" {
		t.Fatalf("magic %q", b[:4])
	}
	if got, ok := decode(b); !ok || got != h {
		t.Fatalf("decode %+v %v", got, ok)
	}
	if _, ok := decode([]byte("hello")); ok {
		t.Fatal("foreign payload accepted")
	}
}

func TestTrackerCountsLossReorderingAndTheWindow(t *testing.T) {
	tr := newTracker(2, window{start: 1000, end: math.MaxUint64})
	f := newFiller(32)
	for _, m := range []header{{0, 0, 500}, {0, 2, 1000}, {0, 1, 1000}, {1, 0, 2000}, {1, 1, 2000}} {
		tr.observe(encode(m, f), 3000)
	}
	tr.observe([]byte("x"), 3000)
	if tr.reordered != 1 || tr.foreign != 1 || tr.measured != 4 || tr.inWindow != 5 {
		t.Fatalf("%+v", tr)
	}
	exp, lost, dup := tr.account([]uint64{5, 1}, []int{0, 1})
	if exp != 6 || lost != 2 || dup != 1 {
		t.Fatalf("exp %d lost %d dup %d", exp, lost, dup)
	}
}

func TestTransportKindFollowsTheAddressAndRefusesAMismatchedLabel(t *testing.T) {
	for _, c := range []struct {
		system, nsqd, want string
		js                 bool
		ok                 bool
	}{
		{"", "", kindNATS, false, true},
		{"nats-tls", "", kindNATS, false, true},
		{"", "127.0.0.1:4150", kindNSQ, false, true},
		{"nsq-tls", "127.0.0.1:4150", kindNSQ, false, true},
		{"nsq", "", "", false, false},
		{"nats", "127.0.0.1:4150", "", false, false},
		{"", "", kindJetStream, true, true},
		{"jetstream-always", "", kindJetStream, true, true},
		{"jetstream", "", "", false, false},
		{"nats", "", "", true, false},
		{"", "127.0.0.1:4150", "", true, false},
	} {
		got, err := transportKind(c.system, c.nsqd, c.js)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("transportKind(%q, %q, %v) = %q, %v", c.system, c.nsqd, c.js, got, err)
		}
	}
}

func TestNSQNamesOfARunAreValidAndNsqdsRuleIsKept(t *testing.T) {
	n := &nsqTransport{prefix: "bench.1795710550828201864"}
	for _, s := range []string{n.topic(0), n.topic(999), "sub-0", "sub-9999"} {
		if !validNSQName(s) {
			t.Errorf("%q should be a valid NSQ name", s)
		}
	}
	for _, s := range []string{"", "a b", "t#ephemeral", "x/y", strings.Repeat("a", 65)} {
		if validNSQName(s) {
			t.Errorf("%q should be refused", s)
		}
	}
}
