// The results schema `starling-bench/1`, field for field the one of
// bench/src/result.rs, so `starling bench report` reads both.
package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

type latency struct {
	Count uint64  `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

func summarise(h *hdrhistogram.Histogram) latency {
	if h.TotalCount() == 0 {
		return latency{}
	}
	us := func(ns int64) float64 { return float64(ns) / 1000 }
	return latency{
		Count: uint64(h.TotalCount()),
		Mean:  h.Mean() / 1000,
		P50:   us(h.ValueAtQuantile(50)),
		P90:   us(h.ValueAtQuantile(90)),
		P99:   us(h.ValueAtQuantile(99)),
		P999:  us(h.ValueAtQuantile(99.9)),
		Max:   us(h.Max()),
	}
}

type runConfig struct {
	Producers   *uint32  `json:"producers,omitempty"`
	Subscribers *uint32  `json:"subscribers,omitempty"`
	Topics      *uint32  `json:"topics,omitempty"`
	Payload     *int     `json:"payload,omitempty"`
	Batch       *uint32  `json:"batch,omitempty"`
	DurationS   *float64 `json:"duration_s,omitempty"`
	Count       *uint64  `json:"count,omitempty"`
	WarmupS     *float64 `json:"warmup_s,omitempty"`
	Rate        *float64 `json:"rate,omitempty"`
	Policy      *string  `json:"policy,omitempty"`
	AckWindow   *uint32  `json:"ack_window,omitempty"`
}

type runResult struct {
	Schema            string    `json:"schema"`
	System            string    `json:"system"`
	TLS               bool      `json:"tls"`
	Name              string    `json:"name"`
	Kind              string    `json:"kind"`
	Config            runConfig `json:"config"`
	ElapsedS          float64   `json:"elapsed_s"`
	Published         uint64    `json:"published"`
	Delivered         uint64    `json:"delivered"`
	Expected          uint64    `json:"expected"`
	Lost              uint64    `json:"lost"`
	Reordered         uint64    `json:"reordered"`
	Duplicates        uint64    `json:"duplicates"`
	Dropped           uint64    `json:"dropped"`
	PublishedMsgsPerS float64   `json:"published_msgs_per_s"`
	DeliveredMsgsPerS float64   `json:"delivered_msgs_per_s"`
	DeliveredMBPerS   float64   `json:"delivered_mb_per_s"`
	LatencyUs         latency   `json:"latency_us"`
	AckLatencyUs      *latency  `json:"ack_latency_us,omitempty"`
	BrokerCPUS        *float64  `json:"broker_cpu_s,omitempty"`
	BrokerCPUSource   *string   `json:"broker_cpu_source,omitempty"`
	ClientCPUS        *float64  `json:"client_cpu_s,omitempty"`
	LoadAvg           string    `json:"load_avg"`
	Cores             int       `json:"cores"`
	StartedUnix       int64     `json:"started_unix"`
	Failure           *string   `json:"failure,omitempty"`
	// store: JetStream's stream state after the run (printed, not in the JSON).
	store string
}

func newResult(system string, tls bool, name string, cfg runConfig) *runResult {
	return &runResult{
		Schema:      "starling-bench/1",
		System:      system,
		TLS:         tls,
		Name:        name,
		Kind:        "pubsub",
		Config:      cfg,
		LoadAvg:     loadAvg(),
		Cores:       runtime.NumCPU(),
		StartedUnix: time.Now().Unix(),
	}
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

func (r *runResult) writeJSON(path string) error {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
