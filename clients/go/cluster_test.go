package starling

// Cluster routing against real brokers (internal/testbroker): going straight
// to each owner, following Moved after a member joined, and a drain during
// which acked publishes retry Unavailable and a subscription resumes at the
// new owner without losing an acknowledged message.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"starling.invalid/starling/internal/placement"
	"starling.invalid/starling/internal/testbroker"
)

const clusterToken = "cluster-token-0123456789"

type testCluster struct {
	setup   *testbroker.Setup
	members string
	ports   map[string]int
	brokers map[string]*testbroker.Broker
}

func startCluster(t *testing.T, ids, listed []string) *testCluster {
	t.Helper()
	testbroker.Bin(t)
	users := fmt.Sprintf(`version: 1
users:
  - name: app
    authentication: {type: token, sha256: "%s"}
    permissions:
      publish: {allow: [">"]}
      subscribe: {allow: [">"]}
      cache_read: {allow: [">"]}
      cache_write: {allow: [">"]}
`, testbroker.TokenHash(clusterToken))
	tc := &testCluster{setup: testbroker.NewSetup(t, users), ports: map[string]int{}, brokers: map[string]*testbroker.Broker{}}
	tc.members = filepath.Join(tc.setup.Dir, "members")
	for _, id := range []string{"a", "b", "c"} {
		tc.ports[id] = testbroker.FreePort(t)
	}
	testbroker.WriteMembers(t, tc.members, listed, tc.ports)
	for _, id := range ids {
		tc.start(t, id)
	}
	return tc
}

func (tc *testCluster) start(t *testing.T, id string) {
	tc.brokers[id] = tc.setup.Start(t, testbroker.Options{ID: id, Port: tc.ports[id], MembersFile: tc.members})
}

func (tc *testCluster) client(t *testing.T, via string) *Client {
	t.Helper()
	trust, err := TrustCAPEM(tc.setup.CA.PEM)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	c, err := Connect(ctx, Config{Server: tc.brokers[via].Addr, Trust: trust,
		Credentials: TokenCredentials(clusterToken), ClusterRefresh: time.Hour, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitMembers waits until broker via lists exactly n members.
func waitMembers(t *testing.T, c *Client, n int) uint64 {
	t.Helper()
	deadline := time.Now().Add(testbroker.Soon)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.bootstrap.clusterInfo(ctx)
		cancel()
		if err == nil && len(info.Members) == n {
			return info.Epoch
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not reach %d members: %v %v", n, info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ownedBy is a name with prefix whose owner among ids is want.
func ownedBy(kind placement.Kind, prefix string, ids []string, want string) string {
	for i := 0; ; i++ {
		name := fmt.Sprintf("%s-%d", prefix, i)
		if ids[placement.Owner(ids, kind, []byte(name))] == want {
			return name
		}
	}
}

// routedTo waits for the client's connection to the owner of key and
// returns the server id of the broker a request for key goes to.
func routedTo(t *testing.T, c *Client, kind placement.Kind, key string) string {
	t.Helper()
	deadline := time.Now().Add(testbroker.Soon)
	for {
		if n, _ := c.router.target(kind, []byte(key)); n != nil {
			return n.info.ServerID
		}
		if time.Now().After(deadline) {
			t.Fatalf("no member connection for %q", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestClusterRoutesToOwnersAndFollowsMoved(t *testing.T) {
	t.Parallel()
	tc := startCluster(t, []string{"a", "b"}, []string{"a", "b"})
	c := tc.client(t, "a")
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	two := []string{"a", "b"}
	for _, owner := range two {
		topic := ownedBy(placement.Topic, "t", two, owner)
		if got := routedTo(t, c, placement.Topic, topic); got != owner {
			t.Fatalf("topic %s owned by %s goes to %s", topic, owner, got)
		}
		sub, err := c.Subscribe(ctx, topic, Live())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.PublishAcked(ctx, topic, []byte(owner)); err != nil {
			t.Fatal(err)
		}
		if e, err := sub.Next(ctx); err != nil || string(e.Payload) != owner {
			t.Fatalf("event %q %v", e.Payload, err)
		}
		_ = sub.Close()
		key := ownedBy(placement.CacheKey, "k", two, owner)
		if got := routedTo(t, c, placement.CacheKey, key); got != owner {
			t.Fatalf("key %s owned by %s goes to %s", key, owner, got)
		}
		if _, err := c.CachePut(ctx, []byte(key), []byte(owner), 0); err != nil {
			t.Fatal(err)
		}
	}
	before := c.RoutingEpoch()

	// c joins. The client's view (refreshed hourly) still has two members,
	// so it sends a key c now owns to its former owner, which answers Moved.
	tc.start(t, "c")
	three := []string{"a", "b", "c"}
	testbroker.WriteMembers(t, tc.members, three, tc.ports)
	after := waitMembers(t, c, 3)
	for _, id := range two { // every member sees the change before the request
		deadline := time.Now().Add(testbroker.Soon)
		for {
			other := tc.client(t, id)
			if other.RoutingEpoch() == after {
				_ = other.Close()
				break
			}
			_ = other.Close()
			if time.Now().After(deadline) {
				t.Fatalf("member %s did not learn of c", id)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	key := ownedBy(placement.CacheKey, "moved", three, "c")
	if c.RoutingEpoch() != before {
		t.Fatal("the client refreshed on its own")
	}
	if _, err := c.CachePut(ctx, []byte(key), []byte("v"), 0); err != nil {
		t.Fatalf("a put answered Moved was not retried: %v", err)
	}
	if got := c.RoutingEpoch(); got != after {
		t.Fatalf("routing epoch %#x after Moved, want %#x", got, after)
	}
	if v, found, err := c.CacheGet(ctx, []byte(key)); err != nil || !found || string(v) != "v" {
		t.Fatalf("get: %q %v %v", v, found, err)
	}
	if got := routedTo(t, c, placement.CacheKey, key); got != "c" {
		t.Fatalf("key %s now goes to %s", key, got)
	}
}

func TestClusterDrainLosesNoAckedMessage(t *testing.T) {
	t.Parallel()
	three := []string{"a", "b", "c"}
	tc := startCluster(t, three, three)
	c := tc.client(t, "a")
	waitMembers(t, c, 3)
	topic := ownedBy(placement.Topic, "drain", three, "c")
	if got := routedTo(t, c, placement.Topic, topic); got != "c" {
		t.Fatalf("goes to %s", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*testbroker.Soon)
	defer cancel()
	sub, err := c.Subscribe(ctx, topic, Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	var mu sync.Mutex
	var acked []int
	var pubErr error
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := c.PublishAcked(ctx, topic, fmt.Appendf(nil, "%d", i))
			mu.Lock()
			if err == nil {
				acked = append(acked, i)
			} else if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrMoved) {
				pubErr = err
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	waitFor := func(n int) {
		deadline := time.Now().Add(testbroker.Soon)
		for count() < n {
			if time.Now().After(deadline) {
				t.Fatalf("only %d publishes acked", count())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor(30)
	testbroker.WriteMembers(t, tc.members, []string{"a", "b"}, tc.ports)
	tc.brokers["c"].Terminate()
	<-tc.brokers["c"].Exited()
	n := count()
	waitFor(n + 30)
	close(stop)
	<-done
	mu.Lock()
	defer mu.Unlock()
	if pubErr != nil {
		t.Fatalf("a publish failed with more than Unavailable or Moved: %v", pubErr)
	}
	got := map[string]bool{}
	for _, i := range acked {
		for !got[fmt.Sprint(i)] {
			e, err := sub.Next(ctx)
			if err != nil {
				t.Fatalf("acked message %d never arrived (%d of %d acked): %v", i, len(got), len(acked), err)
			}
			got[string(e.Payload)] = true
		}
	}
}
