package perfunwind

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/sframekit/sframekit/internal/sysfile"
)

// hostileFile maps name (executable) in a session over symfs and returns
// the File the session found for it. A FIFO open that blocks is released
// after a minute by opening its other end, so that a regression fails
// here instead of hanging the run: the test asserts what was found, not
// how fast.
func hostileFile(t *testing.T, symfs, name string, fifos ...string) *File {
	t.Helper()
	s, err := NewSession(Options{SymFS: symfs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Mmap(1, 1, 0x400000, 0x1000, 0, name, true, nil)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Errorf("mapping %s: still opening after a minute (blocked on a FIFO)", name)
		for _, p := range fifos {
			if w, err := os.OpenFile(p, os.O_WRONLY|unix.O_NONBLOCK, 0); err == nil {
				w.Close()
			}
		}
		<-done
	}
	for _, f := range s.Files() {
		if f.Name == name {
			return f
		}
	}
	t.Fatalf("no file for %s", name)
	return nil
}

// TestMappedFIFO maps a FIFO, under --symfs, by its path and through a
// symbolic link: each is refused as not a regular file, at once (opening
// a FIFO without a writer would wait for ever), and the error names it.
func TestMappedFIFO(t *testing.T) {
	symfs := t.TempDir()
	if err := os.MkdirAll(filepath.Join(symfs, "usr/bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(symfs, "usr/bin/prog")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("prog", filepath.Join(symfs, "usr/bin/link")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ symfs, name, path string }{
		{symfs, "/usr/bin/prog", fifo},
		{symfs, "/usr/bin/link", filepath.Join(symfs, "usr/bin/link")},
		{"", fifo, fifo},
	} {
		f := hostileFile(t, c.symfs, c.name, fifo)
		if f.Path != "" || !errors.Is(f.Err, sysfile.ErrNotRegular) || !strings.Contains(f.Err.Error(), c.path) {
			t.Errorf("%s under %q: path %q, error %v; want not a regular file, naming %s", c.name, c.symfs, f.Path, f.Err, c.path)
		}
	}
	f := hostileFile(t, "", "/dev/tty")
	if f.Path != "" || !errors.Is(f.Err, sysfile.ErrNotRegular) && !errors.Is(f.Err, os.ErrNotExist) && !errors.Is(f.Err, unix.ENXIO) {
		t.Errorf("/dev/tty: path %q, error %v; want not a regular file", f.Path, f.Err)
	}
}

// TestSymFSConfined maps a recorded path that climbs out of --symfs with
// "/..": it is looked up inside the directory, where it is missing, and
// never outside, where a file of that name exists.
func TestSymFSConfined(t *testing.T) {
	root := t.TempDir()
	symfs := filepath.Join(root, "symfs")
	if err := os.MkdirAll(symfs, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable() // an ELF file outside symfs
	if err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(root, "outside")
	if err := os.Link(self, outside); err != nil {
		data, err := os.ReadFile(self)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(outside, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	name := "/../../../../../../../../.." + outside
	f := hostileFile(t, symfs, name)
	if f.Path != "" {
		t.Errorf("%s under %s: found at %s, outside --symfs", name, symfs, f.Path)
	}
	if !errors.Is(f.Err, os.ErrNotExist) || !strings.Contains(f.Err.Error(), filepath.Join(symfs, outside)) {
		t.Errorf("%s under %s: error %v, want not found at %s", name, symfs, f.Err, filepath.Join(symfs, outside))
	}
}

// TestTruncatedELF maps files under --symfs cut short of what their
// headers describe: the error names the file and says it is truncated,
// with the sizes, where debug/elf alone says "EOF".
func TestTruncatedELF(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	whole, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	symfs := t.TempDir()
	for _, n := range []int{40, 64, 300, len(whole) / 2} {
		name := filepath.Join("/", "cut", strings.Repeat("x", 1+n%7))
		p := filepath.Join(symfs, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, whole[:n], 0o644); err != nil {
			t.Fatal(err)
		}
		f := hostileFile(t, symfs, name)
		if f.Err == nil || !strings.Contains(f.Err.Error(), p) || !strings.Contains(f.Err.Error(), "truncated ELF file") {
			t.Errorf("%d bytes: error %v, want one naming %s and saying it is truncated", n, f.Err, p)
		}
	}
}

// TestSummaryQuotesNames maps files whose recorded names carry terminal
// escape sequences and a newline: the summary lists them with those
// bytes escaped, on one line each.
func TestSummaryQuotesNames(t *testing.T) {
	s, err := NewSession(Options{SymFS: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	names := []string{"/usr/bin/\x1b]0;owned\x07prog", "/lib/a\nfiles not used: 0\nb.so", "/lib/\u009b2Jc.so"}
	for i, n := range names {
		s.Mmap(1, 1, 0x400000+uint64(i)<<20, 0x1000, 0, n, true, nil)
	}
	var b strings.Builder
	if err := WriteSummary(&b, s); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\x07\u009b") || strings.Count(out, "\nfiles not used") != 1 {
		t.Errorf("control characters reach the summary:\n%q", out)
	}
	for _, want := range []string{`/usr/bin/\x1b]0;owned\x07prog`, `/lib/a\x0afiles not used: 0\x0ab.so`, `/lib/\xc2\x9b2Jc.so`} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %s:\n%s", want, out)
		}
	}
}
