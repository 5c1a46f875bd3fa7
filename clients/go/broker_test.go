package starling_test

// Integration tests against a real broker built from this repository,
// started on loopback with authentication on (internal/testbroker). Skipped
// when STARLING_BROKER_BIN is unset.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
)

const (
	appToken     = "app-token-0123456789"
	readerToken  = "reader-token-0123456789"
	strangeToken = "not-a-known-token"
)

func usersDoc() string {
	return fmt.Sprintf(`version: 1
users:
  - name: app
    authentication: {type: token, sha256: "%s"}
    permissions:
      publish: {allow: [">"], deny: ["secret.>"]}
      subscribe: {allow: [">"], deny: ["secret.>"]}
      cache_read: {allow: [">"]}
      cache_write: {allow: [">"], deny: ["ro.>"]}
  - name: reader
    authentication: {type: token, sha256: "%s"}
    permissions:
      subscribe: {allow: [">"]}
  - name: billing
    authentication: {type: tls}
    permissions:
      publish: {allow: ["billing.>"]}
      subscribe: {allow: ["billing.>"]}
`, testbroker.TokenHash(appToken), testbroker.TokenHash(readerToken))
}

type single struct {
	setup  *testbroker.Setup
	broker *testbroker.Broker
}

func startSingle(t *testing.T) *single {
	t.Helper()
	testbroker.Bin(t)
	s := testbroker.NewSetup(t, usersDoc())
	return &single{setup: s, broker: s.Start(t, testbroker.Options{})}
}

func (s *single) config(t *testing.T, creds starling.Credentials) starling.Config {
	t.Helper()
	trust, err := starling.TrustCAPEM(s.setup.CA.PEM)
	if err != nil {
		t.Fatal(err)
	}
	return starling.Config{Server: s.broker.Addr, Trust: trust, Credentials: creds, RequestTimeout: 5 * time.Second}
}

func (s *single) connect(t *testing.T, creds starling.Credentials) *starling.Client {
	t.Helper()
	c, err := starling.Connect(ctxT(t), s.config(t, creds))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	t.Cleanup(cancel)
	return ctx
}

func next(t *testing.T, sub *starling.Subscription) starling.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testbroker.Soon)
	defer cancel()
	e, err := sub.Next(ctx)
	if err != nil {
		t.Fatalf("next event: %v", err)
	}
	return e
}

func TestPublishSubscribeEveryWay(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "orders.eu", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var want []string
	for i := range 20 {
		p := fmt.Sprintf("acked-%d", i)
		want = append(want, p)
		if err := c.PublishAcked(ctx, "orders.eu", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	var batch [][]byte
	for i := range 10 {
		p := fmt.Sprintf("batch-%d", i)
		want = append(want, p)
		batch = append(batch, []byte(p))
	}
	if err := c.PublishBatch(ctx, "orders.eu", batch, true); err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		p := fmt.Sprintf("fire-%d", i)
		want = append(want, p)
		if err := c.Publish(ctx, "orders.eu", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	batch = nil
	for i := range 5 {
		p := fmt.Sprintf("fire-batch-%d", i)
		want = append(want, p)
		batch = append(batch, []byte(p))
	}
	if err := c.PublishBatch(ctx, "orders.eu", batch, false); err != nil {
		t.Fatal(err)
	}
	var first starling.Event
	for i, w := range want {
		e := next(t, sub)
		if string(e.Payload) != w {
			t.Fatalf("event %d: %q, want %q", i, e.Payload, w)
		}
		if i == 0 {
			first = e
		} else if e.Seq != first.Seq+uint64(i) || e.Position.Stream != first.Position.Stream ||
			e.Position.Seq != first.Position.Seq+uint64(i) {
			t.Fatalf("event %d at %+v seq %d after %+v seq %d", i, e.Position, e.Seq, first.Position, first.Seq)
		}
	}
	if first.Position.Stream == 0 {
		t.Fatal("an event without a stream")
	}
	if sub.DroppedEvents() != 0 {
		t.Fatalf("%d events dropped", sub.DroppedEvents())
	}
}

func TestResumeFromAPositionAndFromATime(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "resume.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := c.PublishAcked(ctx, "resume.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		next(t, sub)
	}
	resume := sub.ResumePoint()
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.Next(ctx); !errors.Is(err, starling.ErrClosed) {
		t.Fatalf("next after close: %v", err)
	}
	// Times are whole milliseconds: keep the earlier batches out of mid's.
	time.Sleep(20 * time.Millisecond)
	mid := time.Now()
	time.Sleep(20 * time.Millisecond)
	for i := 5; i < 8; i++ {
		if err := c.PublishAcked(ctx, "resume.t", fmt.Appendf(nil, "m%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	again, err := c.Subscribe(ctx, "resume.t", starling.FromPosition(resume))
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	for i := 3; i < 8; i++ {
		e := next(t, again)
		if string(e.Payload) != fmt.Sprintf("m%d", i) {
			t.Fatalf("resumed event %q, want m%d", e.Payload, i)
		}
		if i == 3 && e.Position != resume {
			t.Fatalf("first resumed event at %+v, resume point %+v", e.Position, resume)
		}
	}
	fromTime, err := c.Subscribe(ctx, "resume.t", starling.FromTime(mid))
	if err != nil {
		t.Fatal(err)
	}
	defer fromTime.Close()
	if e := next(t, fromTime); string(e.Payload) != "m5" {
		t.Fatalf("from a time: first event %q, want m5", e.Payload)
	}
	everything, err := c.Subscribe(ctx, "resume.t", starling.FromTime(timeZero))
	if err != nil {
		t.Fatal(err)
	}
	defer everything.Close()
	if e := next(t, everything); string(e.Payload) != "m0" {
		t.Fatalf("from time 0: first event %q, want m0", e.Payload)
	}
}

func TestCachePutGetDeleteAndTTL(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	existed, err := c.CachePut(ctx, []byte("k1"), []byte("v1"), 0)
	if err != nil || existed {
		t.Fatalf("put: %v %v", existed, err)
	}
	if existed, err = c.CachePut(ctx, []byte("k1"), []byte("v2"), 0); err != nil || !existed {
		t.Fatalf("second put: %v %v", existed, err)
	}
	v, found, err := c.CacheGet(ctx, []byte("k1"))
	if err != nil || !found || string(v) != "v2" {
		t.Fatalf("get: %q %v %v", v, found, err)
	}
	if _, err := c.CachePut(ctx, []byte("empty"), nil, 0); err != nil {
		t.Fatal(err)
	}
	if v, found, err := c.CacheGet(ctx, []byte("empty")); err != nil || !found || len(v) != 0 {
		t.Fatalf("empty value: %q %v %v", v, found, err)
	}
	if existed, err := c.CacheDelete(ctx, []byte("k1")); err != nil || !existed {
		t.Fatalf("delete: %v %v", existed, err)
	}
	if _, found, err := c.CacheGet(ctx, []byte("k1")); err != nil || found {
		t.Fatalf("get after delete: %v %v", found, err)
	}
	if _, err := c.CachePut(ctx, []byte("short"), []byte("x"), 150*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(testbroker.Soon)
	for {
		_, found, err := c.CacheGet(ctx, []byte("short"))
		if err != nil {
			t.Fatal(err)
		}
		if !found {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a value with a 150 ms TTL did not expire")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, _, err := c.CacheGet(ctx, nil); !errors.Is(err, starling.ErrInvalidKey) {
		t.Fatalf("empty key: %v", err)
	}
	// Pipelined: many operations in flight at once share the stream pool.
	errs := make(chan error, 400)
	for i := range 400 {
		go func() {
			key := fmt.Appendf(nil, "p%d", i%50)
			if i%2 == 0 {
				_, err := c.CachePut(ctx, key, key, time.Minute)
				errs <- err
				return
			}
			v, found, err := c.CacheGet(ctx, key)
			if err == nil && found && string(v) != string(key) {
				err = fmt.Errorf("key %s holds %q", key, v)
			}
			errs <- err
		}()
	}
	for range 400 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestAuthenticationRefusals(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	ctx := ctxT(t)
	app := s.connect(t, starling.TokenCredentials(appToken))
	sub, err := app.Subscribe(ctx, "orders.eu", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	for name, creds := range map[string]starling.Credentials{
		"no credentials": {},
		"unknown token":  starling.TokenCredentials(strangeToken),
	} {
		_, err := starling.Connect(ctx, s.config(t, creds))
		var se *starling.ServerError
		if !errors.Is(err, starling.ErrUnauthorized) || !errors.As(err, &se) {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "unknown token" && (contains(se.Message, strangeToken)) {
			t.Fatalf("the token is echoed: %s", se.Message)
		}
	}
	nobody := s.setup.CA.Client(t, "nobody")
	creds, err := starling.CertificateCredentials(nobody.CertPEM, nobody.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := starling.Connect(ctx, s.config(t, creds)); !errors.Is(err, starling.ErrUnauthorized) {
		t.Fatalf("a certificate naming no user: %v", err)
	}
	// A certificate from another CA fails the TLS handshake.
	other := testbroker.NewCA(t, "other").Client(t, "billing")
	if creds, err = starling.CertificateCredentials(other.CertPEM, other.KeyPEM); err != nil {
		t.Fatal(err)
	}
	if _, err := starling.Connect(ctx, s.config(t, creds)); err == nil {
		t.Fatal("a certificate of another CA was accepted")
	}

	billing := s.setup.CA.Client(t, "billing")
	if creds, err = starling.CertificateCredentials(billing.CertPEM, billing.KeyPEM); err != nil {
		t.Fatal(err)
	}
	b := s.connect(t, creds)
	if err := b.PublishAcked(ctx, "billing.eu", []byte("ok")); err != nil {
		t.Fatalf("billing publishes its topic: %v", err)
	}
	err = b.PublishAcked(ctx, "orders.eu", []byte("no"))
	var se *starling.ServerError
	if !errors.Is(err, starling.ErrForbidden) || !errors.As(err, &se) || se.Op != "publish" || se.Name != "orders.eu" {
		t.Fatalf("billing publishes orders.eu: %v", err)
	}
	if _, err := app.Subscribe(ctx, "secret.x", starling.Live()); !errors.Is(err, starling.ErrForbidden) {
		t.Fatalf("app subscribes secret.x: %v", err)
	}
	if _, err := app.CachePut(ctx, []byte("ro.k"), []byte("v"), 0); !errors.Is(err, starling.ErrForbidden) {
		t.Fatalf("app writes ro.k: %v", err)
	}
	reader := s.connect(t, starling.TokenCredentials(readerToken))
	if _, _, err := reader.CacheGet(ctx, []byte("k")); !errors.Is(err, starling.ErrForbidden) {
		t.Fatalf("reader reads the cache: %v", err)
	}
	// The refusals left the connections and the bystander's subscription alone.
	if err := app.PublishAcked(ctx, "orders.eu", []byte("still here")); err != nil {
		t.Fatal(err)
	}
	if e := next(t, sub); string(e.Payload) != "still here" {
		t.Fatalf("got %q", e.Payload)
	}
}

func contains(s, sub string) bool { return len(sub) > 0 && len(s) >= len(sub) && indexOf(s, sub) >= 0 }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestTrustModesAndCredentialsDirectory(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	ctx := ctxT(t)
	fp := starling.CertificateFingerprint(s.setup.Server.DER)
	pinned, err := starling.TrustFingerprint(fmt.Sprintf("%X", fp[:]))
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.config(t, starling.TokenCredentials(appToken))
	for name, trust := range map[string]starling.Trust{"fingerprint": pinned, "insecure": starling.InsecureTrustAnyServer()} {
		cfg.Trust = trust
		c, err := starling.Connect(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		_ = c.Close()
	}
	wrong := fp
	wrong[0] ^= 1
	if cfg.Trust, err = starling.TrustFingerprint(fmt.Sprintf("%x", wrong[:])); err != nil {
		t.Fatal(err)
	}
	if _, err := starling.Connect(ctx, cfg); err == nil {
		t.Fatal("a wrong fingerprint was accepted")
	}
	// A CA that did not sign the server certificate.
	if cfg.Trust, err = starling.TrustCAPEM(testbroker.NewCA(t, "other").PEM); err != nil {
		t.Fatal(err)
	}
	if _, err := starling.Connect(ctx, cfg); err == nil {
		t.Fatal("a server certificate from another CA was accepted")
	}
	if _, err := starling.Connect(ctx, starling.Config{Server: s.broker.Addr}); !errors.Is(err, starling.ErrConfig) {
		t.Fatalf("no trust: %v", err)
	}

	dir := t.TempDir()
	for name, data := range map[string]string{"token": appToken + "\n", "ca.crt": string(s.setup.CA.PEM), "address": s.broker.Addr + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	found, err := starling.LoadCredentialsDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	dcfg, err := found.Config()
	if err != nil {
		t.Fatal(err)
	}
	c, err := starling.Connect(ctx, dcfg)
	if err != nil {
		t.Fatalf("connect from a credentials directory: %v", err)
	}
	defer c.Close()
	if err := c.PublishAcked(ctx, "orders.eu", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

func TestPublishWindowBoundsUnackedBytes(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	cfg := s.config(t, starling.TokenCredentials(appToken))
	cfg.PublishWindowBytes = starling.MinPublishWindowBytes
	cfg.PublishStreams = 1
	ctx := ctxT(t)
	c, err := starling.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sub, err := c.Subscribe(ctx, "window.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	payload := make([]byte, 1024)
	const n = 1000 // about 16 windows: only the window's acks let it through
	done := make(chan error, 1)
	go func() {
		for i := range n {
			payload[0] = byte(i)
			if err := c.Publish(ctx, "window.t", payload); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for i := range n {
		e := next(t, sub)
		if e.Payload[0] != byte(i) {
			t.Fatalf("event %d carries %d", i, e.Payload[0])
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCallbackAndIteratorForms(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "iter.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := c.PublishAcked(ctx, "iter.t", fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := 0
	for e, err := range sub.All(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if string(e.Payload) != fmt.Sprint(got) {
			t.Fatalf("iterator: %q", e.Payload)
		}
		if got++; got == 3 {
			break
		}
	}
	_ = sub.Close()

	stop := errors.New("enough")
	seen := 0
	cbCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	err = c.SubscribeFunc(cbCtx, "iter.t", starling.FromTime(timeZero), func(e starling.Event) error {
		if seen++; seen == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || seen != 3 {
		t.Fatalf("callback form: %v after %d events", err, seen)
	}
}

// timeZero asks for everything the broker still holds.
var timeZero = time.Unix(0, 0)

// Every ack level the broker can be configured with: an acked publish is
// acknowledged at that level, and what was acknowledged is delivered (and,
// persisted on a durable topic, survives a restart).
func TestEveryAckLevel(t *testing.T) {
	t.Parallel()
	testbroker.Bin(t)
	for _, level := range []string{"received", "committed", "persisted"} {
		t.Run(level, func(t *testing.T) {
			setup := testbroker.NewSetup(t, usersDoc())
			setup.Extra = fmt.Sprintf("ack_level: %s\ndurable_topics: [\"durable.>\"]\nstorage_dir: %q\nstorage_fsync: always\n",
				level, filepath.Join(setup.Dir, "data"))
			port := testbroker.FreePort(t)
			s := &single{setup: setup, broker: setup.Start(t, testbroker.Options{Port: port})}
			c := s.connect(t, starling.TokenCredentials(appToken))
			ctx := ctxT(t)
			for _, topic := range []string{"plain.t", "durable.t"} {
				sub, err := c.Subscribe(ctx, topic, starling.Live())
				if err != nil {
					t.Fatal(err)
				}
				if err := c.PublishBatch(ctx, topic, [][]byte{[]byte("a"), []byte("b")}, true); err != nil {
					t.Fatalf("%s: %v", topic, err)
				}
				for _, want := range []string{"a", "b"} {
					if e := next(t, sub); string(e.Payload) != want {
						t.Fatalf("%s: %q", topic, e.Payload)
					}
				}
				_ = sub.Close()
			}
			if level != "persisted" {
				return
			}
			_ = c.Close()
			s.broker.Stop()
			s.broker = setup.Start(t, testbroker.Options{Port: port})
			again := s.connect(t, starling.TokenCredentials(appToken))
			sub, err := again.Subscribe(ctx, "durable.t", starling.FromTime(timeZero))
			if err != nil {
				t.Fatal(err)
			}
			defer sub.Close()
			if e := next(t, sub); string(e.Payload) != "a" {
				t.Fatalf("after a restart the durable topic starts with %q", e.Payload)
			}
		})
	}
}

// A user removed from the users document is cut off: its subscription ends
// with Unauthorized (not retried) and its requests fail with it.
func TestRevokedUserIsCutOff(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(readerToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "orders.eu", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	without := strings.Replace(usersDoc(), "  - name: reader\n", "  - name: gone\n", 1)
	without = strings.Replace(without, testbroker.TokenHash(readerToken), testbroker.TokenHash("another-token-0123456789"), 1)
	path := filepath.Join(s.setup.Dir, "users.yaml")
	if err := os.WriteFile(path+".tmp", []byte(without), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
	_, err = sub.Next(ctx)
	if !errors.Is(err, starling.ErrUnauthorized) {
		t.Fatalf("the revoked user's subscription ended with %v", err)
	}
	if _, err := c.Subscribe(ctx, "orders.eu", starling.Live()); !errors.Is(err, starling.ErrUnauthorized) {
		t.Fatalf("a new subscription of a revoked user: %v", err)
	}
}

// A subscriber that does not read holds at most its buffer and its QUIC
// windows: the broker is pushed back and, under drop_new, drops what does
// not fit instead of the client buffering it all.
func TestSlowSubscriberIsPushedBackNotBuffered(t *testing.T) {
	t.Parallel()
	testbroker.Bin(t)
	setup := testbroker.NewSetup(t, usersDoc())
	setup.Extra = "slow_subscriber_policy: drop_new\nsubscriber_queue_capacity: 4\n"
	s := &single{setup: setup, broker: setup.Start(t, testbroker.Options{})}
	cfg := s.config(t, starling.TokenCredentials(appToken))
	cfg.SubscriptionBuffer = 1
	cfg.StreamReceiveWindow, cfg.ConnectionReceiveWindow = 256<<10, 512<<10
	ctx := ctxT(t)
	slow, err := starling.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	sub, err := slow.Subscribe(ctx, "slow.t", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	pub := s.connect(t, starling.TokenCredentials(appToken))
	payload := make([]byte, 8<<10)
	const n = 600 // 4.8 MB, many times the subscriber's windows
	for i := range n {
		if err := pub.PublishAcked(ctx, "slow.t", payload); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	// Read what reached the subscriber, publishing a marker now and then
	// until one arrives: its position shows the gap the broker's drops left.
	received := 0
	deadline := time.Now().Add(testbroker.Soon)
	for marker := 0; ; {
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		e, err := sub.Next(short)
		cancel()
		if err == nil && strings.HasPrefix(string(e.Payload), "marker") {
			break
		}
		if err == nil {
			received++
			continue
		}
		if time.Now().After(deadline) {
			t.Fatalf("no marker arrived; %d events received", received)
		}
		if err := pub.PublishAcked(ctx, "slow.t", fmt.Appendf(nil, "marker-%d", marker)); err != nil {
			t.Fatal(err)
		}
		marker++
	}
	if received >= n || sub.DroppedEvents() == 0 {
		t.Fatalf("received %d of %d, %d dropped: the client buffered everything", received, n, sub.DroppedEvents())
	}
	t.Logf("received %d of %d, the broker dropped %d", received, n, sub.DroppedEvents())
}

// A request larger than the broker's max_frame_bytes is refused before
// anything is sent, and the client goes on.
func TestFrameTooLargeIsRefusedLocally(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	big := make([]byte, c.ServerInfo().MaxFrameBytes)
	err := c.PublishAcked(ctx, "orders.eu", big)
	var tooLarge *starling.FrameTooLargeError
	if !errors.Is(err, starling.ErrFrameTooLarge) || !errors.As(err, &tooLarge) || tooLarge.Max != int(c.ServerInfo().MaxFrameBytes) {
		t.Fatalf("an oversized publish: %v", err)
	}
	if err := c.PublishAcked(ctx, "orders.eu", []byte("small")); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, "a b", nil); !errors.Is(err, starling.ErrInvalidTopic) {
		t.Fatalf("a topic with a space: %v", err)
	}
}
