//go:build unix

package elffile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// TestOpenFIFO checks that a pipe given by name (as <(cmd) or /dev/stdin
// are) is read by OpenArg, where debug/elf alone fails with "illegal
// seek", and refused by Open, at once, without a writer.
func TestOpenFIFO(t *testing.T) {
	whole, err := os.ReadFile(sample)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if f, err := Open(path); !errors.Is(err, sysfile.ErrNotRegular) {
		t.Errorf("Open of a FIFO: %v, want ErrNotRegular", err)
		if err == nil {
			f.Close()
		}
	}
	go func() {
		w, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return
		}
		w.Write(whole)
		w.Close()
	}()
	f, err := OpenArg(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if FindSFrame(f.File, "") == nil {
		t.Error("no .sframe read from the pipe")
	}
}
