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

func benchClient(b *testing.B) (*starling.Client, starling.Config) {
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
	cfg := starling.Config{Server: br.Addr, Trust: trust,
		Credentials: starling.TokenCredentials(appToken), RequestTimeout: 10 * time.Second,
		PublishStreams: 1, DisableClusterRouting: true}
	c, err := starling.Connect(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c, cfg
}

func BenchmarkPublish256(b *testing.B) {
	c, _ := benchClient(b)
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
	c, _ := benchClient(b)
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

// One publisher, ten subscribers on clients of their own (the 1p10s-4KB
// shape of bench/workloads.txt).
func BenchmarkFanOut10x4KB(b *testing.B) {
	c, cfg := benchClient(b)
	ctx := context.Background()
	const fan = 10
	subs := make([]*starling.Subscription, fan)
	for i := range subs {
		sc, err := starling.Connect(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sc.Close() })
		if subs[i], err = sc.Subscribe(ctx, "bench.fan", starling.Live()); err != nil {
			b.Fatal(err)
		}
	}
	payload := make([]byte, 4096)
	b.SetBytes(int64(len(payload)) * fan)
	b.ReportAllocs()
	b.ResetTimer()
	n := b.N
	errs := make(chan error, fan+1)
	for _, sub := range subs {
		go func() {
			rctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			for range n {
				if _, err := sub.Next(rctx); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range n {
		if err := c.Publish(ctx, "bench.fan", payload); err != nil {
			b.Fatal(err)
		}
	}
	for range fan {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	for _, sub := range subs {
		_ = sub.Close()
	}
}
