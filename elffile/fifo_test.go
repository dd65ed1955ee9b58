//go:build unix

package elffile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestOpenFIFO checks that a pipe given by name (as <(cmd) or /dev/stdin
// are) is read, where debug/elf alone fails with "illegal seek".
func TestOpenFIFO(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write(whole)
		w.Close()
	}()
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if FindSFrame(f.File, "") == nil {
		t.Error("no .sframe read from the pipe")
	}
}
