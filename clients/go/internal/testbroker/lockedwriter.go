package testbroker

import (
	"bytes"
	"sync"
)

var logMu sync.Mutex

// lockedWriter lets a process's stdout and stderr share one buffer.
type lockedWriter struct{ b *bytes.Buffer }

func (w *lockedWriter) Write(p []byte) (int, error) {
	logMu.Lock()
	defer logMu.Unlock()
	return w.b.Write(p)
}
