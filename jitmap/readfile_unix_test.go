//go:build unix

package jitmap

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestReadFileRegularOnly: a FIFO is refused at once (no writer is
// waited for), and so are a device and a symbolic link.
func TestReadFileRegularOnly(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "perf-1.map")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(fifo); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	if _, err := ReadFile("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	p := filepath.Join(t.TempDir(), "m")
	os.WriteFile(p, []byte("10 2 a\n"), 0o644)
	if data, err := ReadFile(p); err != nil || string(data) != "10 2 a\n" {
		t.Errorf("regular file: %q %v", data, err)
	}
	link := filepath.Join(filepath.Dir(p), "perf-2.map")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(link); err == nil || !strings.Contains(err.Error(), "symbolic link, not followed") {
		t.Errorf("a symbolic link: %v", err)
	}
}
