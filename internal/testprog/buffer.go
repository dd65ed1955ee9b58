package testprog

import (
	"bytes"
	"sync"
)

// Buffer is a bytes.Buffer that a command (exec.Cmd's copying goroutine)
// writes while a test reads it: exec.Cmd writes Stdout and Stderr from a
// goroutine of its own until Wait, so a plain bytes.Buffer read before
// then is a data race.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write implements io.Writer.
func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
