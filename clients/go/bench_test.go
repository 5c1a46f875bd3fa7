package starling_test

// Benchmarks of the client's hot paths against the real broker (skipped when
// STARLING_BROKER_BIN is unset): fire-and-forget publishing, and publishing
// with one subscriber reading every event. Their allocations per message
// are the client's own; their rates depend on the broker's build.
//
//	STARLING_BROKER_BIN=… go test -run '^$' -bench . -benchmem -cpuprofile cpu.out

import (
	"context"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
)

func benchClient(b *testing.B) *starling.Client {
	b.Helper()
	testbroker.Bin(b)
	s := testbroker.NewSetup(b, usersDoc())
	br := s.Start(b, testbroker.Options{})
	trust, err := starling.TrustCAPEM(s.CA.PEM)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	c, err := starling.Connect(ctx, starling.Config{Server: br.Addr, Trust: trust,
		Credentials: starling.TokenCredentials(appToken), RequestTimeout: 10 * time.Second,
		PublishStreams: 1, DisableClusterRouting: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func BenchmarkPublish256(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	payload := make([]byte, 256)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Publish(ctx, "bench.pub", payload); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.PublishAcked(ctx, "bench.pub", payload); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkPublishSubscribe256(b *testing.B) {
	c := benchClient(b)
	ctx := context.Background()
	sub, err := c.Subscribe(ctx, "bench.ps", starling.Live())
	if err != nil {
		b.Fatal(err)
	}
	defer sub.Close()
	payload := make([]byte, 256)
	done := make(chan error, 1)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	n := b.N
	go func() {
		for range n {
			if err := c.Publish(ctx, "bench.ps", payload); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for i := range n {
		if _, err := sub.Next(rctx); err != nil {
			b.Fatalf("event %d of %d: %v (dropped %d)", i, n, err, sub.DroppedEvents())
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
