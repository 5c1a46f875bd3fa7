// CPU time of another process (the NATS server) from /proc/PID/stat,
// the counterpart of reading process_cpu_seconds_total from Starling's
// /metrics.
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// selfCPU returns this process's user+system CPU seconds (the load generator).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// clockTicks is USER_HZ, 100 on every Linux architecture Go supports here.
const clockTicks = 100.0

// processCPU returns utime+stime of pid in seconds.
func processCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	// Fields after "pid (comm) ": state is field 3; utime 14 and stime 15.
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	u, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return (u + st) / clockTicks, nil
}
