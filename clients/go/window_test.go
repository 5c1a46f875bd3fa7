package starling

import (
	"context"
	"errors"
	"testing"
	"time"
)

// One publish per quarter window is a mark; a full window waits until a
// mark's answer gives its bytes back.
func TestWindowMarksEveryQuarterAndWaitsWhenFull(t *testing.T) {
	const size = 64 << 10
	w := newWindow(size)
	ctx := context.Background()
	var marks []int64
	for range 16 { // 16 × 4 KiB = one window
		m, err := w.reserve(ctx, 4096)
		if err != nil {
			t.Fatal(err)
		}
		if m > 0 {
			marks = append(marks, m)
		}
	}
	if len(marks) != 4 || marks[0] != size/4 {
		t.Fatalf("marks %v, want four of %d", marks, size/4)
	}
	if w.available() != 0 {
		t.Fatalf("%d bytes of credit left in a full window", w.available())
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := w.reserve(short, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a full window let a publish through: %v", err)
	}
	got := make(chan error, 1)
	go func() { _, err := w.reserve(ctx, 4096); got <- err }()
	w.release(marks[0])
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if w.available() != size/4-4096 {
		t.Fatalf("credit %d after one mark's answer", w.available())
	}
}

// A publish larger than the window still goes through, counted as the most
// one publish may take.
func TestWindowOversizePublish(t *testing.T) {
	w := newWindow(64 << 10)
	m, err := w.reserve(context.Background(), 1<<20)
	if err != nil || m != 48<<10 {
		t.Fatalf("mark %d, err %v", m, err)
	}
}

func TestSplitHostPortAndServerName(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:7401": "127.0.0.1 7401", "broker.ns.svc:9": "broker.ns.svc 9", "[::1]:7400": "::1 7400",
		"[::1]": "::1 7400", "::1": "::1 7400", "broker": "broker 7400",
	} {
		h, p, err := splitHostPort(in)
		if err != nil || h+" "+itoa(p) != want {
			t.Fatalf("%q: %s %d %v", in, h, p, err)
		}
	}
	for _, bad := range []string{"", "host:", "host:0", "host:99999", ":80"} {
		if _, _, err := splitHostPort(bad); !errors.Is(err, ErrConfig) {
			t.Fatalf("%q accepted", bad)
		}
	}
	if serverNameFor("", "10.0.0.1") != "localhost" || serverNameFor("", "b.svc") != "b.svc" || serverNameFor("x", "10.0.0.1") != "x" {
		t.Fatal("server name defaults")
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
