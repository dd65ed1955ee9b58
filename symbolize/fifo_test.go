//go:build linux

package symbolize

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/sframekit/sframekit/elffile"
	"github.com/sframekit/sframekit/internal/testprog"
)

// TestFindDebugFileSkipsFIFOs places FIFOs where the debug file of a
// program would be, by build ID and by debuglink: FindDebugFile, which
// the unwinder and the symbolizer call for every file they load, must
// pass them by, not open them (an open of a FIFO waits for a writer).
func TestFindDebugFileSkipsFIFOs(t *testing.T) {
	testprog.NeedTool(t, "objcopy")
	dir := t.TempDir()
	exe := build(t, dir, "prog", progSource, "-g", "-O1", "-Wl,--build-id")
	stripped := exe + ".stripped"
	run(t, "objcopy", "--strip-debug", "--add-gnu-debuglink="+exe, exe, stripped)
	f, err := elf.Open(stripped)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	id := elffile.BuildID(f)
	if len(id) < 2 {
		t.Fatal("no build ID")
	}
	root := t.TempDir()
	h := fmt.Sprintf("%x", id)
	byID := filepath.Join(root, ".build-id", h[:2], h[2:]+".debug")
	os.MkdirAll(filepath.Dir(byID), 0o755)
	// The debuglink names "prog": FIFOs next to the program and in its
	// .debug directory, where it is looked for.
	os.Remove(exe)
	fifos := []string{byID, exe, filepath.Join(dir, ".debug", "prog")}
	os.MkdirAll(filepath.Join(dir, ".debug"), 0o755)
	for _, p := range fifos {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan string)
	go func() {
		p, d := FindDebugFile(f, stripped, []string{root})
		if d != nil {
			d.Close()
		}
		done <- p
	}()
	select {
	case p := <-done:
		if p != "" {
			t.Errorf("debug file %q, want none", p)
		}
	case <-time.After(time.Minute):
		// Unblock the open so that the test binary can end.
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		t.Fatal("FindDebugFile opened a FIFO and waits for a writer")
	}
}
