package starling_test

// Cross-client tests: this client and the Rust SDK (through the `starling`
// CLI, $STARLING_CLI_BIN) on one broker, each publishing what the other
// subscribes to; every payload and position compared. Skipped when either
// binary is not given.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
)

const cliEnv = "STARLING_CLI_BIN"

type cliEvent struct {
	Topic    string `json:"topic"`
	Seq      uint64 `json:"seq"`
	Position struct {
		Stream uint64 `json:"stream"`
		Seq    uint64 `json:"seq"`
	} `json:"position"`
	Payload       *string `json:"payload"`
	PayloadBase64 *string `json:"payload_base64"`
}

func (e cliEvent) bytes(t *testing.T) []byte {
	if e.Payload != nil {
		return []byte(*e.Payload)
	}
	if e.PayloadBase64 == nil {
		t.Fatalf("an event line without a payload: %+v", e)
	}
	b, err := base64.StdEncoding.DecodeString(*e.PayloadBase64)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type cli struct {
	bin, dir string
}

func newCLI(t *testing.T, s *single, token string) *cli {
	t.Helper()
	bin := os.Getenv(cliEnv)
	if bin == "" {
		t.Skipf("%s is not set: build the CLI (cargo build -p starling-cli) and set it to run the cross-client tests", cliEnv)
	}
	dir := t.TempDir()
	for name, data := range map[string]string{"token": token, "ca.crt": string(s.setup.CA.PEM), "address": s.broker.Addr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return &cli{bin: bin, dir: dir}
}

func (c *cli) run(ctx context.Context, t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.bin, append([]string{"--credentials", c.dir}, args...)...)
	cmd.Env = testbroker.CleanEnv()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("starling %v: %v\n%s", args, err, errOut.String())
	}
	return out.String()
}

// events runs `starling sub TOPIC --from-time 0 --count n --output json`.
func (c *cli) events(ctx context.Context, t *testing.T, topic string, n int) []cliEvent {
	t.Helper()
	out := c.run(ctx, t, "", "sub", topic, "--from-time", "0", "--count", fmt.Sprint(n), "--output", "json")
	var evs []cliEvent
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e cliEvent
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		evs = append(evs, e)
	}
	if len(evs) != n {
		t.Fatalf("the CLI printed %d events, want %d", len(evs), n)
	}
	return evs
}

func goEvents(t *testing.T, c *starling.Client, topic string, n int) []starling.Event {
	t.Helper()
	sub, err := c.Subscribe(ctxT(t), topic, starling.FromTime(timeZero))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var out []starling.Event
	for range n {
		out = append(out, next(t, sub))
	}
	return out
}

func compare(t *testing.T, want [][]byte, rust []cliEvent, gos []starling.Event) {
	t.Helper()
	for i := range want {
		r, g := rust[i], gos[i]
		if !bytes.Equal(r.bytes(t), want[i]) || !bytes.Equal(g.Payload, want[i]) {
			t.Fatalf("event %d: rust %q, go %q, want %q", i, r.bytes(t), g.Payload, want[i])
		}
		if r.Position.Stream != g.Position.Stream || r.Position.Seq != g.Position.Seq || r.Seq != g.Seq {
			t.Fatalf("event %d: rust at %+v seq %d, go at %+v seq %d", i, r.Position, r.Seq, g.Position, g.Seq)
		}
		if i > 0 && g.Position.Seq != gos[i-1].Position.Seq+1 {
			t.Fatalf("event %d not consecutive: %+v after %+v", i, g.Position, gos[i-1].Position)
		}
	}
}

func TestGoPublishesRustSubscribes(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	var want [][]byte
	for i := range 40 {
		p := fmt.Appendf(nil, "go-%d ünïcödé", i)
		if i%10 == 9 {
			p = []byte{0xff, 0x00, byte(i), 0xfe} // not UTF-8: base64 in the CLI's JSON
		}
		want = append(want, p)
	}
	for _, p := range want[:20] {
		if err := c.PublishAcked(ctx, "cross.go", p); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.PublishBatch(ctx, "cross.go", want[20:], true); err != nil {
		t.Fatal(err)
	}
	compare(t, want, rust.events(ctx, t, "cross.go", len(want)), goEvents(t, c, "cross.go", len(want)))
}

func TestRustPublishesGoSubscribes(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	live, err := c.Subscribe(ctx, "cross.rust", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	var want [][]byte
	var lines strings.Builder
	for i := range 40 {
		p := fmt.Sprintf("rust-%d", i)
		want = append(want, []byte(p))
		lines.WriteString(p + "\n")
	}
	rust.run(ctx, t, lines.String(), "pub", "cross.rust", "-", "--ack")
	var got []starling.Event
	for range want {
		got = append(got, next(t, live))
	}
	compare(t, want, rust.events(ctx, t, "cross.rust", len(want)), got)
}
