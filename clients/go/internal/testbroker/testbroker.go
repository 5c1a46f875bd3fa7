// Package testbroker starts real starling-broker processes for the Go
// client's integration tests: on loopback, with a test PKI, a users document
// and authentication on, alone or as a cluster. The binary comes from
// $STARLING_BROKER_BIN (cargo build -p starling-broker); without it the tests
// that need a broker are skipped with a message saying so.
package testbroker

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Env names the variable holding the broker binary's path.
const Env = "STARLING_BROKER_BIN"

// Soon bounds anything that should happen soon on a loaded 2-core machine.
const Soon = 20 * time.Second

// Bin is the broker binary, or skips the test when Env is unset.
func Bin(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv(Env)
	if bin == "" {
		tb.Skipf("%s is not set: build the broker (cargo build -p starling-broker) and set it to the binary to run the integration tests", Env)
	}
	if _, err := os.Stat(bin); err != nil {
		tb.Fatalf("%s=%s: %v", Env, bin, err)
	}
	return bin
}

// TokenHash is the hex SHA-256 of a token, as the users document holds it.
func TokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// handedOut holds every port FreePort returned: tests run in parallel, and
// a port released by one FreePort call must not be returned to another test
// before the first test's broker binds it.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// FreePort is a loopback port free for UDP and TCP at the time of asking,
// never returned before in this process.
func FreePort(tb testing.TB) int {
	tb.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 50 {
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			tb.Fatal(err)
		}
		port := u.LocalAddr().(*net.UDPAddr).Port
		t, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
		_ = u.Close()
		if err == nil {
			_ = t.Close()
			if !handedOut.ports[port] {
				handedOut.ports[port] = true
				return port
			}
		}
	}
	tb.Fatal("no free port")
	return 0
}

// Setup holds what every broker of a test shares: its directory, PKI and
// users document.
type Setup struct {
	// Dir holds the certificates, the users document and the logs.
	Dir string
	// CA signs the server, peer and client certificates.
	CA *CA
	// Server is the brokers' server certificate.
	Server Leaf
	// Users is the users document (YAML); "" runs with auth_mode: none.
	Users string
	// Extra is appended to every broker's config file.
	Extra string
}

// NewSetup makes the PKI in a temporary directory.
func NewSetup(tb testing.TB, users string) *Setup {
	tb.Helper()
	dir := tb.TempDir()
	ca := NewCA(tb, "starling go test CA")
	s := &Setup{Dir: dir, CA: ca, Server: ca.Server(tb, "localhost"), Users: users}
	peer := ca.Client(tb, "starling:peer")
	for name, data := range map[string][]byte{
		"ca.crt": ca.PEM, "tls.crt": s.Server.CertPEM, "tls.key": s.Server.KeyPEM,
		"peer.crt": peer.CertPEM, "peer.key": peer.KeyPEM, "users.yaml": []byte(users),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// Broker is one running broker process.
type Broker struct {
	// ID is its member id; Addr its QUIC host:port; HTTP its HTTP host:port.
	ID, Addr, HTTP string
	cmd            *exec.Cmd
	log            *bytes.Buffer
	exited         chan struct{}
}

// Options of one broker.
type Options struct {
	// ID is the member id (POD_NAME); "" for a single broker.
	ID string
	// Port is the QUIC port (0: a free one).
	Port int
	// MembersFile makes it a cluster member.
	MembersFile string
}

// Start starts a broker and waits until its HTTP health check answers. A
// broker that exits at start is started again on fresh ports (twice at
// most) when the test did not choose its port: another socket of the
// process (a client's, on an ephemeral port) may have taken one of them
// since FreePort released it.
func (s *Setup) Start(tb testing.TB, o Options) *Broker {
	tb.Helper()
	for attempt := 1; ; attempt++ {
		retry := o.Port == 0 && attempt < 3
		b, exited := s.start(tb, o, retry)
		if !exited {
			return b
		}
		tb.Logf("broker exited at start (attempt %d), trying fresh ports:\n%s", attempt, b.Log())
	}
}

// start starts one broker; with mayRetry a broker that exits before it is
// healthy is reported (true) rather than failing the test.
func (s *Setup) start(tb testing.TB, o Options, mayRetry bool) (*Broker, bool) {
	tb.Helper()
	bin := Bin(tb)
	if o.Port == 0 {
		o.Port = FreePort(tb)
	}
	httpPort := FreePort(tb)
	name := o.ID
	if name == "" {
		name = "broker"
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "quic_listen: \"127.0.0.1:%d\"\nhttp_listen: \"127.0.0.1:%d\"\n", o.Port, httpPort)
	fmt.Fprintf(&cfg, "tls_cert_file: %q\ntls_key_file: %q\n", filepath.Join(s.Dir, "tls.crt"), filepath.Join(s.Dir, "tls.key"))
	fmt.Fprintf(&cfg, "auth_client_ca_file: %q\nauth_reload_interval_ms: 200\n", filepath.Join(s.Dir, "ca.crt"))
	if s.Users != "" {
		fmt.Fprintf(&cfg, "auth_mode: required\nauth_users_file: %q\n", filepath.Join(s.Dir, "users.yaml"))
	} else {
		cfg.WriteString("auth_mode: none\n")
	}
	if o.MembersFile != "" {
		fmt.Fprintf(&cfg, "cluster_members_file: %q\ncluster_poll_interval_ms: 100\n", o.MembersFile)
		fmt.Fprintf(&cfg, "cluster_peer_cert_file: %q\ncluster_peer_key_file: %q\n", filepath.Join(s.Dir, "peer.crt"), filepath.Join(s.Dir, "peer.key"))
		cfg.WriteString("cluster_peer_timeout_ms: 300\ndrain_timeout_ms: 3000\n")
	}
	cfg.WriteString(s.Extra)
	path := filepath.Join(s.Dir, name+".yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	b := &Broker{ID: o.ID, Addr: fmt.Sprintf("127.0.0.1:%d", o.Port), HTTP: fmt.Sprintf("127.0.0.1:%d", httpPort),
		log: &bytes.Buffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(bin, "--config", path)
	b.cmd.Env = append(CleanEnv(), "POD_NAME="+name, "RUST_LOG=warn")
	b.cmd.Stdout, b.cmd.Stderr = &lockedWriter{b: b.log}, &lockedWriter{b: b.log}
	if err := b.cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = b.cmd.Wait(); close(b.exited) }()
	tb.Cleanup(func() {
		b.Kill()
		if tb.Failed() {
			tb.Logf("broker %s log:\n%s", name, b.Log())
		}
	})
	deadline := time.Now().Add(Soon)
	for {
		resp, err := http.Get("http://" + b.HTTP + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, false
			}
		}
		select {
		case <-b.exited:
			if mayRetry {
				return b, true
			}
			tb.Fatalf("broker %s exited at start:\n%s", name, b.Log())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("broker %s not healthy within %s:\n%s", name, Soon, b.Log())
		}
	}
}

// CleanEnv is this process's environment without STARLING_* variables: the
// broker refuses unknown ones (this package's own STARLING_BROKER_BIN among
// them), and the tests' brokers and CLIs take their settings from their
// arguments and config files only.
func CleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STARLING_") {
			env = append(env, kv)
		}
	}
	return env
}

// Log is the broker's output so far.
func (b *Broker) Log() string {
	logMu.Lock()
	defer logMu.Unlock()
	return b.log.String()
}

// Stop sends SIGTERM (the drain) and waits for the process to exit.
func (b *Broker) Stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(Soon):
		b.Kill()
	}
}

// Terminate sends SIGTERM and returns at once (the broker drains meanwhile).
func (b *Broker) Terminate() { _ = b.cmd.Process.Signal(syscall.SIGTERM) }

// Exited is closed when the process has exited.
func (b *Broker) Exited() <-chan struct{} { return b.exited }

// Kill stops the process at once and waits for it.
func (b *Broker) Kill() {
	select {
	case <-b.exited:
		return
	default:
	}
	_ = b.cmd.Process.Kill()
	<-b.exited
}

// WriteMembers writes a members file listing brokers id → port.
func WriteMembers(tb testing.TB, path string, ids []string, ports map[string]int) {
	tb.Helper()
	var s strings.Builder
	for _, id := range ids {
		fmt.Fprintf(&s, "%s 127.0.0.1:%d\n", id, ports[id])
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s.String()), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}
