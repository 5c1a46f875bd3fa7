// nats-load: the NATS side of Starling's benchmark. It runs the pub/sub
// workload of `starling bench` against a nats-server with the same
// methodology — 24-byte timestamp/sequence header, per-subscriber loss and
// order checks, HDR latency histograms, open loop (--rate) measured from
// the intended send time — and writes the same JSON schema.
//
// NATS core has no end-to-end flow control: a publisher faster than its
// subscribers makes the server cut them off as slow consumers. In closed
// loop each producer therefore keeps at most --max-inflight-bytes of its
// topic's messages unreceived by the slowest subscriber (an in-process
// credit window), which is what keeps the run lossless.
//
// With --nsqd it drives nsqd instead (see nsq.go), with the same producers,
// credit window, trackers and figures: NSQ has no end-to-end publisher flow
// control either.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"time"
)

type options struct {
	server, ca, system, name, jsonPath    string
	producers, subscribers, topics, batch int
	payload                               int
	duration, warmup, drainTimeout        time.Duration
	count                                 uint64
	rate                                  float64
	maxInflightBytes                      int
	serverPid                             int
	// kind is kindNATS or kindNSQ, from --nsqd and --system.
	kind                   string
	nsqd, nsqdHTTP         string
	nsqMaxInFlight         int
	nsqOutputBufferSize    int
	nsqOutputBufferTimeout time.Duration
	// JetStream (--jetstream): acked async publishes, at most ackWindow
	// unacked per producer; pull consumers fetching up to jsPullMax.
	jetstream  bool
	ackWindow  int
	jsPullMax  int
	jsReplicas int
	// Starling (--starling ADDR): the Go client of clients/go.
	starling, starlingToken, starlingCredentials, starlingFingerprint string
	cpuProfile                                                        string
	// Set by run: the measurement window's start and the run's clock.
	measureStartNs uint64
	nowNs          func() uint64
}

func parse() (options, error) {
	var o options
	flag.StringVar(&o.server, "server", "nats://127.0.0.1:4222", "NATS URL (tls://… for TLS)")
	flag.StringVar(&o.ca, "ca", "", "PEM CA file to trust (enables TLS)")
	flag.StringVar(&o.system, "system", "", "system label in the results (default nats or nats-tls; nsq or nsq-tls with --nsqd)")
	flag.StringVar(&o.name, "name", "", "workload name in the results")
	flag.StringVar(&o.jsonPath, "json", "", "write the result as JSON to this file")
	flag.IntVar(&o.producers, "producers", 1, "publishers; producer i publishes to topic i mod topics")
	flag.IntVar(&o.subscribers, "subscribers", 1, "subscribers per topic")
	flag.IntVar(&o.topics, "topics", 1, "topics (at most producers)")
	flag.IntVar(&o.payload, "payload", 256, "payload bytes (at least 24)")
	flag.IntVar(&o.batch, "batch", 1, "messages per publish round (NATS has no batch publish; recorded only)")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "measured duration")
	flag.Uint64Var(&o.count, "count", 0, "measured messages in all instead of a duration")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "warm-up before measuring")
	flag.Float64Var(&o.rate, "rate", 0, "offered msgs/s over all producers (open loop); 0 = closed loop")
	flag.DurationVar(&o.drainTimeout, "drain-timeout", 30*time.Second, "wait for the last deliveries")
	flag.IntVar(&o.maxInflightBytes, "max-inflight-bytes", 8<<20, "closed loop: unreceived bytes per topic before a producer waits")
	flag.IntVar(&o.serverPid, "server-pid", 0, "server (nats-server or nsqd) PID, to report its CPU time")
	flag.StringVar(&o.nsqd, "nsqd", "", "drive nsqd at this TCP address instead of NATS (TLS with --ca)")
	flag.StringVar(&o.nsqdHTTP, "nsqd-http", "127.0.0.1:4151", "nsqd's HTTP address, to create topics and channels")
	flag.IntVar(&o.nsqMaxInFlight, "nsq-max-in-flight", 2500, "NSQ consumer max in flight (RDY), at most nsqd's --max-rdy-count")
	flag.IntVar(&o.nsqOutputBufferSize, "nsq-output-buffer-size", 16384, "bytes nsqd buffers per consumer before writing (-1: none)")
	flag.DurationVar(&o.nsqOutputBufferTimeout, "nsq-output-buffer-timeout", time.Millisecond, "longest nsqd holds buffered messages for a consumer (below 25ms needs nsqd --min-output-buffer-timeout)")
	flag.BoolVar(&o.jetstream, "jetstream", false, "JetStream: durable, acked publishes to a file-store stream, pull consumers (the server's store and sync_interval are its configuration)")
	flag.IntVar(&o.ackWindow, "ack-window", 256, "JetStream: unacked publishes per producer at most")
	flag.IntVar(&o.jsReplicas, "js-replicas", 1, "JetStream: the stream's replicas (3 needs a cluster of at least 3 nats-servers)")
	flag.IntVar(&o.jsPullMax, "js-pull-max", 1024, "JetStream: messages a consumer's pull requests buffer at most")
	flag.StringVar(&o.starling, "starling", "", "drive a Starling broker at this host:port with the Go client (clients/go); trust with --ca, --starling-fingerprint or a credentials directory, else any certificate")
	flag.StringVar(&o.starlingToken, "starling-token", "", "Starling: authenticate as this token user")
	flag.StringVar(&o.starlingCredentials, "starling-credentials", "", "Starling: a BrokerUser credentials directory (token or tls.crt/tls.key, ca.crt)")
	flag.StringVar(&o.starlingFingerprint, "starling-fingerprint", "", "Starling: trust only a server certificate with this SHA-256 (hex)")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the whole run to this file (go tool pprof)")
	flag.Parse()
	switch {
	case o.producers < 1 || o.subscribers < 1 || o.topics < 1 || o.batch < 1:
		return o, fmt.Errorf("--producers, --subscribers, --topics and --batch must be at least 1")
	case o.topics > o.producers:
		return o, fmt.Errorf("--topics must not exceed --producers")
	case o.payload < headerLen:
		return o, fmt.Errorf("--payload must be at least %d bytes", headerLen)
	case o.rate < 0 || o.duration <= 0:
		return o, fmt.Errorf("--rate must not be negative and --duration must be positive")
	case o.maxInflightBytes < 1:
		return o, fmt.Errorf("--max-inflight-bytes must be at least 1")
	}
	kind, err := transportKind(o.system, o.nsqd, o.jetstream)
	if o.starling != "" {
		if o.system == "" {
			o.system = "starling-go"
		}
		kind, err = kindStarling, nil
		if o.nsqd != "" || o.jetstream {
			err = fmt.Errorf("--starling excludes --nsqd and --jetstream")
		}
	}
	if err != nil {
		return o, err
	}
	o.kind = kind
	if kind == kindJetStream && (o.ackWindow < 1 || o.jsPullMax < 1) {
		return o, fmt.Errorf("--ack-window and --js-pull-max must be at least 1")
	}
	if kind == kindJetStream && (o.jsReplicas < 1 || o.jsReplicas > 5) {
		return o, fmt.Errorf("--js-replicas must be 1 to 5 (JetStream's range), not %d", o.jsReplicas)
	}
	if kind == kindJetStream && o.rate > 0 {
		return o, fmt.Errorf("--jetstream runs are closed loop (no --rate)")
	}
	if kind == kindNSQ && (o.nsqMaxInFlight < 1 || o.nsqOutputBufferTimeout < time.Millisecond) {
		return o, fmt.Errorf("--nsq-max-in-flight must be at least 1 and --nsq-output-buffer-timeout at least 1ms")
	}
	if o.system == "" {
		o.system = kind
		if o.ca != "" {
			o.system = kind + "-tls"
		}
	}
	if o.name == "" {
		o.name = fmt.Sprintf("p%d-s%d-t%d-%dB", o.producers, o.subscribers, o.topics, o.payload)
		if o.rate > 0 {
			o.name += fmt.Sprintf("@%.0f/s", o.rate)
		}
	}
	return o, nil
}

func main() {
	o, err := parse()
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "error: cpu profile:", err)
			os.Exit(2)
		}
	}
	r, err := run(o)
	if o.cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(2)
	}
	fmt.Print(render(r))
	if o.jsonPath != "" {
		if err := r.writeJSON(o.jsonPath); err != nil {
			fmt.Fprintln(os.Stderr, "error:", err)
			os.Exit(2)
		}
	}
	if r.Failure != nil {
		fmt.Fprintf(os.Stderr, "error: %s: %s\n", r.Name, *r.Failure)
		os.Exit(2)
	}
}

func render(r *runResult) string {
	l := r.LatencyUs
	s := fmt.Sprintf("%s · %s · pubsub\n", r.System, r.Name)
	s += fmt.Sprintf("  published    %12d msgs  %12.0f msgs/s\n", r.Published, r.PublishedMsgsPerS)
	s += fmt.Sprintf("  delivered    %12d msgs  %12.0f msgs/s  %.2f MB/s\n", r.Delivered, r.DeliveredMsgsPerS, r.DeliveredMBPerS)
	s += fmt.Sprintf("  latency µs   p50 %.1f · p90 %.1f · p99 %.1f · p99.9 %.1f · max %.1f\n", l.P50, l.P90, l.P99, l.P999, l.Max)
	if a := r.AckLatencyUs; a != nil {
		s += fmt.Sprintf("  pub→ack µs   p50 %.1f · p90 %.1f · p99 %.1f · p99.9 %.1f · max %.1f\n", a.P50, a.P90, a.P99, a.P999, a.Max)
	}
	if r.store != "" {
		s += "  store        " + r.store + "\n"
	}
	s += fmt.Sprintf("  integrity    %d lost of %d expected · %d reordered · %d duplicates\n", r.Lost, r.Expected, r.Reordered, r.Duplicates)
	if r.BrokerCPUS != nil {
		s += fmt.Sprintf("  broker CPU   %.2f s over %.2f s\n", *r.BrokerCPUS, r.ElapsedS)
	}
	if r.ClientCPUS != nil {
		s += fmt.Sprintf("  client CPU   %.2f s (the load generator)\n", *r.ClientCPUS)
	}
	s += fmt.Sprintf("  machine      %d cores · load %s\n", r.Cores, r.LoadAvg)
	if r.Failure != nil {
		s += "  FAILED       " + *r.Failure + "\n"
	}
	return s
}
