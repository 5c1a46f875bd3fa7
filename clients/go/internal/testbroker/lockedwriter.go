package testbroker

// The broker process's log buffer, shared by its stdout and stderr.

import (
	"bytes"
	"sync"
)

var logMu sync.Mutex

// lockedWriter lets a process's stdout and stderr share one buffer.
type lockedWriter struct{ b *bytes.Buffer }

// Write appends p under the log lock.
func (w *lockedWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	return w.b.Write(p)
}
