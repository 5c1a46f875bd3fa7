package starling_test

// Cross-client queue groups: members of one group from this client and from
// the Rust SDK (`starling sub --group`, $STARLING_CLI_BIN) on one broker
// share its messages, none given twice. Skipped when either binary is not
// given.

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"starling.invalid/starling"
	"starling.invalid/starling/internal/testbroker"
)

// member runs `starling sub topic --group group` in the background, adding
// each line it prints to sh as name; stop kills it and waits for its output.
func (c *cli) member(ctx context.Context, t *testing.T, topic, group, name string, sh *share) (stop func()) {
	t.Helper()
	cmd := exec.CommandContext(ctx, c.bin, "--credentials", c.dir, "sub", topic, "--group", group)
	cmd.Env = testbroker.CleanEnv()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			sh.add(name, sc.Text())
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill() // an error once it exited
			<-read
			_ = cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestQueueGroupSharedWithRustMembers(t *testing.T) {
	t.Parallel()
	s := startSingle(t)
	rust := newCLI(t, s, appToken)
	c := s.connect(t, starling.TokenCredentials(appToken))
	ctx := ctxT(t)
	rctx, stopGo := context.WithCancel(ctx)
	defer stopGo()
	sh := newShare()
	var wg sync.WaitGroup
	for i := range 2 {
		sub, err := c.SubscribeGroup(ctx, "xjobs", "mixed")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Close()
		wg.Add(1)
		go func() { defer wg.Done(); drain(rctx, sub, fmt.Sprintf("go%d", i), sh) }()
	}
	stops := []func(){
		rust.member(ctx, t, "xjobs", "mixed", "rust0", sh),
		rust.member(ctx, t, "xjobs", "mixed", "rust1", sh),
	}
	// The CLI says nothing when it joined: publish probes until each Rust
	// member printed one (a probe sent before goes to a member already in).
	probes := 0
	joined := func() bool { return sh.per["rust0"] > 0 && sh.per["rust1"] > 0 }
	for deadline := time.Now().Add(testbroker.Soon); ; probes++ {
		sh.mu.Lock()
		ok := joined()
		sh.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Rust members got none of %d probes: %v", probes, sh.per)
		}
		if err := c.PublishAcked(ctx, "xjobs", fmt.Appendf(nil, "probe-%d", probes)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	const n = 200
	for i := range n {
		if err := c.PublishAcked(ctx, "xjobs", fmt.Appendf(nil, "job-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	sh.waitFor(t, "every probe and job", func() bool { return sh.total >= probes+n })
	time.Sleep(300 * time.Millisecond) // room for a duplicate to show
	for _, stop := range stops {
		stop()
	}
	stopGo()
	wg.Wait()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.total != probes+n || len(sh.by) != probes+n {
		t.Fatalf("%d events of %d distinct payloads, want %d each (%d probes): %v", sh.total, len(sh.by), probes+n, probes, sh.per)
	}
	for payload, got := range sh.by {
		if len(got) != 1 || !(strings.HasPrefix(payload, "job-") || strings.HasPrefix(payload, "probe-")) {
			t.Fatalf("%q went to %v", payload, got)
		}
	}
	jobs := map[string]int{}
	for i := range n {
		jobs[sh.by[fmt.Sprintf("job-%d", i)][0]]++
	}
	t.Logf("%d probes, then %d jobs shared among 2 Go and 2 Rust members: %v", probes, n, jobs)
}
