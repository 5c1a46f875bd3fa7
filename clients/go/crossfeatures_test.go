package starling_test

// Cross-client tests of headers and request/reply: this client and the Rust
// SDK (the `starling` CLI, $STARLING_CLI_BIN) on one broker, each sending
// what the other receives. Skipped when either binary is not given.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
)

// start runs the CLI in the background; wait returns its output once it
// exited (an error saying why when it failed).
func (c *cli) start(ctx context.Context, t *testing.T, args ...string) (wait func() (string, error)) {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--credentials", c.dir}, args...)...)
	cmd.Env = testbroker.CleanEnv()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var res error
	waited := make(chan struct{})
	go func() { res = cmd.Wait(); close(waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // an error once it exited
		<-waited
	})
	return func() (string, error) {
		<-waited
		if res != nil {
			return "", fmt.Errorf("starling %v: %w\n%s", args, res, errOut.String())
		}
		return out.String(), nil
	}
}

// exited reports, without waiting, whether a background CLI ended.
func exited(cmdDone <-chan struct{}) bool {
	select {
	case <-cmdDone:
		return true
	default:
		return false
	}
}

type cliHeaderEvent struct {
	Topic   string            `json:"topic"`
	Payload string            `json:"payload"`
	Headers []starling.Header `json:"headers"`
}

func TestGoPublishesHeadersRustReceives(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	wait := rust.start(ctx, t, "sub", "xhdr.*", "--count", "1", "--output", "json")
	finished := make(chan struct{})
	var out string
	var cliErr error
	go func() { out, cliErr = wait(); close(finished) }()
	hs := []starling.Header{{Name: "traceparent", Value: "00-ab-ünï"}, {Name: "empty", Value: ""}, {Name: "traceparent", Value: "twice"}}
	// Headers are live only: publish until the CLI's live subscription got one.
	for !exited(finished) {
		if err := c.PublishMessage(ctx, "xhdr.go", starling.Message{Payload: []byte("from go"), Headers: hs}, true); err != nil {
			t.Fatal(err)
		}
		select {
		case <-finished:
		case <-time.After(50 * time.Millisecond):
		}
	}
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	var e cliHeaderEvent
	if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &e); err != nil {
		t.Fatalf("bad line %q: %v", out, err)
	}
	if e.Topic != "xhdr.go" || e.Payload != "from go" || fmt.Sprint(e.Headers) != fmt.Sprint(hs) {
		t.Fatalf("the CLI received %+v, want topic xhdr.go, payload %q, headers %v", e, "from go", hs)
	}
}

func TestRustPublishesHeadersGoReceives(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "xhdr.>", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rust.run(ctx, t, "", "pub", "xhdr.rust.1", "from rust", "--ack", "-H", "trace=a=b", "--header", "empty=", "--count", "2")
	want := []starling.Header{{Name: "trace", Value: "a=b"}, {Name: "empty", Value: ""}}
	for range 2 {
		e := next(t, sub)
		if e.Topic != "xhdr.rust.1" || string(e.Payload) != "from rust" || fmt.Sprint(e.Headers) != fmt.Sprint(want) {
			t.Fatalf("go received %s %q %v, want headers %v", e.Topic, e.Payload, e.Headers, want)
		}
	}
}

func TestGoRequestsRustReplies(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	wait := rust.start(ctx, t, "reply", "xsvc.*", "pong from rust", "--count", "3")
	deadline := time.Now().Add(testbroker.Soon)
	for answered := 0; answered < 3; {
		r, err := c.Request(ctx, fmt.Sprintf("xsvc.n%d", answered), []byte("ping"))
		switch {
		case err == nil:
			if string(r.Payload) != "pong from rust" {
				t.Fatalf("reply %q", r.Payload)
			}
			answered++
		case errors.Is(err, starling.ErrNoResponders) && time.Now().Before(deadline):
			time.Sleep(20 * time.Millisecond) // the CLI has not subscribed yet
		default:
			t.Fatal(err)
		}
	}
	if _, err := wait(); err != nil {
		t.Fatal(err)
	}
}

func TestRustRequestsGoReplies(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	rctx, stop := context.WithCancel(ctx)
	registered := make(chan struct{})
	served := make(chan error, 1)
	go func() {
		sub, err := c.Subscribe(rctx, "xsvc.go", starling.Live())
		close(registered)
		if err != nil {
			served <- err
			return
		}
		defer sub.Close()
		for e, err := range sub.All(rctx) {
			if err != nil {
				served <- nil
				return
			}
			if err := c.Reply(rctx, e, append([]byte("go says "), e.Payload...)); err != nil {
				served <- err
				return
			}
		}
	}()
	<-registered
	out := rust.run(ctx, t, "", "req", "xsvc.go", "hello")
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(out))
	if !sc.Scan() || sc.Text() != "go says hello" {
		t.Fatalf("the CLI printed %q", out)
	}
	// The Respond helper answers the CLI too.
	rctx, stop = context.WithCancel(ctx)
	defer stop()
	go func() {
		served <- c.Respond(rctx, "xsvc.respond", func(_ context.Context, e starling.Event) (starling.Message, error) {
			return starling.Message{Payload: bytes.ToUpper(e.Payload)}, nil
		})
	}()
	deadline := time.Now().Add(testbroker.Soon)
	for {
		cmd := exec.CommandContext(ctx, rust.bin, "--credentials", rust.dir, "req", "xsvc.respond", "shout")
		cmd.Env = testbroker.CleanEnv()
		got, err := cmd.Output()
		if err == nil {
			if strings.TrimSpace(string(got)) != "SHOUT" {
				t.Fatalf("the CLI printed %q", got)
			}
			break
		}
		// Exit 5: no responders yet (Respond subscribes in the background).
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 5 || time.Now().After(deadline) {
			t.Fatalf("starling req: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}
