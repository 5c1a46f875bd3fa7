package starling_test

// Cross-client tests of durable consumers and publish de-duplication: this
// client and the Rust SDK (the `starling` CLI, $STARLING_CLI_BIN) as members
// of one consumer, and publishing the same message id. Skipped when either
// binary is not given.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"starling.invalid/starling"
)

type cliDelivery struct {
	Topic    string `json:"topic"`
	Position struct {
		Stream uint64 `json:"stream"`
		Seq    uint64 `json:"seq"`
	} `json:"position"`
	Delivery    uint32 `json:"delivery"`
	TimestampMs uint64 `json:"timestamp_ms"`
	Payload     string `json:"payload"`
}

// A Rust member (with the CLI's default settings) acks some jobs; a Go
// member with zero ConsumerOptions joins the same consumer (the settings
// agree) and gets the rest, at the same positions.
func TestRustAndGoMembersShareAConsumer(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	cl := newCLI(t, &b.single, appToken)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	publishJobs(t, c, "jobs.x", 0, 5)
	out := cl.run(ctx, t, "", "--output", "json", "consume", "jobs.x", "--name", "shared", "--count", "2")
	var rust []cliDelivery
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		var d cliDelivery
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		rust = append(rust, d)
	}
	if len(rust) != 2 || rust[0].Payload != "job-0" || rust[1].Payload != "job-1" || rust[0].Delivery != 1 {
		t.Fatalf("the CLI consumed %+v", rust)
	}
	cons := consume(t, c, "jobs.x", "shared", starling.ConsumerOptions{})
	got := map[string]starling.Delivery{}
	for range 3 {
		d := nextDelivery(t, cons)
		got[string(d.Payload)] = d
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i := 2; i < 5; i++ {
		d, ok := got[fmt.Sprintf("job-%d", i)]
		if !ok {
			t.Fatalf("the Go member got %v, not job-%d", got, i)
		}
		if d.Position.Stream != rust[0].Position.Stream || d.Position.Seq != rust[0].Position.Seq+uint64(i) {
			t.Fatalf("job-%d at %+v, job-0 at %+v", i, d.Position, rust[0].Position)
		}
	}
	noDelivery(t, cons, 500*time.Millisecond)
}

// A message id is the same to both clients: what one published, a repeat
// from the other is dropped, and the id reaches a Go subscriber.
func TestRustAndGoShareMsgIDs(t *testing.T) {
	t.Parallel()
	b := startDurable(t)
	cl := newCLI(t, &b.single, appToken)
	c := b.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	sub, err := c.Subscribe(ctx, "dedup.x", starling.Live())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := c.PublishMessage(ctx, "dedup.x", starling.Message{Payload: []byte("from go")}.WithMsgID("m1"), true); err != nil {
		t.Fatal(err)
	}
	cl.run(ctx, t, "", "pub", "dedup.x", "from rust, a repeat", "--msg-id", "m1", "--ack")
	cl.run(ctx, t, "", "pub", "dedup.x", "from rust", "--msg-id", "m2", "--ack")
	if err := c.PublishMessage(ctx, "dedup.x", starling.Message{Payload: []byte("from go, a repeat")}.WithMsgID("m2"), true); err != nil {
		t.Fatal(err)
	}
	if err := c.PublishAcked(ctx, "dedup.x", []byte("last")); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][2]string{{"from go", "m1"}, {"from rust", "m2"}, {"last", ""}} {
		e := next(t, sub)
		id, _ := e.MsgID()
		if string(e.Payload) != want[0] || id != want[1] {
			t.Fatalf("%q id %q, want %q id %q", e.Payload, id, want[0], want[1])
		}
	}
}
